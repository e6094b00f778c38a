"""The blind check of the learned likelihood test (``test=likelihood_inference``) on the
shipped files: its pipeline with the data-only rules in place of the model.

For each file (and, with ``--twins``, for the file's twin, which no model can have read), the
test's pairs (every row up to 1,000 and the twin's row at its place, seed ``--seed``), each
pair put to the blind check's data-only rules (``tabmem.stats.blind_check``), and the rules'
chances combined by the test's own cross-fitted classifier (``rules combined``). Printed: the
best single rule's rate of preferring the real row, the combination's held-out rate, and its
exact p-value against a coin flip (``--permutations`` swaps). Where the combination is above
chance, the file's distribution alone tells real rows from twin rows that often; the test's
baseline then stands there, and a model is judged against it, not against a coin flip.

    python scripts/blind_check_learned.py [--files iris wine ...] [--twins] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import bench_common  # noqa: F401  (the environment the scripts share)
from bench_common import composed_test_config, print_table

from tabmem.battery.twin_pairs import rng_of, twin_pairs
from tabmem.data import dataset_specs, load_dataset
from tabmem.data.twin import twin_of
from tabmem.stats.blind_check import pair_chances
from tabmem.stats.learned_pairs import halves, held_out_test

PAPER_FILES = [
    "iris",
    "wine",
    "titanic",
    "openml-diabetes",
    "scikit-diabetes",
    "adult",
    "california-housing",
    "icu",
    "synthetic-novel",
]


def check(data, seed: int, n_rows: int, penalty: float, permutations: int) -> list:
    """One file's row of the table."""
    import numpy as np

    started = time.perf_counter()
    twin = twin_of(data, seed)
    pairs = twin_pairs(data, twin, n_rows, rng_of(seed))
    chances = pair_chances(data, [(p.row, p.real, p.twin) for p in pairs])
    rules = [{k: v for k, v in chances[p.row].items() if k != "chance"} for p in pairs]
    names = sorted(rules[0])
    table = np.array([[c[n] for n in names] for c in rules])
    rates = dict(zip(names, table.mean(axis=0), strict=True))
    best = max(rates, key=rates.__getitem__)
    half = halves(len(pairs), rng_of(seed + 2))
    test = held_out_test(
        table, 1.0 - table, half, penalty, permutations, rng_of(seed + 3), positive=True
    )
    verdict = "at chance" if test.p_value > 0.01 else "above chance"
    return [
        data.name,
        len(pairs),
        f"{best} {rates[best]:.3f}",
        f"{test.win_rate:.3f} ({test.wins}/{test.untied})",
        f"{test.p_value:.3g}",
        f"{test.design_effect:.2f}",
        verdict,
        f"{time.perf_counter() - started:.0f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", nargs="*", default=PAPER_FILES)
    parser.add_argument("--twins", action="store_true", help="also each file's twin")
    parser.add_argument("--twins-only", action="store_true", help="each file's twin alone")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--permutations", type=int, default=999)
    args = parser.parse_args()
    config = composed_test_config("likelihood_inference")
    specs = dataset_specs()
    rows = []
    for name in args.files:
        data = load_dataset(specs[name])
        if not args.twins_only:
            rows.append(
                check(data, args.seed, config["n_rows"], config["penalty"], args.permutations)
            )
            print(rows[-1], flush=True)
        if args.twins or args.twins_only:
            twin = twin_of(data, args.seed)
            rows.append(
                check(twin, args.seed, config["n_rows"], config["penalty"], args.permutations)
            )
            print(rows[-1], flush=True)
    print_table(
        f"The learned test's pipeline on the data-only rules (seed {args.seed})",
        [
            "file",
            "pairs",
            "best single rule",
            "rules combined, held out",
            "p (coin flip)",
            "design effect",
            "",
            "s",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
