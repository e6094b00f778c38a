"""Errors meant for people: one sentence that says what went wrong and what to do."""


class TabmemError(Exception):
    """A problem the user can fix (missing file, unknown name, missing key).

    The message is a single sentence shown as-is, without a traceback.
    """


class DatasetError(TabmemError):
    """A dataset is missing, unreadable or malformed."""


class ConfigError(TabmemError):
    """A configuration names something that does not exist or is inconsistent."""


class ProviderError(TabmemError):
    """A model provider cannot be used (missing key, missing base URL, missing package)."""


class TransientProviderError(Exception):
    """A provider failure worth retrying (timeout, 429, 5xx, dropped connection).

    ``retry_after`` is the server's requested wait in seconds, when it sent one.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
