"""Benchmark 5: ``make paper-tables`` on a store of a few thousand runs (target: under a minute).

Logs a synthetic MLflow store the size of a real paper grid: ``--models`` language models on
every registry dataset with the memorization and knowledge tests, zero-knowledge samples,
few-shot prediction on the four transforms and statistical learning, plus the logistic
regression and gradient-boosted tree baselines, with the artifacts the figures read
(california-housing samples, correlation pairs, learning curves). Logging is not timed and the
store is kept (``--store``) for the next run. Then the whole report is built as
``make paper-tables`` builds it; printed: runs, tables, figures, files, wall and CPU seconds,
and the ratio of the wall time to the target.

    python scripts/bench_paper_tables.py [--models 24] [--store outputs/bench/paper-store]
    python scripts/bench_paper_tables.py --smoke   # one model on two files, a temporary store
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_common import ROOT, add_smoke_flag, print_table

from tabmem.data import dataset_specs, load_dataset
from tabmem.errors import TabmemError
from tabmem.report.paper import write_paper
from tabmem.tracking.store import TrackingStore, default_tracking_uri

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

EXPERIMENT = "bench-paper"
TARGET_S = 60.0
MEMORIZATION = ("header", "row_completion", "feature_completion", "first_token")
KNOWLEDGE = ("feature_names", "feature_values", "feature_distribution", "conditional_distribution")
TRANSFORMS = ("original", "perturbed", "task", "statistical")
BASELINES = ("logistic-regression", "gradient-boosted-tree")
VERDICTS = ("evidence", "no_evidence", "ambiguous", "not_applicable")
SMOKE_DATASETS = ("iris", "california-housing")  # california-housing: the samples' figures


class SyntheticStore:
    """Logs cells with the tags, parameters and metrics the tracked runs carry."""

    def __init__(self, outputs: Path, seed: int = 0) -> None:
        self.uri = default_tracking_uri(outputs)
        self.store = TrackingStore(
            uri=self.uri,
            artifact_root=outputs / "mlartifacts",
            experiment=EXPERIMENT,
            lock_path=outputs / "mlflow.lock",
        )
        self.rng = np.random.default_rng(seed)
        self.runs = 0

    def log(
        self,
        model: str,
        dataset: str,
        test: str,
        transform: str = "original",
        metrics: dict[str, float] | None = None,
        tables: dict[str, pd.DataFrame] | None = None,
        params: dict[str, str] | None = None,
    ) -> None:
        verdict = VERDICTS[int(self.rng.integers(len(VERDICTS)))]
        n = 25
        hits = int(self.rng.integers(n + 1))
        tags = {
            "model": model,
            "dataset": dataset,
            "test": test,
            "transform": transform,
            "verdict": verdict,
            "reason": f"synthetic {verdict}",
            "info.feature": "a_feature",
            "info.best_baseline": "mode",
        }
        backend = "baseline" if model in BASELINES else "litellm"
        self.store.log_cell(
            f"{model} | {dataset} | {test} | {transform}",
            tags,
            {"model.backend": backend, "test.name": test, **(params or {})},
            {
                "n_hits": hits,
                "n_queries": n,
                "rate": hits / n,
                "baseline": 0.1,
                "p_value": float(self.rng.uniform()),
                **(metrics or {}),
            },
            tables or {},
            {},
            failed=False,
        )
        self.runs += 1


def california_samples(data: pd.DataFrame, n: int) -> pd.DataFrame:
    rows = data.sample(n, random_state=n).astype(str).reset_index(drop=True)
    return rows.assign(sample=range(n), complete=True, problem="")


def correlation_pairs(data: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    numeric = data.select_dtypes("number").columns[:6]
    pairs = [(a, b) for i, a in enumerate(numeric) for b in numeric[i + 1 :]]
    return pd.DataFrame(
        {
            "feature_a": [a for a, _ in pairs],
            "feature_b": [b for _, b in pairs],
            "data_r": [float(data[a].corr(data[b])) for a, b in pairs],
            "sample_r": rng.uniform(-1, 1, len(pairs)),
        }
    )


def learning_curves(rng: np.random.Generator) -> pd.DataFrame:
    settings = [(d, 20) for d in (1, 2, 4, 8, 16)] + [(8, k) for k in (5, 10, 40, 80)]
    rows = []
    for d, k in settings:
        for learner in ("model", "logistic_regression", "nearest_neighbour"):
            accuracy = float(rng.uniform(0.5, 1.0))
            rows.append(
                {
                    "dimension": d,
                    "shots": k,
                    "learner": learner,
                    "accuracy": accuracy,
                    "ci_low": accuracy - 0.1,
                    "ci_high": min(accuracy + 0.1, 1.0),
                    "n": 50,
                }
            )
    return pd.DataFrame(rows)


def fewshot_metrics(rng: np.random.Generator) -> dict[str, float]:
    accuracy = float(rng.uniform(0.5, 0.95))
    return {"accuracy": accuracy, "accuracy_se": float(np.sqrt(accuracy * (1 - accuracy) / 200))}


def sample_metrics(rng: np.random.Generator) -> dict[str, float]:
    return {
        "samples_complete": 100,
        "copies": float(rng.integers(10)),
        "best_match_samples": float(rng.uniform(2, 9)),
        "best_match_real_rows": 3.0,
        "known_value_share": float(rng.uniform(0.5, 1)),
    }


def fill(store: SyntheticStore, models: int, datasets: tuple[str, ...] | None = None) -> None:
    """The paper grid's runs for ``models`` language models and the two baselines, on every
    tabular dataset of the registry (or on ``datasets``)."""
    frames = {}
    for name, spec in dataset_specs().items():
        if spec.kind == "tabular" and (datasets is None or name in datasets):
            try:
                frames[name] = load_dataset(spec).frame
            except TabmemError:  # a file the user provides (fico, pneumonia, ...), absent here
                continue
    rng = store.rng
    california = frames["california-housing"]
    for m in range(models):
        model = f"model-{m:02d}"
        for dataset, data in frames.items():
            for test in (*MEMORIZATION, *KNOWLEDGE[:3]):
                store.log(model, dataset, test)
            store.log(
                model,
                dataset,
                "conditional_distribution",
                tables={"correlation_pairs.json": correlation_pairs(data, rng)},
            )
            store.log(model, dataset, "sample", metrics=sample_metrics(rng))
            for transform in TRANSFORMS:
                store.log(model, dataset, "fewshot_predict", transform, fewshot_metrics(rng))
        for temperature in ("0.2", "0.7"):
            store.log(
                model,
                "california-housing",
                "sample",
                metrics=sample_metrics(rng),
                tables={"samples.json": california_samples(california, 100)},
                params={"test.temperature": temperature},
            )
        store.log(
            model,
            "synthetic-novel",
            "statistical_learning",
            tables={"curves.json": learning_curves(rng)},
            params={"test.fixed_shots": "20", "test.fixed_dimension": "8"},
        )
        print(f"  logged {store.runs} runs", flush=True)
    for baseline in BASELINES:
        for dataset in frames:
            for transform in TRANSFORMS:
                store.log(baseline, dataset, "fewshot_predict", transform, fewshot_metrics(rng))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=24, help="language models in the store")
    parser.add_argument(
        "--store",
        type=Path,
        default=ROOT / "outputs" / "bench" / "paper-store",
        help="folder of the synthetic store; built once, reused afterwards",
    )
    add_smoke_flag(parser)
    args = parser.parse_args()
    if args.smoke:
        with tempfile.TemporaryDirectory() as folder:
            benchmark(Path(folder) / "store", 1, SMOKE_DATASETS)
    else:
        benchmark(args.store, args.models, None)


def benchmark(folder: Path, models: int, datasets: tuple[str, ...] | None) -> None:
    """Log the synthetic store under ``folder`` unless it is there, then time the report."""
    marker = folder / f"complete-{models}-models"
    if not marker.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        print(f"logging the synthetic store under {folder} (once; not timed)")
        store = SyntheticStore(folder)
        started = time.perf_counter()
        fill(store, models, datasets)
        marker.write_text(f"{store.runs}\n")
        print(f"logged {store.runs} runs in {time.perf_counter() - started:.0f} s")
    runs = int(marker.read_text())
    with tempfile.TemporaryDirectory() as out:
        wall, cpu = time.perf_counter(), time.process_time()
        report = write_paper(default_tracking_uri(folder), Path(out), [EXPERIMENT])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print_table(
        "make paper-tables on the synthetic store",
        ["runs", "tables", "figures", "files", "wall s", "cpu s", "wall/target"],
        [
            [
                runs,
                len(report.tables),
                len(report.figures),
                len(report.files),
                wall,
                cpu,
                wall / TARGET_S,
            ]
        ],
    )
    verdict = "PASS" if wall < TARGET_S else "FAIL"
    print(
        f"acceptance: make paper-tables on {runs} runs took {wall:.1f} s; target < 60 s: {verdict}"
    )


if __name__ == "__main__":
    main()
