"""The contamination lab end to end: plan, fine-tune, evaluate as a sweep, report the rates.

Outputs go to ``<outputs>/lab/<setting>/``: ``checkpoints/p<passes>/`` (model folders),
``conf/model/lab-<setting>-p<passes>.yaml``, ``sweep.log``, and the report (``tpr_fpr.md``,
``tpr_fpr.csv``, ``cells.csv``, ``tpr_by_repetitions.png``). The runs are the MLflow
experiment ``lab-<setting>``, with one more run holding the report.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from tabmem.data import dataset_specs, load_dataset
from tabmem.errors import ConfigError
from tabmem.lab.evaluate import Sweep, run_sweep, sweep_command
from tabmem.lab.models import base_model_config, base_weights, write_model_configs
from tabmem.lab.plan import LabPlan, load_lab_config, make_plan
from tabmem.lab.report import lab_cells, markdown_table, rate_table, write_report
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


def fingerprint(cfg: object) -> str:
    """A hash of the lab's whole setting: a changed setting retrains and re-evaluates."""
    blob = json.dumps(OmegaConf.to_container(cfg, resolve=True), sort_keys=True)
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
    root = outputs_dir.resolve() / "lab" / plan.name
    log(
        f"lab '{plan.name}': planted {plan.planted} (dataset: times read), held out {plan.held_out}"
        + (f", first rows only {plan.first_rows}" if plan.first_rows else "")
    )
    specs = dataset_specs()
    missing = [d for d in [*plan.planted, *plan.held_out] if d not in specs]
    if missing:
        raise ConfigError(f"The lab's pool names unknown datasets: {', '.join(missing)}.")
    seconds: dict[str, float] = {}
    started = time.monotonic()
    folder = root / "checkpoints"
    checkpoints = _checkpoints(folder, plan, stamp)
    if checkpoints is None:
        base_cfg = base_model_config(str(cfg.base_model))
        weights = base_weights(base_cfg, outputs_dir.resolve() / "weights")
        texts = {d: plan.planted_text(load_dataset(specs[d])) for d in plan.planted}
        checkpoints = fine_tune(plan, texts, weights, cfg.training, folder, int(cfg.seed), log)
        (folder / STAMP).write_text(stamp)
    else:
        log(f"reusing the checkpoints in {folder} (same lab setting)")
    seconds["train"] = time.monotonic() - started
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
    )
    log(f"evaluating {len(models)} checkpoints: tabmem run {' '.join(arguments)}")
    started = time.monotonic()
    run_sweep(sweep, arguments, root / "sweep.log")
    seconds["evaluate"] = time.monotonic() - started
    uri = tracking_uri(None, outputs_dir.resolve())
    cells = lab_cells(load_runs(uri, [experiment]), plan.name, stamp)
    table = rate_table(cells)
    files = write_report(table, cells, root)
    _log_report(outputs_dir.resolve(), experiment, plan, stamp, table, files)
    log(markdown_table(table))
    return LabOutcome(plan, table, cells, files, seconds)


def _log_report(
    outputs: Path, experiment: str, plan: LabPlan, stamp: str, table: pd.DataFrame, files: dict
) -> None:
    """The report as one more MLflow run of the lab's experiment (tag ``lab_report``)."""
    store = TrackingStore.at(outputs, experiment)
    metrics = {}
    for _, r in table.iterrows():
        key = f"{r['test']}.{r['group'].replace(' ', '_').replace(',', '')}.r{r['repetitions']}"
        metrics[f"{key}.cells"] = r["cells"]
        if r["cells"]:
            metrics[f"{key}.rate"] = r["rate"]
    store.log_cell(
        f"lab | {plan.name} | report",
        {"lab_report": plan.name, "lab_fingerprint": stamp},
        {"planted": json.dumps(plan.planted), "held_out": json.dumps(plan.held_out)},
        metrics,
        {"tpr_fpr.json": table},
        {"tpr_fpr.md": files["table_md"].read_text()},
        failed=False,
    )
