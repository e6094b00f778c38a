"""litellm's warnings, each said once per process.

litellm logs some warnings on every call: counting a dry run's prompt tokens for a model whose
Hugging Face tokenizer cannot be fetched offline (``llama-70b``) warned, in 300 characters, for
each of a cell's requests, and each line came out twice under Hydra (litellm's own handler and
the root logger's). ``say_once`` installs, once, a filter on litellm's logger that lets each
distinct warning through the first time only, and leaves the printing to the root logger's
handlers where the application has any (Hydra's, which also write the job's log file).
"""

from __future__ import annotations

import logging
import threading

LOGGER = "LiteLLM"


class _FirstTimeOnly(logging.Filter):
    """Pass a warning (or worse) the first time its text is logged; drop its repeats."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[int, str]] = set()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.levelno, record.getMessage())
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
        return True


class _LeftToRoot(logging.Filter):
    """On litellm's own handler: stay quiet where the root logger has handlers, which the
    record reaches anyway (it propagates), so it is printed once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not logging.getLogger().handlers


_installed = False
_install_lock = threading.Lock()


def say_once() -> None:
    """Install the filters on litellm's logger and its handlers (once per process; call it
    after importing litellm, which adds its handler at import)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        logger = logging.getLogger(LOGGER)
        logger.addFilter(_FirstTimeOnly())
        for handler in logger.handlers:
            handler.addFilter(_LeftToRoot())
        _installed = True
