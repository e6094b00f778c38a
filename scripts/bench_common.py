"""What the benchmark scripts share: test configs composed as a run composes them, the smoke
size, a model that only records its requests, a latency server in its own process, and
plain-text tables."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.pop("MLFLOW_TRACKING_URI", None)  # each benchmark logs into its own temporary store
ROOT = Path(__file__).resolve().parents[1]

from omegaconf import OmegaConf  # noqa: E402

from tabmem.api import compose_config  # noqa: E402
from tabmem.battery.base import TestContext, get_test  # noqa: E402
from tabmem.data import Dataset  # noqa: E402
from tabmem.llm.base import GenerationParams, Message, Request, Response  # noqa: E402
from tabmem.llm.client import LanguageModel  # noqa: E402

SMOKE_ENV = "TABMEM_BENCH_SMOKE"


def add_smoke_flag(parser: argparse.ArgumentParser) -> None:
    """``--smoke``: the benchmark at its smallest size (seconds), as the test suite runs it;
    ``TABMEM_BENCH_SMOKE=1`` in the environment does the same."""
    parser.add_argument(
        "--smoke",
        action="store_true",
        default=os.environ.get(SMOKE_ENV, "") not in ("", "0"),
        help=f"smallest size, seconds (the test suite's; also {SMOKE_ENV}=1)",
    )


def composed_test_config(name: str, *overrides: str) -> dict[str, Any]:
    """Test ``name``'s settings as ``python run.py test=<name> <overrides>`` composes them
    (its defaults list included, such as ``/shared/windows``)."""
    config = OmegaConf.to_container(compose_config([f"test={name}", *overrides]).test, resolve=True)
    assert isinstance(config, dict)
    return config


def sized_test_config(name: str, queries: int) -> dict[str, Any]:
    """A test's config asking ``queries`` queries: ``n_queries`` where the test has it, else
    (the header test) one split per data row."""
    config = composed_test_config(name)
    if "n_queries" in config:
        return {**config, "n_queries": queries}
    if name == "header":
        return {**config, "split_rows": list(range(1, queries + 1)), "n_rows": queries + 1}
    raise SystemExit(f"Cannot size test '{name}' to {queries} queries.")


class _Silent:
    """A backend stub: never asked (the recorder answers), counts tokens with ``counter``."""

    def __init__(self, counter: Callable[[str], int | None]) -> None:
        self.identity = {"provider": "recorder"}
        self._counter = counter

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        return ""

    def complete(self, prompt: str, params: GenerationParams) -> str:
        return ""

    def count_tokens(self, text: str) -> int | None:
        return self._counter(text)

    def tokenize(self, text: str) -> list[str] | None:
        return None

    def close(self) -> None:
        pass


class RecordingModel(LanguageModel):
    """A model that records every request a test sends and answers each with empty text."""

    def __init__(
        self,
        prompt_form: str,
        context_window: int,
        counter: Callable[[str], int | None] = lambda text: None,
    ) -> None:
        super().__init__(
            _Silent(counter),
            "recorder",
            prompt_form=prompt_form,
            context_window=context_window,
            show_progress=False,
        )
        self.requests: list[Request] = []

    def run(self, requests: Sequence[Request], description: str = "queries") -> list[Response]:
        self.requests.extend(requests)
        return [Response(text="") for _ in requests]


def recorded_requests(
    test: str, dataset: Dataset, params: dict[str, Any], model: RecordingModel, seed: int = 0
) -> list[Request]:
    """The requests ``test`` sends on ``dataset`` (its first round, answered with empty text)."""
    get_test(test)(TestContext(dataset=dataset, model=model, params=params, seed=seed))
    return model.requests


def start_latency_server(latency: float, datasets: str) -> tuple[subprocess.Popen, str]:
    """The tests' flaky server (``tests/integration/flaky_server.py``) in its own process (its
    CPU does not compete with the client's interpreter); returns the process and its base URL."""
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "integration" / "flaky_server.py"),
            "--latency",
            str(latency),
            "--datasets",
            datasets,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A plain-text table (readable in CI logs)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)
