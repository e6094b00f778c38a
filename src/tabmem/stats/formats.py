"""The format of a feature's values in the file, and whether a sampled value has it.

Three kinds of feature, read from the file's own values (stripped of surrounding whitespace):

- **numeric**: every non-empty value is a plain decimal number. A sampled value has the format
  when it is a plain number whose shape — digits before the point, digits after it, and whether
  a fraction is written ``.5`` or ``0.5`` — occurs in the file, whose trailing zeros are at
  least as many as every value of the file has (a column of ``880.0``, ``7099.0`` never ends in
  another digit; prices in hundreds keep their ``00``), and which lies within the file's range.
  ``41.0`` is not the format of a column of ``41``, ``41`` not that of ``41.0``, ``4074.1`` not
  that of a column whose values all end in ``.0``, and ``53.7`` not that of a column of sepal
  lengths from ``4.3`` to ``7.9``: a number that merely looks plausible fails.
- **categorical**: at most ``max_categories`` distinct values. A sampled value has the format
  when it is one of them, spelled exactly (case included).
- **text**: more distinct values (names, tickets, cabins). A sampled value has the format when
  its shape occurs in the file: letters become ``a``, digits ``9``, other characters stay, so
  ``Smith, Mr. John`` has the shape of ``Braund, Mr. Owen`` (``a, a. a``).

An empty sampled value has the format when the file has empty values in that column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_NUMBER = re.compile(r"[+-]?(?P<whole>\d*)(?:\.(?P<fraction>\d*))?")
_LETTERS = re.compile(r"[^\W\d_]+")
_DIGITS = re.compile(r"\d+")


def number_shape(text: str) -> tuple[int, int, bool] | None:
    """(digits before the point without leading zeros, digits after it, fraction written
    without a leading digit), or None when ``text`` is not a plain decimal number."""
    match = _NUMBER.fullmatch(text)
    if match is None or not any(ch.isdigit() for ch in text):
        return None
    fraction = match["fraction"]
    decimals = len(fraction) if fraction is not None else 0
    whole = len(match["whole"].lstrip("0"))
    return whole, decimals, fraction is not None and match["whole"] == ""


def column_width(spellings: Iterable[str]) -> float:
    """The width of a measurement column's last digit: 10 to the minus the most decimals its
    numbers are written with (iris' ``5.1`` and ``5``: 0.1; adult's ages: 1)."""
    shapes = (number_shape(s.strip()) for s in set(spellings))
    return 10.0 ** -max((shape[1] for shape in shapes if shape is not None), default=0)


def trailing_zeros(text: str) -> int:
    """Zeros at the end of a plain number's digits (``880.0`` has 2, ``452600`` has 2)."""
    digits = "".join(ch for ch in text if ch.isdigit()).lstrip("0")
    return len(digits) - len(digits.rstrip("0"))


def text_shape(text: str) -> str:
    """The value with letter runs as ``a`` and digit runs as ``9``."""
    return _DIGITS.sub("9", _LETTERS.sub("a", text))


@dataclass(frozen=True)
class FeatureFormat:
    """What a feature's values look like in the file; numeric features also keep their range
    and the fewest trailing zeros any of their values has."""

    name: str
    kind: str
    allows_empty: bool
    allowed: frozenset
    low: float = 0.0
    high: float = 0.0
    zeros: int = 0

    def matches(self, value: str) -> bool:
        """Whether a sampled value (already stripped) has this feature's format."""
        if value == "":
            return self.allows_empty
        if self.kind == "numeric":
            shape = number_shape(value)
            return (
                shape in self.allowed
                and trailing_zeros(value) >= self.zeros
                and self.low <= float(value) <= self.high
            )
        if self.kind == "categorical":
            return value in self.allowed
        return text_shape(value) in self.allowed

    def describe(self) -> str:
        """The format in a few words, for tables."""
        if self.kind == "numeric":
            decimals = sorted({d for _, d, _ in self.allowed})
            zeros = f", ending in {self.zeros} zero(s)" if self.zeros else ""
            return (
                f"number from {self.low:g} to {self.high:g} with "
                f"{'/'.join(map(str, decimals))} decimals{zeros}"
            )
        if self.kind == "categorical":
            return f"one of {len(self.allowed)} categories"
        return f"text in one of {len(self.allowed)} shapes"


def feature_format(name: str, values: Sequence[str], max_categories: int = 50) -> FeatureFormat:
    """The format of one column, from its values in the file."""
    present = [v for v in values if v != ""]
    allows_empty = len(present) < len(values)
    shapes = {number_shape(v) for v in present}
    if present and None not in shapes:
        numbers = [float(v) for v in present]
        zeros = min(trailing_zeros(v) for v in present)
        return FeatureFormat(
            name, "numeric", allows_empty, frozenset(shapes), min(numbers), max(numbers), zeros
        )
    distinct = frozenset(present)
    if len(distinct) <= max_categories:
        return FeatureFormat(name, "categorical", allows_empty, distinct)
    return FeatureFormat(name, "text", allows_empty, frozenset(text_shape(v) for v in distinct))
