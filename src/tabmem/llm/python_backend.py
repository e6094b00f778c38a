"""A model given as a Python object: a callable, or an object with ``complete``/``chat``.

``tabmem.run(model=obj, model_name=...)`` registers the object here under its identity (the
name the user gives and the object's qualified name) and the model config carries only that
identity, so the runner builds it like any backend: behind the same cache, concurrency,
retries and progress bars. The registry lives in this process, so such a model runs only in
the process that registered it (``tabmem.grid`` runs its cells in-process for that reason).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any

from tabmem.errors import ConfigError, ProviderError
from tabmem.llm.base import BaseBackend, GenerationParams, Message

_registered: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()


def qualified_name(model: Any) -> str:
    """``module.qualname`` of a function, or of an object's class when it is not a function."""
    owner = model if inspect.isroutine(model) else type(model)
    return f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', '?')}"


def prompt_form_of(model: Any) -> str:
    """``chat`` for an object with only a ``chat`` method, else ``completion``."""
    has_chat = callable(getattr(model, "chat", None))
    has_complete = callable(getattr(model, "complete", None))
    if not (has_chat or has_complete or callable(model)):
        raise ConfigError(
            f"{qualified_name(model)} is not a model: pass a callable (prompt -> text) or an "
            "object with a complete(prompt, **params) or chat(messages, **params) method."
        )
    return "chat" if has_chat and not has_complete else "completion"


def register(model: Any, name: str) -> str:
    """Make ``model`` buildable as ``backend: python`` under ``name``; return its qualified name.

    Registering another object under the same name and qualified name replaces the first: the
    cache still holds the first one's answers under that identity (see docs/python-api.md).
    """
    prompt_form_of(model)
    callable_name = qualified_name(model)
    with _lock:
        _registered[(name, callable_name)] = model
    return callable_name


def _accepted(function: Callable[..., Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The generation parameters ``function`` takes by keyword (all of them if it has **kw)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return dict(params)
    kinds = {p.kind for p in signature.parameters.values()}
    if inspect.Parameter.VAR_KEYWORD in kinds:
        return dict(params)
    named = {
        name
        for name, p in signature.parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return {k: v for k, v in params.items() if k in named}


def cut_at_stop(text: str, stop: tuple[str, ...]) -> str:
    """The text up to its first stop sequence, as an API server cuts a completion."""
    ends = [text.find(s) for s in stop if s and s in text]
    return text[: min(ends)] if ends else text


class PythonBackend(BaseBackend):
    """Calls a registered Python object; its identity is its given name and qualified name."""

    def __init__(self, model: Any, name: str, callable_name: str) -> None:
        self.model = model
        self.name = name
        self.identity = {"provider": "python", "model": name, "callable": callable_name}

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], ctx: object = None) -> PythonBackend:
        key = (str(cfg["name"]), str(cfg.get("callable")))
        with _lock:
            model = _registered.get(key)
        if model is None:
            raise ConfigError(
                f"Model '{key[0]}' is a Python object ({key[1]}) that this process does not "
                "hold: run it with tabmem.run(model=<the object>, model_name=...) in the "
                "process that defines it."
            )
        return cls(model, *key)

    def _call(self, method: str, first: Any, params: GenerationParams) -> str:
        function = getattr(self.model, method, None)
        if function is None and method == "complete" and callable(self.model):
            function = self.model
        if not callable(function):
            raise ProviderError(f"Model '{self.name}' has no {method}() method.")
        text = function(first, **_accepted(function, params.as_dict()))
        if not isinstance(text, str):
            raise ProviderError(
                f"Model '{self.name}' returned a {type(text).__name__} from {method}(), "
                "not a string."
            )
        return cut_at_stop(text, params.stop)

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        return self._call("chat", [dict(m) for m in messages], params)

    def complete(self, prompt: str, params: GenerationParams) -> str:
        return self._call("complete", prompt, params)

    def close(self) -> None:
        """The object belongs to the caller, who may use it again: nothing to release."""
