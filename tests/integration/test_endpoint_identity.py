"""The endpoint a model reaches is part of its cache identity: the issue's two-server sequence.

``model=gpt-4`` names no ``api_base``; litellm and the OpenAI SDK take the server from
``OPENAI_BASE_URL`` / ``OPENAI_API_BASE``. Two local servers answer to ``gpt-4``: the first
remembers iris, the second does not. After a run against the first, pointing the environment
at the second and forcing a re-run must ask the second server and log its answers, not serve
the first server's answers from the cache.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from flaky_grid import mlflow_runs, run_sweep
from flaky_server import FlakyServer

from tabmem.data import dataset_specs, load_dataset

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic")

EXPERIMENT = "endpoint-identity"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FlakyServer, FlakyServer]]:
    iris = load_dataset(dataset_specs()["iris"])
    first = FlakyServer([iris], aliases={"gpt-4": "oracle-memorizer"})
    second = FlakyServer([iris], aliases={"gpt-4": "oracle-null"})
    with first, second:
        yield first, second


def pointed_at(server: FlakyServer) -> dict[str, str]:
    """The issue's environment: a test key and both of OpenAI's URL variables on ``server``."""
    return {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_BASE": server.base_url,
    }


@pytest.fixture
def no_provider_env(monkeypatch) -> None:
    """Nothing from the caller's environment may point a run at a real provider."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "AZURE_", "ANTHROPIC_")):
            monkeypatch.delenv(name)


def run_gpt4(outputs: Path, *extra: str, **env: str):
    args = ("model=gpt-4", "dataset=iris", "test=row_completion", *extra)
    return run_sweep(outputs, None, EXPERIMENT, *args, **env)


def completions(client, run, folder: Path) -> list[str]:
    path = client.download_artifacts(run.info.run_id, "queries.json", str(folder))
    table = json.loads(Path(path).read_text())
    column = table["columns"].index("completion")
    return [row[column] for row in table["data"]]


def test_a_new_endpoint_in_the_environment_is_asked_and_logged(servers, tmp_path, no_provider_env):
    first, second = servers
    outputs = tmp_path / "check"

    done = run_gpt4(outputs, **pointed_at(first))
    assert done.returncode == 0, done.stdout + done.stderr
    asked_first = first.request_count
    assert asked_first >= 25 and second.request_count == 0

    again = run_gpt4(outputs, "force=true", **pointed_at(second))
    assert again.returncode == 0, again.stdout + again.stderr
    assert first.request_count == asked_first
    assert second.request_count >= 25

    runs, client = mlflow_runs(outputs, EXPERIMENT)
    by_endpoint = {r.data.tags["endpoint"]: r for r in runs}
    assert set(by_endpoint) == {first.base_url, second.base_url}
    old, new = by_endpoint[first.base_url], by_endpoint[second.base_url]
    assert new.data.metrics["model_calls"] >= 25 and new.data.metrics["cache_hits"] == 0
    assert new.data.metrics["prompt_tokens"] == second.usage_totals["prompt_tokens"] > 0
    assert new.data.metrics["completion_tokens"] == second.usage_totals["completion_tokens"]
    assert new.data.metrics["cost_usd"] > 0  # gpt-4 is in litellm's offline cost map
    assert old.data.tags["verdict"] == "evidence"
    assert new.data.tags["verdict"] != "evidence"

    old_answers = completions(client, old, tmp_path / "old")
    new_answers = completions(client, new, tmp_path / "new")
    assert len(new_answers) == len(old_answers) == 25
    assert sum(a == b for a, b in zip(old_answers, new_answers, strict=True)) < 25
