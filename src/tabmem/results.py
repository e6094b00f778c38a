"""The result object every test returns, and the record one test of one cell leaves behind;
terminal output, MLflow logging, the summary and the Python API are views of them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


class Verdict(StrEnum):
    """What a test concluded about one model on one dataset."""

    EVIDENCE = "evidence"
    NO_EVIDENCE = "no_evidence"
    AMBIGUOUS = "ambiguous"
    NOT_APPLICABLE = "not_applicable"


@dataclass
class QueryRecord:
    """One question put to the model and how its answer scored.

    ``prompt`` is the plain-completion text or the chat messages rendered as text;
    ``error`` is set when the query failed (the provider gave up, or the answer was
    empty or unparseable) and such a query always scores as a miss.
    """

    prompt: str
    expected: str
    completion: str
    score: float
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class TestResult:
    """Counts, rate, baseline, p-value and verdict of one test on one cell.

    ``metrics`` holds every number worth logging (counts and rates); ``info`` holds
    non-numeric context (the chosen feature, the rule that decided the verdict).
    ``tables`` (artifact file name -> pandas DataFrame, e.g. ``samples.json``) and
    ``figures`` (file name -> matplotlib Figure, e.g. ``correlations.png``) are logged
    as MLflow artifacts beside the query table.
    """

    __test__ = False  # not a pytest class

    test: str
    verdict: Verdict
    reason: str
    n_queries: int
    n_hits: int
    rate: float | None = None
    baseline: float | None = None
    p_value: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    records: list[QueryRecord] = field(default_factory=list)
    tables: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def not_applicable(
        cls,
        test: str,
        reason: str,
        *,
        info: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float] | None = None,
        records: Sequence[QueryRecord] = (),
    ) -> TestResult:
        """The result of a test that cannot decide on this cell, and why: nothing was asked,
        or (with ``records``) the answers could not be scored."""
        return cls(
            test=test,
            verdict=Verdict.NOT_APPLICABLE,
            reason=reason,
            n_queries=len(records),
            n_hits=0,
            metrics=dict(metrics or {}),
            info=dict(info or {}),
            records=list(records),
        )

    def all_metrics(self) -> dict[str, float]:
        """Every numeric figure of the result, under stable names, for logging."""
        figures: dict[str, float] = {"n_queries": self.n_queries, "n_hits": self.n_hits}
        if self.rate is not None:
            figures["rate"] = self.rate
        if self.baseline is not None:
            figures["baseline"] = self.baseline
        if self.p_value is not None:
            figures["p_value"] = self.p_value
        figures["n_failed_queries"] = sum(1 for r in self.records if r.error)
        figures.update(self.metrics)
        return figures


SPEND = (
    "model_calls",
    "cache_hits",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "evaluated_tokens",
    "cost_usd",
    "unpriced_answers",
    "uncounted_answers",
)
"""What a cell's queries spent (``CallStats``' counters the summary shows and sums)."""


def figure_text(hits: int, queries: int, p_value: float | None) -> str:
    """The figure a summary row shows: hits of queries and, if any, the p-value."""
    text = f"{hits}/{queries}"
    return text if p_value is None else f"{text} (p={p_value:.2g})"


@dataclass
class CellResult:
    """One test of one cell, as it was run and as MLflow holds it: the one record the runner
    writes (``cell-<test>.json`` beside each job, for the end-of-run summary), the Python API
    returns, and the summary, the report page and the dataset verdicts read.

    ``status`` is ``finished``, ``skipped`` (finished earlier: the figures are that run's; or
    left out by the grid, ``message`` says why) or ``failed`` (``message`` says why).
    ``figure`` is the summary's "hits/queries (p)"; ``rate`` the test's statistic (hits per
    query, or the test's own rate) and ``metrics`` every number the run logged; ``seed`` and
    ``group`` (the cell's model, dataset, transform and seed) are what a dataset verdict joins
    by; the ``SPEND`` counters what its queries cost. ``scope`` is ``dataset`` for a dataset
    verdict (test ``dataset``); ``source`` the file a rescored cell's answers were read from
    (``tabmem.rescore.folder``). ``queries`` loads the query records (prompt, expected,
    completion, score) from the run's artifacts on first use.
    """

    model: str
    dataset: str
    test: str
    transform: str
    status: str
    verdict: str = ""
    figure: str = ""
    run_id: str = ""
    message: str = ""
    p_value: float | None = None
    seed: int = 0
    group: str = ""
    reason: str = ""
    n_queries: int = 0
    n_hits: int = 0
    rate: float | None = None
    baseline: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    tracking_uri: str = ""
    scope: str = "test"
    source: str = ""
    model_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    evaluated_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_answers: int = 0
    uncounted_answers: int = 0
    _queries: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_run(
        cls,
        run_id: str,
        tags: Mapping[str, str],
        metrics: Mapping[str, float],
        status: str = "finished",
        **given: Any,
    ) -> CellResult:
        """A tracked run read back: its cell, verdict, reason, counts, rate, baseline and
        p-value from its tags and latest metrics (``given`` fields set over them)."""
        queries, hits = int(metrics.get("n_queries", 0)), int(metrics.get("n_hits", 0))
        read: dict[str, Any] = {
            **{part: tags.get(part, "") for part in ("model", "dataset", "test", "transform")},
            "status": status,
            "verdict": tags.get("verdict", status),
            "figure": figure_text(hits, queries, metrics.get("p_value")),
            "run_id": run_id,
            "p_value": metrics.get("p_value"),
            "reason": tags.get("reason") or tags.get("error", ""),
            "n_queries": queries,
            "n_hits": hits,
            "rate": metrics.get("rate"),
            "baseline": metrics.get("baseline"),
            "metrics": dict(metrics),
        }
        return cls(**{**read, **given})

    def add_calls(self, calls: Mapping[str, float]) -> None:
        """Take the calls, tokens and dollars of the cell's queries."""
        for name in SPEND:
            kind = type(getattr(self, name))
            setattr(self, name, kind(calls.get(name, 0)))

    def as_dict(self) -> dict[str, Any]:
        """The record's fields as plain values (the queries left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_queries"}

    def write(self, folder: Path) -> None:
        """One file per test of the cell, read back by the end-of-run summary."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"cell-{self.test}.json").write_text(json.dumps(self.as_dict(), indent=2))

    @property
    def queries(self) -> pd.DataFrame:
        """Every query of the run (the ``queries.json`` artifact); empty when it logged none."""
        if self._queries is None:
            self._queries = _load_queries(self.tracking_uri, self.run_id)
        return self._queries

    def to_frame(self) -> pd.DataFrame:
        """The result as a one-row DataFrame (the columns of ``tabmem.grid``)."""
        import pandas as pd

        return pd.DataFrame([{column: getattr(self, column) for column in RESULT_COLUMNS}])

    def __repr__(self) -> str:
        lines = [f"<CellResult {self.model} | {self.dataset} | {self.test} | {self.transform}>"]
        state = self.message if self.status == "skipped" and self.message else self.status
        lines.append(f"  verdict:  {self.verdict}, {state}")
        if self.run_id and self.status != "failed":
            figures = f"{self.n_hits}/{self.n_queries} hits"
            for label, value in (("rate", self.rate), ("baseline", self.baseline)):
                if value is not None:
                    figures += f", {label} {value:.3g}"
            if self.p_value is not None:
                figures += f", p-value {self.p_value:.3g}"
            lines.append(f"  figures:  {figures}")
        if self.reason or self.status == "failed":
            lines.append(f"  reason:   {_short(self.reason or self.message)}")
        if self.run_id:
            lines.append(f"  MLflow:   run {self.run_id} in {self.tracking_uri}")
        return "\n".join(lines)


RESULT_COLUMNS = (
    "model",
    "dataset",
    "test",
    "transform",
    "status",
    "verdict",
    "n_queries",
    "n_hits",
    "rate",
    "baseline",
    "p_value",
    "reason",
    "run_id",
    "scope",
)
"""The columns of ``tabmem.grid``'s table, one row per ``CellResult``."""


def _load_queries(tracking_uri: str, run_id: str) -> pd.DataFrame:
    import tempfile

    import pandas as pd
    from mlflow.tracking import MlflowClient

    if not run_id:
        return pd.DataFrame()
    client = MlflowClient(tracking_uri=tracking_uri)
    if "queries.json" not in {a.path for a in client.list_artifacts(run_id)}:
        return pd.DataFrame()
    with tempfile.TemporaryDirectory() as folder:
        local = client.download_artifacts(run_id, "queries.json", folder)
        table = json.loads(Path(local).read_text(encoding="utf-8"))
    return pd.DataFrame(table["data"], columns=table["columns"])


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
