"""The rescored published answers beside the paper's own marks, as one table.

The marks (``conf/rescore/paper-marks.yaml``) are the paper's: evidence, ambiguous, evidence of
absence, or not conducted, per model, dataset and test. A verdict disagrees with a mark when
it says otherwise: ``evidence`` against evidence, ``ambiguous`` against ambiguous,
``no_evidence`` against evidence of absence, ``not_applicable`` against not conducted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tabmem.errors import ConfigError
from tabmem.report.writers import ReportTable
from tabmem.rescore.folder import RESCORED, located_text, rescoring_status

if TYPE_CHECKING:
    from tabmem.report.dataset_verdicts import DatasetOutcome
    from tabmem.results import CellResult

MARK_OF_VERDICT = {
    "evidence": "evidence",
    "ambiguous": "ambiguous",
    "no_evidence": "evidence_of_absence",
    "not_applicable": "not_conducted",
}
MARKS = frozenset(MARK_OF_VERDICT.values())
NO_ANSWERS = "no answers published"


@dataclass(frozen=True)
class PaperMarks:
    """The paper's mark per (model, dataset, test), and where they come from."""

    source: str
    marks: dict[tuple[str, str, str], str]

    @classmethod
    def load(cls, path: Path) -> PaperMarks:
        """The marks file: ``models`` in column order, ``marks`` per dataset and test."""
        import yaml

        if not path.is_file():
            raise ConfigError(f"The paper's marks file {path} does not exist.")
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        models = list(raw["models"])
        marks = {}
        for dataset, tests in raw["marks"].items():
            for test, per_model in tests.items():
                if len(per_model) != len(models) or not set(per_model) <= MARKS:
                    raise ConfigError(
                        f"{path}: {dataset}/{test} needs one of {sorted(MARKS)} per model."
                    )
                for model, mark in zip(models, per_model, strict=True):
                    marks[(model, dataset, test)] = mark
        return cls(str(raw["source"]), marks)


def default_marks() -> Path:
    """``conf/rescore/paper-marks.yaml`` of the configs in use."""
    from tabmem.api import config_dir

    return config_dir() / "rescore" / "paper-marks.yaml"


def disagrees(verdict: str, mark: str | None) -> bool:
    """Whether a verdict says otherwise than the paper's mark (no mark: never)."""
    return mark is not None and MARK_OF_VERDICT.get(verdict) != mark


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def comparison(outcomes: Sequence[CellResult], paper: PaperMarks) -> ReportTable:
    """One row per rescored file and test (refused ones with their reason) and per paper mark
    that no published file answers; a flag where the verdict and the mark disagree."""
    rows = []
    answered = set()
    for o in outcomes:
        key = (o.model, o.dataset, o.test)
        answered.add(key)
        mark = paper.marks.get(key)
        status = rescoring_status(o)
        done = status == RESCORED
        rows.append(
            {
                "model": o.model,
                "dataset": o.dataset,
                "test": o.test or "",
                "file": o.source,
                "located": located_text(o) if done else "",
                "count": f"{o.n_hits}/{o.n_queries}" if done else "",
                "baseline": _number(o.baseline) if done else "",
                "p_value": _number(o.p_value) if done else "",
                "verdict": o.verdict if done else status,
                "paper": mark or "",
                "disagrees": "yes" if done and disagrees(o.verdict, mark) else "",
                "note": o.message,
            }
        )
    for (model, dataset, test), mark in sorted(paper.marks.items()):
        if (model, dataset, test) not in answered:
            rows.append(
                {"model": model, "dataset": dataset, "test": test, "verdict": NO_ANSWERS}
                | {"paper": mark}
            )
    columns = [
        "model",
        "dataset",
        "test",
        "file",
        "located",
        "count",
        "baseline",
        "p_value",
        "verdict",
        "paper",
        "disagrees",
        "note",
    ]
    frame = pd.DataFrame(rows, columns=columns).fillna("")
    frame = frame.sort_values(["model", "dataset", "test", "file"], kind="stable")
    return ReportTable(
        name="published-answers",
        title="Published answers rescored, beside the paper's marks",
        frame=frame.reset_index(drop=True),
        footnotes=[
            f"Paper marks: {paper.source}.",
            "count: hits of the test's statistic / queries scored; baseline: the data-only "
            "rate a model without the rows reaches; located: lines found in the dataset / lines.",
        ],
        run_ids=[o.run_id for o in outcomes if o.run_id],
    )


STRENGTH = ("evidence", "ambiguous", "evidence_of_absence", "not_conducted")
"""The paper's marks from strongest to weakest: its conclusion on a dataset is its strongest."""


def paper_conclusion(paper: PaperMarks, model: str, dataset: str, skip: Sequence[str] = ()) -> str:
    """The paper's conclusion on ``model`` × ``dataset``: its strongest mark over the tests
    (memorized as soon as one test found evidence), leaving out the tests ``skip`` names."""
    found = [
        mark
        for (m, d, test), mark in paper.marks.items()
        if (m, d) == (model, dataset) and test not in skip
    ]
    return min(found, key=STRENGTH.index) if found else ""


def dataset_comparison(
    verdicts: Sequence[DatasetOutcome], outcomes: Sequence[CellResult], paper: PaperMarks
) -> ReportTable:
    """One row per model × dataset: the dataset verdict of the rescored answers beside the
    paper's conclusion with all its tests and with only the tests whose answers were published
    (the header test's were not), and a flag where the verdict disagrees with the latter."""
    answered = {(o.model, o.dataset, o.test) for o in outcomes if o.status == "finished"}
    rows = []
    for found in verdicts:
        v = found.verdict
        tests = {t.test.rsplit("-", 1)[0] for t in v.combined}
        unpublished = sorted(
            test
            for (m, d, test) in paper.marks
            if (m, d) == (found.model, found.dataset) and (m, d, test) not in answered
        )
        same_tests = paper_conclusion(paper, found.model, found.dataset, unpublished)
        rows.append(
            {
                "model": found.model,
                "dataset": found.dataset,
                "dataset verdict": v.verdict.value,
                "combined p": _number(v.p_value),
                "carried by": ", ".join(v.carried_by),
                "tests": ", ".join(sorted(tests)),
                "paper": paper_conclusion(paper, found.model, found.dataset),
                "paper, published tests": same_tests,
                "disagrees": "yes" if same_tests and disagrees(v.verdict.value, same_tests) else "",
                "paper tests unpublished": ", ".join(unpublished),
            }
        )
    frame = pd.DataFrame(rows).sort_values(["model", "dataset"], kind="stable")
    return ReportTable(
        name="published-dataset-verdicts",
        title="Published answers: one dataset verdict per model and dataset, beside the paper",
        frame=frame.reset_index(drop=True),
        footnotes=[
            f"Paper marks: {paper.source}. The paper's conclusion is its strongest mark over "
            "the tests; 'published tests' leaves out the tests whose answers were not "
            "published (the header test's), which the dataset verdict cannot include.",
            "Dataset verdict: the rescored tests of rows seen combined (docs/tests.md).",
        ],
        run_ids=[f.run_id for f in verdicts if f.run_id],
    )
