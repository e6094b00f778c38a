"""Whole observations as ``Feature = Value`` text: building them, and reading them back robustly.

Models write observations in many shapes: pairs joined by commas or one per line, ``=`` or
``:``, Markdown bullets or bold names, names in another case, quoted values, a code fence, a
lead-in sentence, a second observation after the first. The parser finds the dataset's own
feature names followed by ``=`` or ``:`` and takes the text up to the next such name as the
value, so values that hold commas (``Braund, Mr. Owen Harris``) survive. Only the first
observation counts: a feature name seen twice starts a second one, which is ignored.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tabmem.data import Dataset, DatasetSpec
from tabmem.data.csvtext import parse_fields
from tabmem.prompts.fewshot import few_shot_datasets

PAIR_SEPARATOR = " = "
PAIR_JOINER = ", "


def dataset_title(dataset: Dataset) -> str:
    """The name people know the dataset by: its first alias, else its config name."""
    return dataset.spec.aliases[0] if dataset.spec.aliases else dataset.name


def example_pool(tested: Dataset, names: Sequence[str]) -> list[Dataset]:
    """Every dataset of ``names`` fit to give few-shot examples for ``tested`` (another family,
    file present, two features at least), in a fixed order; loaded once per process."""
    return list(_example_pool(tested.spec.family_name, tested.name, tuple(names)))


@lru_cache(maxsize=32)
def _example_pool(family: str, name: str, names: tuple[str, ...]) -> tuple[Dataset, ...]:
    stand_in = Dataset(spec=DatasetSpec(name=name, family=family), path=Path(name), text="")
    found = few_shot_datasets(stand_in, names, len(names), random.Random(0))
    return tuple(sorted((d for d in found if len(d.feature_names) > 1), key=lambda d: d.name))


def feature_names(dataset: Dataset) -> list[str]:
    """The header's feature names, stripped of surrounding whitespace."""
    return [name.strip() for name in dataset.feature_names]


def row_values(dataset: Dataset, index: int) -> list[str]:
    """Data row ``index`` (0-based) as values: fields unquoted and stripped."""
    return [value.strip() for value in parse_fields(dataset.row(index), dataset.delimiter)]


def format_observation(names: Sequence[str], values: Sequence[str]) -> str:
    """One observation as ``name = value`` pairs joined by commas, in the given order."""
    return PAIR_JOINER.join(
        f"{name}{PAIR_SEPARATOR}{value}" for name, value in zip(names, values, strict=True)
    )


def random_observation(dataset: Dataset, rng: random.Random) -> str:
    """A real row of ``dataset``, drawn with ``rng``, as ``name = value`` text."""
    index = rng.randrange(dataset.n_rows)
    return format_observation(feature_names(dataset), row_values(dataset, index))


@dataclass(frozen=True)
class Observation:
    """What the parser read from one completion.

    ``values`` maps each feature found to its value text; ``missing`` lists the features not
    found. The observation is ``complete`` when every feature has a value.
    """

    values: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    repeated: bool = False

    @property
    def complete(self) -> bool:
        return bool(self.values) and not self.missing

    @property
    def problem(self) -> str:
        """Why the observation is not complete, in a few words ("" when it is)."""
        if not self.values:
            return "no feature = value pairs"
        if self.missing:
            shown = ", ".join(self.missing[:5]) + (", ..." if len(self.missing) > 5 else "")
            return f"missing {len(self.missing)} feature(s): {shown}"
        return ""


@lru_cache(maxsize=64)
def _pair_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """A feature name (any case) at a line start or after a comma, semicolon or space, then
    ``=`` or ``:``. Longer names come first so that ``EducationNum`` is not read as ``Education``.
    """
    alternation = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True) if n)
    return re.compile(
        rf"(?:^|(?<=[\s,;|(]))[-*•]*\s*[*_`\"']*(?P<name>{alternation})[*_`\"']*[ \t]*[=:][ \t]*",
        re.M | re.I,
    )


def _canonical(found: str, names: Sequence[str]) -> str:
    """The feature name as the header writes it: the exact match, else the one equal in any
    case."""
    if found in names:
        return found
    return next(n for n in names if n.lower() == found.lower())


def _clean_value(text: str, last: bool) -> str:
    """The value text before the next pair: first line only, separators and quotes removed."""
    value = text.split("\n", 1)[0].strip()
    value = value.rstrip(",;|").strip()
    value = value.strip("*`").strip()
    if last and len(value) > 1 and value.endswith("."):
        value = value[:-1].rstrip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1].strip()
    return value


def parse_observation(text: str, names: Sequence[str]) -> Observation:
    """The first observation in ``text`` whose pairs use the feature ``names``."""
    matches = list(_pair_pattern(tuple(names)).finditer(text))
    values: dict[str, str] = {}
    repeated = False
    for i, match in enumerate(matches):
        name = _canonical(match["name"], names)
        if name in values:
            repeated = True
            break
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        values[name] = _clean_value(text[match.end() : end], last=i + 1 == len(matches))
    missing = tuple(n for n in names if n not in values)
    return Observation(values=values, missing=missing, repeated=repeated)


def format_pairs(names: Sequence[str], values: Sequence[str]) -> str:
    """``name = value`` pairs, one per line, for the first features of a row."""
    return "\n".join(
        f"{name}{PAIR_SEPARATOR}{value}" for name, value in zip(names, values, strict=True)
    )


def read_value(completion: str, feature: str, names: Sequence[str]) -> str:
    """The value a completion gives for ``feature``: its first non-blank line, without a
    repeated ``feature =`` and without any further ``Name = value`` pairs after it."""
    lines = [line for line in completion.split("\n") if line.strip() and "```" not in line]
    if not lines:
        return ""
    answer = re.sub(rf"^\W*{re.escape(feature)}\W*[=:]", "", lines[0]).strip()
    parsed = parse_observation(f"{feature}{PAIR_SEPARATOR}{answer}", [feature, *names])
    return parsed.values.get(feature, "")
