"""The blind check of the learned likelihood test (``test=likelihood_inference``) on the
shipped files: its pipeline with the data-only rules in place of the model.

For each file (and, with ``--twins``, for the file's twin, which no model can have read), the
test's pairs (every row up to 1,000 and the twin's row at its place, each seed of ``--seeds``), each
pair put to the blind check's data-only rules (``tabmem.stats.blind_check``), and the rules'
chances combined by the test's own cross-fitted classifier (``rules combined``). Printed: the
best single rule's rate of preferring the real row, the combination's held-out rate, and its
exact p-value against a coin flip (``--permutations`` swaps). Where the combination is above
chance, the file's distribution alone tells real rows from twin rows that often; the test's
baseline then stands there, and a model is judged against it, not against a coin flip.

    python scripts/blind_check_learned.py [--files iris wine ...] [--twins] [--seeds 0,1,2]
        [--out docs/results/twins/blind_learned.md]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import bench_common  # noqa: F401  (the environment the scripts share)
from bench_common import composed_test_config, print_table

from tabmem.battery.twin_pairs import rng_of, twin_pairs
from tabmem.data import dataset_specs, load_dataset
from tabmem.data.twin import twin_of
from tabmem.markdown import markdown_table
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
ABOVE_CHANCE_P = 0.01


def check(data, label: str, seed: int, n_rows: int, penalty: float, permutations: int) -> list:
    """One file's row of the table (``label`` names it: the file, or its twin)."""
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
    verdict = "at chance" if test.p_value > ABOVE_CHANCE_P else "above chance"
    return [
        label,
        seed,
        len(pairs),
        f"{best} {rates[best]:.3f}",
        f"{test.win_rate:.3f} ({test.wins}/{test.untied})",
        f"{test.p_value:.3g}",
        f"{test.design_effect:.2f}",
        verdict,
        f"{time.perf_counter() - started:.0f}",
    ]


HEADERS = [
    "file",
    "seed",
    "pairs",
    "best single rule",
    "rules combined, held out",
    "p (coin flip)",
    "design effect",
    "reading",
    "s",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", nargs="*", default=PAPER_FILES)
    parser.add_argument("--twins", action="store_true", help="also each file's twin")
    parser.add_argument("--twins-only", action="store_true", help="each file's twin alone")
    parser.add_argument("--seeds", default="0", help="comma-separated (default: %(default)s)")
    parser.add_argument("--permutations", type=int, default=999)
    parser.add_argument("--out", type=Path, help="also write the table here as Markdown")
    args = parser.parse_args()
    config = composed_test_config("likelihood_inference")
    specs = dataset_specs()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    settings = (config["n_rows"], config["penalty"], args.permutations)
    rows = []
    for name in args.files:
        data = load_dataset(specs[name])
        for seed in seeds:
            if not args.twins_only:
                rows.append(check(data, name, seed, *settings))
                print(rows[-1], flush=True)
            if args.twins or args.twins_only:
                rows.append(check(twin_of(data, seed), f"{name}'s twin", seed, *settings))
                print(rows[-1], flush=True)
    title = "The learned test's pipeline on the data-only rules"
    print_table(title, HEADERS, rows)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            f"# {title}\n\n"
            "Made by `python scripts/blind_check_learned.py "
            f"--seeds {args.seeds}{' --twins' if args.twins else ''}`: the test's pairs of each "
            "file (every row up to the test's `n_rows`, the twin's row at its place) put to the "
            "blind check's data-only rules, combined by the test's cross-fitted classifier. "
            "A file's twin is a file no model can have read. `above chance` where the "
            f"combination's exact p against a coin flip is at most {ABOVE_CHANCE_P}; the test's "
            "baseline then stands above 1/2 there (docs/logprob_tests.md).\n\n"
            + markdown_table(HEADERS[:-1], [r[:-1] for r in rows])
            + "\n"
        )
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
