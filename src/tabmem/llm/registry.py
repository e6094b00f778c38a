"""Build a ready ``LanguageModel`` from a model config (``conf/model/*.yaml``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tabmem.errors import ConfigError
from tabmem.llm.base import Backend, GenerationParams, Message
from tabmem.llm.budget import Budget
from tabmem.llm.cache import ResponseCache
from tabmem.llm.client import LanguageModel, RetryPolicy
from tabmem.llm.plan import RequestPlan
from tabmem.llm.pricing import model_price
from tabmem.llm.reasoning import Reasoning
from tabmem.llm.weights import assembled_file, package_file


class OracleBackend:
    """A reference model: an OpenAI-compatible server on 127.0.0.1, reached through litellm.

    Its identity names the oracle, not the server's port, so its answers stay cached
    across runs; the HTTP path is nevertheless exercised on every fresh query.
    """

    def __init__(
        self, oracle: str, name: str, timeout: float, recall: Mapping[str, Any] | None = None
    ) -> None:
        from tabmem.llm.litellm_backend import LiteLLMBackend
        from tabmem.llm.oracle import ORACLES, OracleServer, load_available_datasets
        from tabmem.llm.oracle.partial import PartialOracle

        model_id, version = f"oracle-{oracle}", ""
        if oracle == "partial":
            model_id, version = _partial_id(recall or {}), PartialOracle.version
        elif model_id in ORACLES:
            version = ORACLES[model_id].version
        else:
            raise ConfigError(
                f"Unknown oracle '{oracle}'; the oracles are: "
                f"{', '.join(name.removeprefix('oracle-') for name in ORACLES)}, partial."
            )
        self.server = OracleServer(load_available_datasets())
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

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        return self._client.chat(messages, params)

    def complete(self, prompt: str, params: GenerationParams) -> str:
        return self._client.complete(prompt, params)

    def take_usage(self) -> dict[str, int]:
        """The token usage the oracle server reported for this thread's last answer."""
        return self._client.take_usage()

    def count_tokens(self, text: str) -> int | None:
        return None

    def tokenize(self, text: str) -> list[str] | None:
        return None

    def close(self) -> None:
        self.server.stop()


def _partial_id(recall: Mapping[str, Any]) -> str:
    """The served name of the partial memorizer a config's ``recall`` section describes."""
    from tabmem.llm.oracle.partial import Recall

    try:
        return Recall(
            float(recall["share"]), int(recall["seed"]), str(recall.get("rows", "random"))
        ).model_id
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(
            f"oracle: partial needs recall.share (0 to 1), recall.seed and recall.rows "
            f"(random or first): {error}"
        ) from None


def _weights_path(cfg: Mapping[str, Any], weights_dir: Path) -> Path:
    weights = cfg.get("weights") or {}
    hint = weights.get("install_hint", "run make demo, which installs it")
    if weights.get("path"):
        return Path(weights["path"]).expanduser()
    if weights.get("assemble"):
        target = weights_dir / weights["file"]
        return assembled_file(weights["assemble"], target, hint)
    if weights.get("package"):
        return package_file(weights["package"], weights["file"], hint)
    raise ConfigError(f"Model '{cfg['name']}' has no weights: set weights.path or weights.package.")


def build_backend(
    cfg: Mapping[str, Any],
    weights_dir: Path,
    require_credentials: bool = True,
    threads: int | None = None,
) -> Backend:
    """The backend a model config names, or one clear error (a dry run, which sends nothing,
    builds API models without their keys). ``threads``: the CPU threads a local model uses
    when its config leaves ``n_threads`` null (the runner's share of the cores)."""
    kind = cfg.get("backend")
    name = cfg["name"]
    timeout = float(cfg.get("timeout", 60))
    if kind == "llama_cpp":
        from tabmem.llm.llama_cpp_backend import LlamaCppBackend

        return LlamaCppBackend(
            weights=_weights_path(cfg, weights_dir),
            name=name,
            context_window=int(cfg.get("context_window", 4096)),
            n_threads=cfg.get("n_threads") or threads,
        )
    if kind == "litellm":
        from tabmem.llm.litellm_backend import LiteLLMBackend

        reasoning = Reasoning.from_config(dict(cfg), str(cfg.get("litellm_model", "")))
        extra = dict(cfg.get("extra_params") or {})
        if reasoning.effort:
            extra["reasoning_effort"] = reasoning.effort
        return LiteLLMBackend(
            model=cfg["litellm_model"],
            completion_model=cfg.get("completion_model"),
            name=name,
            api_base=cfg.get("api_base"),
            api_base_env=cfg.get("api_base_env"),
            api_key_env=cfg.get("api_key_env"),
            timeout=timeout,
            extra_params=extra,
            require_credentials=require_credentials,
            stream=bool(cfg.get("stream", False)),
            drop_params=reasoning.active,
            prompt_caching=str(cfg.get("prompt_caching", "auto")),
        )
    if kind == "oracle":
        return OracleBackend(
            oracle=cfg["oracle"], name=name, timeout=timeout, recall=cfg.get("recall")
        )
    if kind == "transformers":
        from tabmem.llm.transformers_backend import TransformersBackend

        return TransformersBackend.from_config(cfg, _weights_path(cfg, weights_dir))
    if kind == "vllm":
        from tabmem.llm.vllm_backend import VLLMBackend

        weights = _weights_path(cfg, weights_dir) if cfg.get("weights") else None
        return VLLMBackend.from_config(cfg, weights)
    if kind == "baseline":
        from tabmem.llm.baselines import BaselineBackend

        return BaselineBackend.from_config(cfg)
    if kind == "python":
        from tabmem.llm.python_backend import PythonBackend

        return PythonBackend.from_config(cfg)
    raise ConfigError(
        f"Model '{name}' has backend '{kind}', which tabmem does not know; "
        "use llama_cpp, litellm, oracle, baseline, transformers, vllm or python."
    )


def build_model(
    cfg: Mapping[str, Any],
    cache: ResponseCache | None,
    weights_dir: Path,
    show_progress: bool = True,
    budget: Budget | None = None,
    plan: RequestPlan | None = None,
    threads: int | None = None,
    batch_dir: Path | None = None,
) -> LanguageModel:
    """A cached, concurrent, retrying model from its config; priced, capped by ``budget``,
    and sending nothing when ``plan`` is given (a dry run). ``batch_dir``: send through the
    Batch API, at its price, keeping pending batches' ids there."""
    retry = cfg.get("retry") or {}
    price = model_price(cfg, batch=batch_dir is not None)
    if budget is not None and price is None:
        raise ConfigError(
            f"budget_usd needs the price of model '{cfg['name']}', which litellm's cost map "
            "lacks; set input_cost_per_token and output_cost_per_token in its config."
        )
    backend = build_backend(cfg, weights_dir, require_credentials=plan is None, threads=threads)
    batch = None
    if batch_dir is not None:
        if not hasattr(backend, "batch_client"):
            raise ConfigError(
                f"batch=true sends API requests through a Batch API; model '{cfg['name']}' "
                f"(backend {cfg.get('backend')}) is not an API model. Run it without batch=true."
            )
        if plan is None:
            batch = backend.batch_client(batch_dir, float(cfg.get("batch_poll_seconds", 30)))
    return LanguageModel(
        backend=backend,
        name=cfg["name"],
        prompt_form=cfg.get("prompt_form", "chat"),
        context_window=int(cfg.get("context_window", 4096)),
        cache=cache,
        max_concurrency=int(cfg.get("max_concurrency", 1)),
        retry=RetryPolicy(
            max_retries=int(retry.get("max_retries", 4)),
            base_delay=float(retry.get("base_delay", 1.0)),
            max_delay=float(retry.get("max_delay", 60.0)),
        ),
        show_progress=show_progress,
        price=price,
        budget=budget,
        plan=plan,
        reasoning=Reasoning.from_config(dict(cfg), str(cfg.get("litellm_model") or cfg["name"])),
        batch=batch,
    )
