"""The reference models as a backend: their server started on 127.0.0.1, reached over HTTP."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tabmem.errors import ConfigError
from tabmem.llm.base import BaseBackend, GenerationParams, Message

if TYPE_CHECKING:
    from tabmem.data import Dataset
    from tabmem.llm.backends import BuildContext


class OracleBackend(BaseBackend):
    """A reference model: an OpenAI-compatible server on 127.0.0.1, reached through litellm.

    Its identity names the oracle, not the server's port, so its answers stay cached
    across runs; the HTTP path is nevertheless exercised on every fresh query.
    """

    def __init__(
        self,
        oracle: str,
        name: str,
        timeout: float,
        recall: Mapping[str, Any] | None = None,
        spread: float | None = None,
    ) -> None:
        from tabmem.llm.litellm_backend import LiteLLMBackend
        from tabmem.llm.oracle import ORACLES, OracleServer, load_available_datasets
        from tabmem.llm.oracle.catalog import at_spread

        model_id, version = f"oracle-{oracle}", ""
        if oracle == "partial":
            model_id, version = _partial_id(recall or {})
        elif model_id in ORACLES:
            version = ORACLES[model_id].version
            try:
                model_id = at_spread(model_id, spread)
            except ValueError as error:
                raise ConfigError(f"oracle: {oracle}: {error}") from None
        else:
            raise ConfigError(
                f"Unknown oracle '{oracle}'; the oracles are: "
                f"{', '.join(name.removeprefix('oracle-') for name in ORACLES)}, partial."
            )
        known = load_available_datasets()
        self._known = ({d.path.resolve() for d in known}, {d.text for d in known})
        self._knows_files = oracle != "null"  # the null model knows no file and makes text up
        self.server = OracleServer(known)
        self.server.start()
        self._client = LiteLLMBackend(
            model=f"openai/{model_id}",
            completion_model=f"text-completion-openai/{model_id}",
            name=name,
            api_base=self.server.base_url,
            timeout=timeout,
            stream=True,
        )
        self.identity = {"provider": "oracle", "model": model_id, "version": version}

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], ctx: BuildContext) -> OracleBackend:
        return cls(
            oracle=cfg["oracle"],
            name=cfg["name"],
            timeout=float(cfg.get("timeout", 60)),
            recall=cfg.get("recall"),
            spread=None if cfg.get("spread") is None else float(cfg["spread"]),
        )

    def unknown_data_reason(self, dataset: Dataset) -> str:
        """Why this oracle cannot answer about ``dataset`` (it knows the shipped files only,
        and a transform of one), or "" when it can."""
        paths, texts = self._known
        if not self._knows_files or dataset.path.resolve() in paths or dataset.text in texts:
            return ""
        return (
            f"the reference model '{self.identity['model']}' knows only the files shipped in "
            f"data/, not {dataset.path.name}, so it cannot answer about this file"
        )

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        return self._client.chat(messages, params)

    def complete(self, prompt: str, params: GenerationParams) -> str:
        return self._client.complete(prompt, params)

    def take_usage(self) -> dict[str, int]:
        """The token usage the oracle server reported for this thread's last answer."""
        return self._client.take_usage()

    def close(self) -> None:
        self.server.stop()


def _partial_id(recall: Mapping[str, Any]) -> tuple[str, str]:
    """The served name and cache version of the partial memorizer a config's ``recall``
    section describes."""
    from tabmem.llm.oracle.partial import PartialOracle, Recall

    try:
        parsed = Recall(
            float(recall["share"]),
            int(recall["seed"]),
            str(recall.get("rows", "random")),
            str(recall.get("rest", "learner")),
            bool(recall.get("volunteers", True)),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(
            f"oracle: partial needs recall.share (0 to 1), recall.seed, recall.rows "
            f"(random or first) and recall.rest (learner, forest or chance): {error}"
        ) from None
    return parsed.model_id, PartialOracle.version_for(parsed)
