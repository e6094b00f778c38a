"""Figures of the learning tests: accuracy against logistic regression per transform, and
in-context statistical learning as the dimension and the number of shots grow."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure

from tabmem.battery.base import claiming
from tabmem.report.cell_text import applicable, number
from tabmem.report.paper_runs import TRANSFORMS, PaperRuns
from tabmem.report.writers import ReportFigure

LR = "logistic-regression"
PANELS = ("memorized", "not shown memorized")


def memorization_status(runs: PaperRuns, model: str, dataset: str) -> str:
    """``memorized`` when a test of rows seen (``claims = "rows_seen"``) found evidence for this
    model on this dataset, ``not shown memorized`` when they ran without evidence, ``untested``
    without runs."""
    found = [runs.cell(model, dataset, test) for test in claiming("rows_seen")]
    verdicts = [str(r["verdict"]) for r in found if r is not None]
    if "evidence" in verdicts:
        return "memorized"
    return "not shown memorized" if verdicts else "untested"


def _difference(runs: PaperRuns, model: str, dataset: str, transform: str) -> tuple | None:
    """(model − LR accuracy, its standard error, run ids) for one transform, if both ran."""
    pair = [runs.cell(m, dataset, "fewshot_predict", transform) for m in (model, LR)]
    if any(r is None or not applicable(r) for r in pair):
        return None
    values = [number(r, "accuracy") for r in pair]
    errors = [number(r, "accuracy_se") or 0.0 for r in pair]
    if None in values:
        return None
    return values[0] - values[1], math.hypot(*errors), [str(r["run_id"]) for r in pair]


def _difference_lines(runs: PaperRuns, model: str) -> dict[str, dict[str, tuple]]:
    """Dataset -> transform -> difference to LR, for the datasets with at least one."""
    lines = {}
    for dataset in runs.datasets:
        points = {t: _difference(runs, model, dataset, t) for t in TRANSFORMS}
        points = {t: p for t, p in points.items() if p is not None}
        if points:
            lines[dataset] = points
    return lines


def accuracy_difference_figure(runs: PaperRuns) -> ReportFigure:
    """Per model with few-shot runs: few-shot accuracy minus LR's per transform, on memorized
    and on other datasets (a model without few-shot runs gets no empty row of panels)."""
    lines = {model: _difference_lines(runs, model) for model in runs.models}
    lines = {model: found for model, found in lines.items() if found}
    models = list(lines) or ["(no few-shot runs of a language model)"]
    fig = Figure(figsize=(11, 3.6 * len(models)))
    axes = fig.subplots(len(models), 2, squeeze=False)
    run_ids: set[str] = set()
    for axis_row, model in zip(axes, models, strict=True):
        for dataset, points in lines.get(model, {}).items():
            status = memorization_status(runs, model, dataset)
            axis = axis_row[0] if status == "memorized" else axis_row[1]
            label = dataset if status != "untested" else f"{dataset} (untested)"
            xs = [TRANSFORMS.index(t) for t in points]
            axis.errorbar(
                xs,
                [p[0] for p in points.values()],
                yerr=[1.96 * p[1] for p in points.values()],
                marker="o",
                capsize=3,
                label=label,
            )
            run_ids.update(i for p in points.values() for i in p[2])
        for axis, panel in zip(axis_row, PANELS, strict=True):
            _decorate(axis, f"{model}: {panel}")
    low = min(a.get_ylim()[0] for a in axes.flat)  # one y scale for every panel (set, not
    high = max(a.get_ylim()[1] for a in axes.flat)  # shared: shared axes cost O(panels²))
    for axis in axes.flat:
        axis.set_ylim(low, high)
    fig.subplots_adjust(
        left=0.08,
        right=0.98,
        wspace=0.2,
        hspace=0.45,
        top=1 - 0.5 / fig.get_figheight(),
        bottom=0.6 / fig.get_figheight(),
    )
    return ReportFigure(
        name="accuracy_difference_to_lr",
        title="Few-shot accuracy minus logistic regression's, per transform",
        figure=fig,
        caption=(
            "Each line is one dataset: the model's few-shot accuracy minus the accuracy of "
            "logistic regression on the same held-out rows, with 95% error bars (±1.96 "
            "combined standard errors). Left: datasets on which a memorization test of this "
            "model found evidence; right: the others ('untested': no memorization run). "
            "Fill: tabmem run +grid=paper model=<model> and model=logistic-regression."
        ),
        run_ids=sorted(run_ids),
    )


def _decorate(axis, title: str) -> None:
    axis.axhline(0.0, color="grey", linestyle=":")
    axis.set_xticks(range(len(TRANSFORMS)), TRANSFORMS)
    axis.set_xlim(-0.3, len(TRANSFORMS) - 0.7)
    axis.set_ylabel("accuracy − LR accuracy")
    axis.set_title(title)
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize="small")
    else:
        note = "no dataset with runs of this model and LR"
        axis.text(0.5, 0.5, note, transform=axis.transAxes, ha="center", color="grey")


def _curves(runs: PaperRuns) -> tuple[dict[str, pd.DataFrame], dict[str, int], list[str]]:
    """Per model, the newest statistical-learning run's curves (and the fixed settings)."""
    found = runs.runs_of("statistical_learning").sort_values("start_time")
    curves, fixed, run_ids = {}, {}, []
    for model, group in found.groupby("model", sort=False):
        if model not in runs.models and model not in runs.baselines:
            continue
        run = group.iloc[-1]
        table = runs.artifact_table(str(run["run_id"]), "curves.json")
        if table is None or table.empty:
            continue
        curves[str(model)] = table
        run_ids.append(str(run["run_id"]))
        for key in ("fixed_shots", "fixed_dimension"):
            value = run.get(f"param.test.{key}")
            if value is not None and not pd.isna(value):
                fixed.setdefault(key, int(float(value)))
    return curves, fixed, run_ids


def statistical_learning_figure(runs: PaperRuns) -> ReportFigure:
    """Accuracy against the dimension d and against the number of shots, per model, beside
    logistic regression and 1-nearest-neighbour fitted on the same problems."""
    curves, fixed, run_ids = _curves(runs)
    fig = Figure(figsize=(11, 4))
    panels = (
        ("dimension", "shots", fixed.get("fixed_shots"), "dimension d"),
        ("shots", "dimension", fixed.get("fixed_dimension"), "number of shots"),
    )
    for axis, (x, held, value, label) in zip(fig.subplots(1, 2), panels, strict=True):
        lines = _lines(curves, held, value)
        for name, line in lines.items():
            line = line.sort_values(x)
            style = "--" if name.endswith("(reference)") else "-"
            axis.plot(line[x], line["accuracy"], style, marker="o", label=name)
            axis.fill_between(line[x], line["ci_low"], line["ci_high"], alpha=0.15)
        axis.axhline(0.5, color="grey", linestyle=":")
        axis.set_xlabel(label)
        axis.set_ylabel("accuracy")
        axis.set_title(f"{held} = {value}" if value is not None else "no runs")
        if lines:
            axis.set_xscale("log", base=2)
            ticks = sorted({int(v) for line in lines.values() for v in line[x]})
            axis.set_xticks(ticks, [str(t) for t in ticks])
            axis.minorticks_off()
            axis.legend(fontsize="small")
        else:
            axis.text(0.5, 0.5, "no runs", transform=axis.transAxes, ha="center", color="grey")
    fig.tight_layout()
    return ReportFigure(
        name="statistical_learning",
        title="In-context statistical learning: accuracy as d and the number of shots grow",
        figure=fig,
        caption=(
            "Synthetic problems y = 1[x·z ≥ 0], x ~ N(0, I_d); accuracy with 95% Wilson "
            "intervals. LR (reference) and 1-NN (reference) are fitted on each problem's shots "
            "by the test itself; chance is 0.5. Fill: tabmem run +grid=paper model=<model>."
        ),
        run_ids=run_ids,
    )


def _lines(
    curves: dict[str, pd.DataFrame], held: str, value: int | None
) -> dict[str, pd.DataFrame]:
    """Each model's own curve, then the two reference learners of the first model's run (the
    same problems for every run with the same seed and settings)."""
    parts = {m: t[t[held] == value] for m, t in curves.items() if value is not None}
    lines = {m: part[part["learner"] == "model"] for m, part in parts.items()}
    first = next((part for part in parts.values() if not part.empty), None)
    if first is not None:
        for learner, name in (("logistic_regression", "LR"), ("nearest_neighbour", "1-NN")):
            lines[f"{name} (reference)"] = first[first["learner"] == learner]
    return {k: v for k, v in lines.items() if not v.empty}
