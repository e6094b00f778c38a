"""Small, format-keeping changes: numbers moved by about 1 %, identifiers swapped for new ones.

A number keeps its text shape: surrounding whitespace, sign, the count of digits before the
decimal point (and whether it has one, as in ``.28``), and the count of decimals. It always
changes by at least one unit of its last digit, so a memorized value never comes back. A value
written with fewer decimals than others of its column (``3`` among ``3.5``, ``2.9``) gains the
decimals that a change of about 1 % needs, up to the column's most: iris' ``3`` becomes
``3.1`` rather than ``4``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

_NUMBER = re.compile(
    r"(?P<lead>\s*)(?P<sign>[-+]?)(?P<whole>\d*)(?P<point>\.?)(?P<fraction>\d*)(?P<trail>\s*)"
)
_VOWELS = "aeiou"
_CONSONANTS = "bcdfghjklmnpqrstvwxyz"


@dataclass(frozen=True)
class NumberText:
    """A plain number's text in parts; ``units`` counts units of its last digit."""

    lead: str
    sign: str
    whole: str
    point: str
    fraction: str
    trail: str

    @classmethod
    def parse(cls, text: str) -> NumberText | None:
        """The parts of a plain decimal number, or None for anything else."""
        match = _NUMBER.fullmatch(text)
        if match is None or not (match["whole"] or match["fraction"]):
            return None
        if match["point"] and not match["fraction"] and not match["whole"]:
            return None
        return cls(*match.group("lead", "sign", "whole", "point", "fraction", "trail"))

    @property
    def units(self) -> int:
        return int(self.whole + self.fraction or "0")

    def refined(self, extra: int) -> NumberText:
        """The same value written with ``extra`` more decimals."""
        if extra <= 0:
            return self
        return replace(self, point=".", fraction=self.fraction + "0" * extra)

    def with_units(self, units: int) -> str | None:
        """The same shape holding ``units`` (> 0), or None when that shape cannot hold it."""
        width = len(self.whole) + len(self.fraction)
        digits = str(units).zfill(width)
        if units <= 0 or len(digits) > width:
            return None
        whole, fraction = digits[: len(self.whole)], digits[len(self.whole) :]
        if self.whole and (whole[0] == "0") != (self.whole[0] == "0"):
            return None
        return f"{self.lead}{self.sign}{whole}{self.point}{fraction}{self.trail}"


def decimals(text: str) -> int:
    """Digits after the decimal point of a plain number (0 for anything else)."""
    number = NumberText.parse(text)
    return len(number.fraction) if number else 0


def perturb_number(
    text: str, relative_error: float, rng: np.random.Generator, max_decimals: int = 0
) -> str:
    """``text`` moved by about ``relative_error`` of its value, in its own format.

    Zero, empty and non-numeric values come back unchanged. The move is at least one unit of
    the last digit; when the drawn direction would change the format (``9`` -> ``10``,
    ``0.99`` -> ``1.00``), the other direction is taken. A value may gain decimals, up to
    ``max_decimals``, when its own last digit is too coarse for a change of about
    ``relative_error``.
    """
    up = bool(rng.random() < 0.5)
    return _moved(text, relative_error * rng.uniform(0.5, 1.5), up, max_decimals)


def perturb_column(
    values: Sequence[str], relative_error: float, rng: np.random.Generator
) -> list[str]:
    """``perturb_number`` on every value of a column, with the column's most decimals as
    the limit; the random draws are made for the whole column at once."""
    numbers = [NumberText.parse(v) for v in values]
    most = max((len(n.fraction) for n in numbers if n), default=0)
    ups = rng.random(len(values)) < 0.5
    sizes = relative_error * rng.uniform(0.5, 1.5, len(values))
    return [
        _moved(v, float(size), bool(up), most, n)
        for v, n, up, size in zip(values, numbers, ups, sizes, strict=True)
    ]


def _moved(
    text: str, size: float, up: bool, max_decimals: int, number: NumberText | None = None
) -> str:
    """``text`` moved by ``size`` of its value (at least one unit) upwards or downwards."""
    number = number or NumberText.parse(text)
    if number is None or number.units == 0:
        return text
    extra = 0
    while number.units * 10**extra * size < 0.5 and len(number.fraction) + extra < max_decimals:
        extra += 1
    number = number.refined(extra)
    direction = 1 if up else -1
    step = max(1, round(number.units * size)) * direction
    for move in (step, -step, direction, -direction):
        moved = number.with_units(number.units + move)
        if moved is not None:
            return moved
    raise ValueError(f"no same-format neighbour of {text!r}")


def _new_letter(letter: str, rng: np.random.Generator) -> str:
    pool = _VOWELS if letter.lower() in _VOWELS else _CONSONANTS
    drawn = pool[rng.integers(len(pool))]
    return drawn.upper() if letter.isupper() else drawn


def _scrambled(value: str, rng: np.random.Generator) -> str:
    """Letters replaced by letters (vowel for vowel), digits by digits; words ending in a
    period (titles such as ``Mr.``), spaces and punctuation kept."""
    words = re.split(r"(\s+)", value)
    out = []
    for word in words:
        if word.endswith(".") or not word.strip():
            out.append(word)
            continue
        out.append(
            "".join(
                _new_letter(ch, rng)
                if ch.isalpha()
                else str(rng.integers(10))
                if ch.isdigit()
                else ch
                for ch in word
            )
        )
    return "".join(out)


def _new_id(value: str, taken: set[str], rng: np.random.Generator) -> str:
    """A whole number not in ``taken``, as many digits as ``value`` where one is free."""
    lead = value[: len(value) - len(value.lstrip())]
    width = len(value.strip())
    while True:
        for _ in range(50):
            candidate = lead + str(rng.integers(10 ** (width - 1), 10**width))
            if candidate not in taken:
                return candidate
        width += 1


def replace_identifiers(values: Sequence[str], rng: np.random.Generator) -> list[str]:
    """Each distinct value swapped for a new one that occurs nowhere in ``values``.

    Equal values get equal replacements (shared tickets stay shared); empty values stay empty.
    Whole numbers get whole numbers, text gets text of the same shape.
    """
    taken = set(values)
    mapping: dict[str, str] = {}
    for value in values:
        if value in mapping or not value.strip():
            continue
        if value.strip().isdigit():
            new = _new_id(value, taken, rng)
        else:
            new = _scrambled(value, rng)
            while new in taken:
                new = _scrambled(value, rng) + str(rng.integers(10))
        mapping[value] = new
        taken.add(new)
    return [mapping.get(v, v) for v in values]
