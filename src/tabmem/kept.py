"""Values kept while they are among the most recently used: fits and fitted models that take
long to build and that later questions ask for again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Kept(Generic[V]):
    """The ``size`` most recently used values by key, each built once while it is kept. Safe
    to share between threads: a value is built under the lock, so never twice at once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value kept under ``key``, built by ``build`` where none is."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
            else:
                self._values[key] = build()
                if len(self._values) > self.size:
                    self._values.popitem(last=False)
            return self._values[key]
