"""One verdict per model × dataset: the tests of rows seen of a run or sweep, combined.

Every finished (or already finished, so skipped) test of rows seen of the same model, file,
transform and seed joins one dataset verdict where a run or sweep ran two or more of them
(``tabmem.stats.combine``); a single test is its own answer. Each verdict is logged
as its own MLflow run in the grid's experiment, tagged ``scope: dataset`` and ``test: dataset``,
with the combined p-value as metric ``p_value``, its grid q-value as ``q_value`` (Benjamini-
Hochberg over the verdicts the run or sweep formed, ``q_family`` of them), each combined test's
verdict, own p-value, the p-value it entered with and its Holm-adjusted p-value, and the ids of
the runs it combined; the same combination of runs is logged once (a re-run of a finished grid
reuses it, with the q-value it was logged with). The summary at the end of a run prints them
with their q-values, the Python API returns them, and the paper overview shows them as its main
mark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml
from rich.table import Table

from tabmem.cell import Cell, config_hash
from tabmem.results import CellResult, Verdict
from tabmem.stats.combine import (
    DatasetRule,
    DatasetVerdict,
    benjamini_hochberg,
    decide_dataset,
    grid_q_sentence,
)
from tabmem.tracking.naming import run_description, run_title
from tabmem.tracking.store import TrackingStore

DATASET_TEST = "dataset"
"""The ``test`` tag of a dataset verdict's run, beside the tests' own names."""
SCOPE_TAG = "scope"
MIN_TESTS = 2
"""A dataset verdict joins at least this many tests of rows seen of one model × file."""
VERDICT_STYLE = {
    Verdict.EVIDENCE: "bold red",
    Verdict.AMBIGUOUS: "yellow",
    Verdict.NO_EVIDENCE: "green",
    Verdict.NOT_APPLICABLE: "dim",
}


@dataclass
class DatasetOutcome:
    """The dataset verdict of one model × file × transform × seed, its MLflow run, and its
    q-value over the grid's dataset verdicts (``q_family`` of them; None without a p-value)."""

    model: str
    dataset: str
    transform: str
    seed: int
    verdict: DatasetVerdict
    run_id: str = ""
    status: str = "finished"  # skipped: the same runs were combined before, into run_id
    q_value: float | None = None
    q_family: int = 0

    @property
    def cell(self) -> Cell:
        return Cell(self.model, self.dataset, DATASET_TEST, self.transform)


def rule_of(cfg: Mapping[str, Any] | None) -> DatasetRule:
    """The dataset rule a config sets (``dataset_verdict``: alpha, weak_alpha), else defaults."""
    section = (cfg or {}).get("dataset_verdict") or {}
    default = DatasetRule()
    return DatasetRule(
        alpha=float(section.get("alpha", default.alpha)),
        weak_alpha=float(section.get("weak_alpha", default.weak_alpha)),
    )


def _as_test(outcome: CellResult) -> CellResult:
    """A test as the combination reads it: a failed run as verdict ``failed`` with why; a
    decided or inapplicable one by its verdict alone (its own reason is the run's)."""
    if outcome.status == "failed":
        return replace(outcome, verdict="failed", p_value=None, reason=f"failed: {outcome.message}")
    return replace(outcome, reason="")


def combine_outcomes(
    outcomes: Sequence[CellResult], rule: DatasetRule
) -> list[tuple[CellResult, DatasetVerdict]]:
    """The dataset verdict of each model × file × transform × seed among ``outcomes`` that ran
    (or had run) at least ``MIN_TESTS`` tests of rows seen, with one of its outcomes to name
    it. A single test is its own answer: its verdict stands alone. A run enters once, however
    many cells name it (a suite's member and the same test asked alone in one grid: the second
    cell finds the first's run finished and reports it again)."""
    ran = list(
        {o.run_id or id(o): o for o in outcomes if o.run_id or o.status == "failed"}.values()
    )
    if len({(o.group or _fallback_group(o), o.test) for o in ran}) <= len(
        {o.group or _fallback_group(o) for o in ran}
    ):  # one test per model × file at most: no verdict, and no need to import every test
        return []
    from tabmem.battery.base import claiming

    rows_seen = set(claiming("rows_seen"))
    groups: dict[str, list[CellResult]] = {}
    for outcome in ran:
        if outcome.test in rows_seen:
            groups.setdefault(outcome.group or _fallback_group(outcome), []).append(outcome)
    return [
        (members[0], decide_dataset(_labelled([_as_test(o) for o in members]), rule))
        for members in groups.values()
        if len({o.test for o in members}) >= MIN_TESTS
    ]


def _labelled(tests: list[CellResult]) -> list[CellResult]:
    """The tests with unique names: a test run more than once on the model × file (recorded
    answers at several settings) keeps every run, the later ones as ``<test>-2``, … (a name
    MLflow accepts in a metric's)"""
    counts: dict[str, int] = {}
    labelled = []
    for t in tests:
        counts[t.test] = counts.get(t.test, 0) + 1
        name = t.test if counts[t.test] == 1 else f"{t.test}-{counts[t.test]}"
        labelled.append(replace(t, test=name))
    return labelled


def _fallback_group(outcome: CellResult) -> str:
    """Outcome files written before groups existed: model, file, transform and seed."""
    return "|".join(map(str, (outcome.model, outcome.dataset, outcome.transform, outcome.seed)))


def dataset_outcomes(
    outcomes: Sequence[CellResult], rule: DatasetRule, store: TrackingStore | None = None
) -> list[DatasetOutcome]:
    """The dataset verdicts of ``outcomes``, each logged as a run of ``store`` when one is
    given (once per combination of runs: the same combination again reuses its run)."""
    return logged(combine_outcomes(outcomes, rule), rule, store)


def logged(
    combined: Sequence[tuple[CellResult, DatasetVerdict]],
    rule: DatasetRule,
    store: TrackingStore | None,
) -> list[DatasetOutcome]:
    """Dataset verdicts as ``combine_outcomes`` gives them, each with its q-value over all of
    them (``benjamini_hochberg``), logged to ``store`` if given."""
    q_values = benjamini_hochberg([verdict.p_value for _, verdict in combined])
    family = sum(q is not None for q in q_values)
    found = []
    for (first, verdict), q in zip(combined, q_values, strict=True):
        outcome = DatasetOutcome(
            first.model,
            first.dataset,
            first.transform,
            first.seed,
            verdict,
            q_value=q,
            q_family=family,
        )
        if store is not None:
            log_dataset_verdict(store, outcome, first.group, rule)
        found.append(outcome)
    return found


def combined_runs(tags: Mapping[str, str]) -> dict[str, str]:
    """The tests a dataset verdict's run combined (by their labels there, in order) and the
    run each read ("" for a test that failed), from the tags ``log_dataset_verdict`` writes."""
    combined = filter(None, tags.get("combined_tests", "").split(","))
    return {test: tags.get(f"test.{test}.run_id", "") for test in combined}


def log_dataset_verdict(
    store: TrackingStore, outcome: DatasetOutcome, group: str, rule: DatasetRule
) -> None:
    """Write one dataset verdict as a FINISHED run (or find the run that already holds it)."""
    verdict = outcome.verdict
    tests = verdict.combined
    identity = {
        "group": group,
        "runs": sorted(f"{t.test}={t.run_id}" for t in tests),
        "entered_p": verdict.entered,  # what the combination read from those runs
        "left_out": sorted(verdict.left_out),
        "alpha": rule.alpha,
        "weak_alpha": rule.weak_alpha,
    }
    digest = config_hash(identity)
    existing = store.finished_run(digest)
    if existing:
        outcome.run_id, outcome.status = existing, "skipped"
        return
    controls = grid_q_sentence(outcome.q_family, rule.alpha) if outcome.q_family else ""
    tags = {
        **outcome.cell.tags(),
        SCOPE_TAG: DATASET_TEST,
        "config_hash": digest,
        "group": group,
        "verdict": verdict.verdict.value,
        "reason": verdict.reason[:5000],
        "combined_tests": ",".join(t.test for t in tests),
        "carried_by": ",".join(verdict.carried_by),
        **{f"test.{t.test}.verdict": t.verdict for t in tests},
        **{f"test.{t.test}.run_id": t.run_id for t in tests if t.run_id},
        **{f"left_out.{test}": why[:500] for test, why in verdict.left_out.items()},
        **({"q_value_controls": controls} if controls else {}),
    }
    metrics: dict[str, float] = {"n_tests": len(tests)}
    if verdict.p_value is not None:
        metrics["p_value"] = verdict.p_value
    if outcome.q_value is not None:
        metrics["q_value"] = outcome.q_value
        metrics["q_family"] = outcome.q_family
    for t in tests:
        metrics[f"p_value.{t.test}"] = float(t.p_value)  # type: ignore[arg-type]
        metrics[f"entered_p.{t.test}"] = verdict.entered[t.test]
        metrics[f"holm_p.{t.test}"] = verdict.holm[t.test]
    params = {
        **_cell_params(store, [t.run_id for t in tests if t.run_id]),
        "seed": outcome.seed,
        "dataset_verdict.alpha": rule.alpha,
        "dataset_verdict.weak_alpha": rule.weak_alpha,
    }
    summary = {
        "verdict": verdict.verdict.value,
        "reason": verdict.reason,
        "p_value": verdict.p_value,
        "q_value": outcome.q_value,
        **({"q_value_controls": controls} if controls else {}),
        "tests": {
            t.test: {
                "verdict": t.verdict,
                "p_value": t.p_value,
                "entered_p": verdict.entered[t.test],
                "holm_p": verdict.holm[t.test],
                "run_id": t.run_id,
            }
            for t in tests
        },
        "left_out": verdict.left_out,
    }
    outcome.run_id = store.log_cell(
        run_title(outcome.cell, verdict.verdict.value),
        tags,
        params,
        metrics,
        {},
        {"dataset_verdict.yaml": yaml.safe_dump(summary, sort_keys=False, allow_unicode=True)},
        failed=False,
        description=run_description(verdict.verdict.value, verdict.reason),
    )


def _cell_params(store: TrackingStore, run_ids: Sequence[str]) -> dict[str, str]:
    """The model, dataset and transform parameters of a combined run (not its test's): the
    dataset verdict's run carries them too, so tables can group it like its tests."""
    if not run_ids:
        return {}
    params = store.client.get_run(run_ids[0]).data.params
    return {k: v for k, v in params.items() if not k.startswith("test.")}


def dataset_table(found: Sequence[DatasetOutcome]) -> Table:
    """The dataset verdicts as the terminal shows them, after the tests' table, each with its
    grid q-value, and under them the error rate those q-values control."""
    family = max((o.q_family for o in found), default=0)
    caption = grid_q_sentence(family, found[0].verdict.rule.alpha) if family else None
    table = Table(title="tabmem dataset verdicts (tests of rows seen, combined)", caption=caption)
    seeds = len({o.seed for o in found}) > 1
    columns = ["model", "dataset", "transform", *(["seed"] if seeds else []), "verdict"]
    for column in (*columns, "combined p", "grid q", "carried by", "tests", "run id"):
        table.add_column(column, overflow="fold")
    for o in found:
        v = o.verdict
        style = VERDICT_STYLE[v.verdict]
        table.add_row(
            o.model,
            o.dataset,
            o.transform,
            *([str(o.seed)] if seeds else []),
            f"[{style}]{v.verdict.value}[/]",
            "-" if v.p_value is None else f"{v.p_value:.2g}",
            "-" if o.q_value is None else f"{o.q_value:.2g}",
            ", ".join(v.carried_by) or "-",
            str(len(v.combined)),
            o.run_id[:12] or "-",
        )
    return table
