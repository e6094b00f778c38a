"""The contamination lab end to end: plan, fine-tune, evaluate as a sweep, report the rates.

Outputs go to ``<outputs>/lab/<setting>/``: ``checkpoints/p<passes>/`` (model folders),
``conf/model/lab-<setting>-p<passes>.yaml`` (and ``conf/dataset/``, ``data/``: a ``slices``
setting's parts), ``sweep.log``, ``ground_truth.csv`` (how much each
checkpoint learned of each file), and the report (``tpr_fpr.md``, ``tpr_fpr.csv``,
``cells.csv``, ``ground_truth.md``, ``exposure.md``, ``tpr_by_repetitions.png``,
``timings.md``). The runs are
the MLflow experiment ``lab-<setting>``, with one more run holding the report.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import OmegaConf

from tabmem.data import Dataset, dataset_specs, load_dataset
from tabmem.data.twin import twin_of
from tabmem.errors import ConfigError, DatasetError
from tabmem.lab.evaluate import Sweep, run_sweep, sweep_command
from tabmem.lab.ground_truth import (
    CONTROLS,
    GROUND_TRUTH_COLUMNS,
    ground_truth_table,
    siblings,
)
from tabmem.lab.models import base_model_config, base_weights, write_model_configs
from tabmem.lab.plan import LabPlan, load_lab_config, make_plan
from tabmem.lab.report import (
    SEED,
    ground_truth_view,
    lab_cells,
    rate_markdown,
    rate_table,
    write_report,
)
from tabmem.lab.slices import write_slices
from tabmem.lab.train import fine_tune
from tabmem.tracking.runs import load_runs
from tabmem.tracking.store import TrackingStore, tracking_uri

STAMP = "lab-fingerprint.txt"


@dataclass
class LabOutcome:
    """What a lab run produced: the plan, the rate table and where the files are."""

    plan: LabPlan
    table: pd.DataFrame
    cells: pd.DataFrame
    files: dict[str, Path]
    seconds: dict[str, float]
    ground_truth: pd.DataFrame


ASKING = ("evaluation",)
"""The sections of a lab setting that say what the checkpoints are asked, not what they read:
changing one re-evaluates and keeps the checkpoints and their ground truth."""
MEASURING = ("ground_truth",)
"""The section that says how the ground truth is measured: changing it measures it again and
keeps the checkpoints."""


def fingerprint(cfg: object, leave_out: Sequence[str] = ()) -> str:
    """A hash of the lab's setting without its sections ``leave_out``: the whole setting names
    a version of the cells, less of it the checkpoints and the ground truth it decides."""
    setting = OmegaConf.to_container(cfg, resolve=True)
    kept = {key: value for key, value in dict(setting).items() if key not in leave_out}
    blob = json.dumps(kept, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _checkpoints(folder: Path, plan: LabPlan, stamp: str) -> dict[int, Path] | None:
    """Checkpoints a previous run of the same setting left, or None when any is missing."""
    marker = folder / STAMP
    if not marker.is_file() or marker.read_text().strip() != stamp:
        return None
    found = {p: folder / f"p{p}" for p in plan.checkpoints}
    return found if all((f / "config.json").is_file() for f in found.values()) else None


def run_lab(
    setting: str,
    overrides: Sequence[str],
    outputs_dir: Path,
    sweep: Sweep,
    log: Callable[[str], None] = print,
) -> LabOutcome:
    """Plan, train (or reuse identical checkpoints), sweep every test with ``sweep`` (``tabmem
    run``'s arguments in, its exit status out: ``tabmem.main.run``), write the report."""
    cfg = load_lab_config(setting, overrides)
    plan = make_plan(cfg)
    stamp = fingerprint(cfg)
    trained = fingerprint(cfg, (*ASKING, *MEASURING))
    root = outputs_dir.resolve() / "lab" / plan.name
    log(
        f"lab '{plan.name}': planted {plan.planted} (dataset: times read), held out {plan.held_out}"
        + (f", first rows only {plan.first_rows}" if plan.first_rows else "")
    )
    specs = dataset_specs()
    if plan.slices:
        specs |= write_slices(plan.slices, root)
    missing = [d for d in [*plan.planted, *plan.held_out] if d not in specs]
    if missing:
        raise ConfigError(f"The lab's pool names unknown datasets: {', '.join(missing)}.")
    seconds: dict[str, float] = {}
    started = time.monotonic()
    folder = root / "checkpoints"
    checkpoints = _checkpoints(folder, plan, trained)
    texts = {d: load_dataset(specs[d]) for d in [*plan.planted, *plan.held_out]}
    planted = {d: plan.planted_text(texts[d]) for d in plan.planted}
    if checkpoints is None:
        base_cfg = base_model_config(str(cfg.base_model))
        weights = base_weights(base_cfg, outputs_dir.resolve() / "weights")
        checkpoints = fine_tune(plan, planted, weights, cfg.training, folder, int(cfg.seed), log)
        (folder / STAMP).write_text(trained)
    else:
        log(f"reusing the checkpoints in {folder} (same lab setting)")
    seconds["train"] = time.monotonic() - started
    started = time.monotonic()
    files_text = {**{d: texts[d].text for d in plan.held_out}, **planted}
    measured = fingerprint(cfg, ASKING)
    truth = _ground_truth(
        cfg, plan, checkpoints, files_text, texts, root, outputs_dir, measured, log
    )
    seconds["ground_truth"] = time.monotonic() - started
    models = write_model_configs(plan, checkpoints, cfg.evaluation, root / "conf", stamp)
    experiment = f"lab-{plan.name}"
    arguments = sweep_command(
        models[::-1],  # the deepest checkpoint first: a lab stopped early has its telling cells
        [*plan.planted, *plan.held_out],
        [str(t) for t in cfg.evaluation.tests],
        root / "conf",
        outputs_dir,
        experiment,
        [str(o) for o in cfg.evaluation.get("overrides") or []],
        int(cfg.evaluation.get("jobs", 1)),
        [int(s) for s in cfg.evaluation.get("seeds") or [0]],
    )
    log(f"evaluating {len(models)} checkpoints: tabmem run {' '.join(arguments)}")
    started = time.monotonic()
    run_sweep(sweep, arguments, root / "sweep.log")
    seconds["evaluate"] = time.monotonic() - started
    uri = tracking_uri(None, outputs_dir.resolve())
    cells = lab_cells(load_runs(uri, [experiment], distinct=[SEED]), plan.name, stamp)
    table = rate_table(cells)
    view = ground_truth_view(truth, cells)
    files = write_report(table, cells, root, view, seconds)
    _log_report(outputs_dir.resolve(), experiment, plan, stamp, table, files, view)
    log(rate_markdown(table))
    log(files["ground_truth_md"].read_text())
    log(files["exposure_md"].read_text())
    return LabOutcome(plan, table, cells, files, seconds, view)


def _twins(datasets: dict[str, Dataset], seed: int, log: Callable[[str], None]) -> dict[str, str]:
    """Each file's twin text (the ground truth's control for what was learned of its rows);
    a file no twin can be drawn for goes without, with a line saying so."""
    twins = {}
    for name, data in datasets.items():
        try:
            twins[name] = twin_of(data, seed).text
        except DatasetError as exc:
            log(f"no twin control for {name}: {exc}")
    return twins


def _ground_truth(
    cfg: Any,
    plan: LabPlan,
    checkpoints: dict[int, Path],
    texts: dict[str, str],
    datasets: dict[str, Dataset],
    root: Path,
    outputs_dir: Path,
    stamp: str,
    log: Callable[[str], None],
) -> pd.DataFrame:
    """How much each checkpoint learned of each file (``texts``: as read) against its controls
    (drawn from ``datasets`` only when it is measured) (``ground_truth.csv``; kept for a re-run
    of the same setting: its ``fingerprint`` column). The base model is checkpoint 0 when the
    lab keeps it."""
    path = root / "ground_truth.csv"
    if path.is_file():
        kept = pd.read_csv(path)
        current = set(GROUND_TRUTH_COLUMNS) <= set(kept)  # written by this version
        if current and "fingerprint" in kept and set(kept["fingerprint"].astype(str)) == {stamp}:
            log(f"reusing the ground truth in {path} (same lab setting)")
            return _parts(kept.drop(columns=["found_by", "dataset_verdict"], errors="ignore"), plan)
    options = cfg.get("ground_truth") or {}
    controls = {
        "unread": {d: t for d in plan.planted if (t := plan.unread_text(datasets[d])) is not None},
        "twin": _twins(datasets, int(cfg.seed), log),
    }
    base = checkpoints.get(0) or base_weights(
        base_model_config(str(cfg.base_model)),
        outputs_dir.resolve() / "weights",
    )
    truth = ground_truth_table(
        plan,
        checkpoints,
        base,
        texts,
        int(cfg.training.get("block_size", 512)),
        str(cfg.training.get("device", "auto")),
        int(options.get("rows", 20)),
        int(cfg.seed),
        int(options.get("max_blocks", 48)),
        log,
        controls,
    )
    truth = _parts(truth.assign(fingerprint=stamp), plan)
    truth.to_csv(path, index=False)
    return truth


def _parts(truth: pd.DataFrame, plan: LabPlan) -> pd.DataFrame:
    """The ground truth with each part's never-read siblings as its unread control, where the
    pool holds parts of one file (``siblings``)."""
    if plan.slices is None:
        return truth
    never_read = [d for d in plan.slices.names if d in plan.held_out]
    return siblings(truth, never_read)


def _log_report(
    outputs: Path,
    experiment: str,
    plan: LabPlan,
    stamp: str,
    table: pd.DataFrame,
    files: dict,
    truth: pd.DataFrame,
) -> None:
    """The report as one more MLflow run of the lab's experiment (tag ``lab_report``), with
    each checkpoint × file's ground truth as metrics ``ground_truth.<dataset>.p<passes>.*``."""
    store = TrackingStore.at(outputs, experiment)
    metrics = {}
    for _, r in table.iterrows():
        key = f"{r['test']}.{r['group'].replace(' ', '_').replace(',', '')}.r{r['repetitions']}"
        metrics[f"{key}.cells"] = r["cells"]
        if r["cells"]:
            metrics[f"{key}.rate"] = r["rate"]
    for _, r in truth.iterrows():
        key = f"ground_truth.{r['dataset']}.p{r['passes']}"
        measures = ("loss", "loss_drop", "rows_written_back")
        for column in (*measures, *(f"learned_over_{c}" for c in CONTROLS)):
            if r[column] == r[column]:  # NaN (no row sampled, no such control) is not a metric
                metrics[f"{key}.{column}"] = float(r[column])
    store.log_cell(
        f"lab | {plan.name} | report",
        {"lab_report": plan.name, "lab_fingerprint": stamp},
        {"planted": json.dumps(plan.planted), "held_out": json.dumps(plan.held_out)},
        metrics,
        {"tpr_fpr.json": table, "ground_truth.json": truth},
        {
            "tpr_fpr.md": files["table_md"].read_text(),
            "ground_truth.md": files["ground_truth_md"].read_text(),
            "exposure.md": files["exposure_md"].read_text(),
        },
        failed=False,
    )
