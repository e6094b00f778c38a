"""The result object every test returns; terminal output and MLflow logging are views of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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
