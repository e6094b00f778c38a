"""How often row order's data-only gate refuses a file whose rows are truly in random order.

The row-order test runs only where the data show no order a model could prefer without
memory (``tabmem.battery.row_order.order_signal``). A gate that refuses most shuffled files
leaves the test no files to run on. This shuffles each paper file's rows (seeded), runs the
gate on each shuffle at the configured settings, and prints the share refused, by reason, and
what the share would be at other values of ``exchangeable_min_p``, side by side in one run.

    python scripts/bench_row_order_gate.py                     # 20 shuffles of the six files
    python scripts/bench_row_order_gate.py --shuffles 50 --datasets iris wine
    python scripts/bench_row_order_gate.py --smoke          # 2 shuffles of iris (seconds)
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter

from bench_common import add_smoke_flag, composed_test_config

from tabmem.battery.base import TestContext
from tabmem.battery.row_order import RowOrderSettings, order_signal
from tabmem.calibrate.run import paper_files
from tabmem.data import Dataset, dataset_specs, load_dataset

THRESHOLDS = (0.5, 0.2, 0.1, 0.05)


def shuffled(dataset: Dataset, seed: int) -> Dataset:
    """The file with its data rows in a seeded random order."""
    rows = dataset.rows[:]
    random.Random(seed).shuffle(rows)
    newline = dataset.newline
    text = newline.join([dataset.header, *rows]) + newline
    return Dataset(spec=dataset.spec, path=dataset.path, text=text)


def reason_kind(reason: str | None) -> str:
    if reason is None:
        return "runs"
    if "whole file" in reason:
        return "whole file ordered"
    if "column" in reason:
        return "a column smoother than shuffles"
    return "all columns smoother than shuffles"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shuffles", type=int, default=20, help="shuffles per file")
    parser.add_argument("--datasets", nargs="+", default=list(paper_files()))
    add_smoke_flag(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.shuffles, args.datasets = 2, ["iris"]
    settings = RowOrderSettings.load(composed_test_config("row_order"))
    print(
        f"row order's gate on {args.shuffles} shuffles per file (n_rows={settings.n_rows}, "
        f"file_alpha={settings.file_alpha}, exchangeable_min_p={settings.exchangeable_min_p})"
    )
    header = ["dataset", "refused", *(f"refused at min_p {t:g}" for t in THRESHOLDS), "reasons"]
    print(" | ".join(header))
    total = Counter()
    for name in args.datasets:
        dataset = load_dataset(dataset_specs()[name])
        reasons: Counter[str] = Counter()
        at: Counter[float] = Counter()
        for seed in range(args.shuffles):
            copy = shuffled(dataset, 1000 + seed)
            ctx = TestContext(copy, None, settings, seed=seed)
            reason, figures = order_signal(ctx, copy.rows[: settings.n_rows])
            reasons[reason_kind(reason)] += 1
            whole = reason is not None and "whole file" in reason
            smallest = min(figures["structure_p_value"], figures["structure_overall_p_value"])
            for threshold in THRESHOLDS:
                at[threshold] += whole or smallest <= threshold
        refused = args.shuffles - reasons["runs"]
        total["files"] += args.shuffles
        total["refused"] += refused
        shares = [f"{at[t] / args.shuffles:.2f}" for t in THRESHOLDS]
        detail = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()) if k != "runs")
        print(" | ".join([name, f"{refused}/{args.shuffles}", *shares, detail or "-"]))
    print(f"all files: {total['refused']}/{total['files']} shuffles refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
