"""Does the most frequent value of each sampled feature agree with the data's most frequent one?

Each feature is compared in *units*: its values themselves when it has at most ``max_values``
distinct values (categories, counts, measurements rounded to a few values), else ``n_bins``
equal-width bins over the data's range (a sampled number outside the range falls in no bin and
never agrees). Missing values take no part. Text features with more than ``max_values`` values
(names, tickets) have no meaningful mode and are left out, and so are features whose units are
all equally frequent in the data (every choice would agree).

The p-value asks whether the agreements are more than chance: under the null hypothesis the
model picks its modal unit uniformly among the data's ``k`` units, so a feature agrees with
probability ``m / k`` (``m`` modal units, more than one on ties), independently across
features; the number of agreements then follows a Poisson-binomial distribution.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tabmem.data.values import normalize_value


@dataclass(frozen=True)
class FeatureModes:
    """One feature's modes in the data and in the samples, and whether they agree."""

    name: str
    units: str
    data_modes: tuple[str, ...]
    n_units: int
    sample_mode: str | None
    n_sampled: int
    agrees: bool

    @property
    def chance(self) -> float:
        """The chance of agreeing by picking a unit uniformly at random."""
        return len(self.data_modes) / self.n_units


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None


@dataclass(frozen=True)
class Units:
    """How a feature's values become units: themselves, or equal-width bins over a range."""

    kind: str
    low: float = 0.0
    high: float = 0.0
    n_bins: int = 0

    def of(self, value: str) -> str | None:
        """The unit of a normalized value, or None (missing, not a number, out of range)."""
        if value == "":
            return None
        if self.kind == "values":
            return value
        number = _number(value)
        if number is None or not self.low <= number <= self.high:
            return None
        width = (self.high - self.low) / self.n_bins
        index = min(int((number - self.low) / width), self.n_bins - 1) if width > 0 else 0
        left = self.low + index * width
        return f"[{left:.6g}, {left + width:.6g}]"


def feature_units(values: Sequence[str], max_values: int, n_bins: int) -> Units | None:
    """The units of one column (normalized values), or None for text with no meaningful mode."""
    present = [v for v in values if v != ""]
    distinct = set(present)
    if len(distinct) <= max_values:
        return Units("values")
    numbers = [_number(v) for v in present]
    if any(n is None for n in numbers):
        return None
    return Units("bins", min(numbers), max(numbers), n_bins)


def _modes(units: Sequence[str]) -> tuple[list[str], int]:
    counts = Counter(units)
    top = max(counts.values())
    return sorted(u for u, c in counts.items() if c == top), len(counts)


def compare_modes(
    name: str,
    data: Sequence[str],
    sampled: Sequence[str],
    rng: random.Random,
    max_values: int = 50,
    n_bins: int = 10,
) -> FeatureModes | None:
    """One feature's comparison, or None when the feature has no informative mode.

    Ties among the samples' most frequent units are broken with ``rng``.
    """
    data = [normalize_value(v) for v in data]
    units = feature_units(data, max_values, n_bins)
    if units is None:
        return None
    data_units = [u for u in map(units.of, data) if u is not None]
    if not data_units:
        return None
    modes, n_units = _modes(data_units)
    if len(modes) == n_units:
        return None
    sample_units = [u for u in (units.of(normalize_value(v)) for v in sampled) if u is not None]
    mode = None
    if sample_units:
        tied, _ = _modes(sample_units)
        mode = tied[rng.randrange(len(tied))]
    kind = "values" if units.kind == "values" else f"{units.n_bins} bins"
    return FeatureModes(name, kind, tuple(modes), n_units, mode, len(sample_units), mode in modes)


def poisson_binomial_tail(probabilities: Sequence[float], at_least: int) -> float:
    """P(X >= at_least) where X counts successes of independent trials with these chances."""
    pmf = np.array([1.0])
    for p in probabilities:
        pmf = np.convolve(pmf, [1.0 - p, p])
    return float(min(1.0, pmf[max(at_least, 0) :].sum()))
