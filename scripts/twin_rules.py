"""How well the blind checks' data-only rules tell a file's rows from its twin's: the baseline a
twin test's model must beat (docs/transforms.md, docs/logprob_tests.md).

    python scripts/twin_rules.py                         # the six paper files, seeds 0-2
    python scripts/twin_rules.py --datasets wine --seeds 0 --pairs 100 --out /tmp/rules.md

For each file and seed, a seeded sample of ``--pairs`` data rows is paired with the twin's rows
at their places, as the twin tests pair them, and each rule (fitted without the real row)
gives its chance of preferring the real row; the table shows each rule's rate and the best.
A rate near 1/2 leaves a test the most to find; one far above it is a twin the rules see
through.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from tabmem.data import dataset_specs, load_dataset
from tabmem.data.twin import twin_of
from tabmem.errors import TabmemError
from tabmem.markdown import markdown_table
from tabmem.stats.best_of import CHANCE, BestOf
from tabmem.stats.blind_check import pair_chances

PAPERS = "iris,wine,titanic,openml-diabetes,california-housing,adult"


def rule_rates(name: str, seed: int, pairs: int) -> tuple[int, dict[str, float]]:
    """The pairs asked and each data-only rule's rate of preferring the real row."""
    data = load_dataset(dataset_specs()[name])
    twin = twin_of(data, seed)
    n = min(pairs, len(data.rows))
    rows = sorted(np.random.default_rng(seed).choice(len(data.rows), n, replace=False))
    chances = pair_chances(data, [(i + 1, data.rows[i], twin.rows[i]) for i in rows])
    rates = BestOf.of(list(chances.values())).accuracies()
    return n, {rule: rate for rule, rate in rates.items() if rule != CHANCE}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=PAPERS, help="comma-separated (default: %(default)s)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated (default: %(default)s)")
    parser.add_argument("--pairs", type=int, default=200, help="pairs a file (default: 200)")
    parser.add_argument(
        "--out", type=Path, default=Path("docs/results/twins/blind_rules.md"), help="file"
    )
    args = parser.parse_args(argv)
    specs = dataset_specs()
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    unknown = [n for n in names if n not in specs]
    if unknown:
        print(f"error: unknown dataset(s) {', '.join(unknown)}; known: {', '.join(specs)}")
        return 1
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    lines, rules = [], set()
    for name in names:
        for seed in seeds:
            try:
                n, rates = rule_rates(name, seed, args.pairs)
            except TabmemError as exc:
                print(f"error: {name}, seed {seed}: {exc}", file=sys.stderr)
                return 1
            rules |= set(rates)
            lines.append((name, seed, n, rates))
            best = max(rates, key=rates.__getitem__)
            print(f"{name} seed {seed}: best rule {best} {rates[best]:.2f} of {n} pairs")
    order = sorted(rules)
    table = markdown_table(
        ["dataset", "seed", "pairs", "best rule", "best rate", *order],
        [
            (
                name,
                seed,
                n,
                max(rates, key=rates.__getitem__),
                f"{max(rates.values()):.2f}",
                *(f"{rates[r]:.2f}" if r in rates else "-" for r in order),
            )
            for name, seed, n, rates in lines
        ],
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "# The blind checks' data-only rules against the twin\n\n"
        "Each rule's rate of preferring a real row to the twin's row at its place "
        f"(`scripts/twin_rules.py`, {args.pairs} pairs a file at most): the baseline a twin "
        "test's model must beat is the best of them on the pairs it decides.\n\n" + table + "\n"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
