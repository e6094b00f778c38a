"""The format of a feature's values in the file, and whether a sampled value has it.

Three kinds of feature, read from the file's own values (stripped of surrounding whitespace):

- **numeric**: every non-empty value is a plain decimal number. A sampled value has the format
  when it is a plain number whose shape (digits after the point, and whether a fraction is
  written ``.5`` or ``0.5``) occurs in the file: ``41.0`` is not the format of a column of
  ``41``, and ``41`` is not that of a column of ``41.0``.
- **categorical**: at most ``max_categories`` distinct values. A sampled value has the format
  when it is one of them, spelled exactly (case included).
- **text**: more distinct values (names, tickets, cabins). A sampled value has the format when
  its shape occurs in the file: letters become ``a``, digits ``9``, other characters stay, so
  ``Smith, Mr. John`` has the shape of ``Braund, Mr. Owen`` (``a, a. a``).

An empty sampled value has the format when the file has empty values in that column.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_NUMBER = re.compile(r"[+-]?(?P<whole>\d*)(?:\.(?P<fraction>\d*))?")
_LETTERS = re.compile(r"[^\W\d_]+")
_DIGITS = re.compile(r"\d+")


def number_shape(text: str) -> tuple[int, bool] | None:
    """(digits after the point, fraction written without a leading digit), or None when
    ``text`` is not a plain decimal number."""
    match = _NUMBER.fullmatch(text)
    if match is None or not any(ch.isdigit() for ch in text):
        return None
    fraction = match["fraction"]
    decimals = len(fraction) if fraction is not None else 0
    return decimals, fraction is not None and match["whole"] == ""


def text_shape(text: str) -> str:
    """The value with letter runs as ``a`` and digit runs as ``9``."""
    return _DIGITS.sub("9", _LETTERS.sub("a", text))


@dataclass(frozen=True)
class FeatureFormat:
    """What a feature's values look like in the file."""

    name: str
    kind: str
    allows_empty: bool
    allowed: frozenset

    def matches(self, value: str) -> bool:
        """Whether a sampled value (already stripped) has this feature's format."""
        if value == "":
            return self.allows_empty
        if self.kind == "numeric":
            return number_shape(value) in self.allowed
        if self.kind == "categorical":
            return value in self.allowed
        return text_shape(value) in self.allowed

    def describe(self) -> str:
        """The format in a few words, for tables."""
        if self.kind == "numeric":
            decimals = sorted({d for d, _ in self.allowed})
            return f"number with {'/'.join(map(str, decimals))} decimals"
        if self.kind == "categorical":
            return f"one of {len(self.allowed)} categories"
        return f"text in one of {len(self.allowed)} shapes"


def feature_format(name: str, values: Sequence[str], max_categories: int = 50) -> FeatureFormat:
    """The format of one column, from its values in the file."""
    present = [v for v in values if v != ""]
    allows_empty = len(present) < len(values)
    shapes = {number_shape(v) for v in present}
    if present and None not in shapes:
        return FeatureFormat(name, "numeric", allows_empty, frozenset(shapes))
    distinct = frozenset(present)
    if len(distinct) <= max_categories:
        return FeatureFormat(name, "categorical", allows_empty, distinct)
    return FeatureFormat(name, "text", allows_empty, frozenset(text_shape(v) for v in distinct))
