"""A made-up dataset that no model can have seen: the control for every memorization test.

The rows describe fictional "groves" with invented names and categories. Features depend on
each other and the binary target ``sealed`` follows from them with noise, so few-shot learning
has something to learn, while completion tests must fail unless a model guesses.

Only ``random.Random.random()`` is used, and only with arithmetic (no ``log``/``exp``), because
Python guarantees that method's sequence for a given integer seed and IEEE arithmetic is exact
everywhere: the same seed gives the same bytes on every Python version and platform.
"""

from __future__ import annotations

import random

DEFAULT_ROWS = 600
DEFAULT_SEED = 20260101

COLUMNS = (
    "grove",
    "terrace",
    "brine_index",
    "canopy_pct",
    "frost_nights",
    "keeper_rank",
    "tender_years",
    "sap_yield",
    "weave",
    "sealed",
)

# grove: (weight, mean terrace, mean brine index, weave weights for _WEAVES)
_GROVES = {
    "Velmora": (0.30, 2.0, 3.10, (0.6, 0.3, 0.1)),
    "Quisthaven": (0.25, 3.5, 4.40, (0.2, 0.5, 0.3)),
    "Tarnwick": (0.20, 5.0, 2.20, (0.1, 0.3, 0.6)),
    "Oblenne": (0.15, 4.0, 5.60, (0.3, 0.3, 0.4)),
    "Drusk": (0.10, 6.0, 3.80, (0.5, 0.1, 0.4)),
}
_RANKS = ("Ashel", "Brenn", "Corvane", "Dimmet")
_WEAVES = ("trell", "quorran", "ivisk")
_WEAVE_EFFECT = {"trell": 0.35, "quorran": 0.0, "ivisk": -0.30}


def _normal(rng: random.Random) -> float:
    """A standard-normal-like draw (sum of 12 uniforms minus 6): arithmetic only, so exact."""
    return sum(rng.random() for _ in range(12)) - 6.0


def _pick(rng: random.Random, options: tuple[str, ...], weights: tuple[float, ...]) -> str:
    """One option drawn with the given weights."""
    u = rng.random() * sum(weights)
    for option, weight in zip(options, weights, strict=True):
        if u < weight:
            return option
        u -= weight
    return options[-1]


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def _row(rng: random.Random) -> list[str]:
    """One record; each feature is drawn given the ones before it."""
    groves = tuple(_GROVES)
    grove = _pick(rng, groves, tuple(_GROVES[g][0] for g in groves))
    _, terrace_mean, brine_mean, weave_weights = _GROVES[grove]

    terrace = int(_clamp(round(terrace_mean + 1.1 * _normal(rng)), 1, 7))
    brine = _clamp(brine_mean + 0.55 * _normal(rng), 0.4, 8.9)
    canopy = _clamp(18.0 + 9.5 * terrace - 2.5 * brine + 9.0 * _normal(rng), 1.0, 99.0)
    frost = int(_clamp(round(1.5 + 2.2 * terrace - canopy / 25.0 + 1.8 * _normal(rng)), 0, 30))
    tender = int(_clamp(round(6.0 + 34.0 * rng.random() + 4.0 * _normal(rng)), 1, 52))
    rank_pos = _clamp(tender / 14.0 + 0.8 * _normal(rng), 0.0, 3.999)
    rank = _RANKS[int(rank_pos)]
    weave = _pick(rng, _WEAVES, weave_weights)
    sap = 12.0 + 0.16 * canopy - 1.4 * brine + 0.9 * int(rank_pos) + 2.2 * _normal(rng)
    sap = _clamp(sap, 0.05, 60.0)

    score = (
        0.09 * (sap - 15.0)
        - 0.07 * (frost - 8.0)
        + 0.25 * int(rank_pos)
        + _WEAVE_EFFECT[weave]
        - 0.12 * (brine - 3.8)
    )
    p_sealed = _clamp(0.5 + 0.35 * score, 0.06, 0.94)
    sealed = "yes" if rng.random() < p_sealed else "no"

    return [
        grove,
        str(terrace),
        f"{brine:.2f}",
        f"{canopy:.1f}",
        str(frost),
        rank,
        str(tender),
        f"{sap:.2f}",
        weave,
        sealed,
    ]


def generate_synthetic_novel(n_rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> str:
    """CSV text of the never-published dataset: a header and ``n_rows`` records, ``\\n`` ends."""
    if n_rows < 1:
        raise ValueError(f"n_rows must be at least 1, got {n_rows}")
    rng = random.Random(seed)
    lines = [",".join(COLUMNS)]
    lines.extend(",".join(_row(rng)) for _ in range(n_rows))
    return "\n".join(lines) + "\n"
