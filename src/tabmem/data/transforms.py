"""Dataset transforms (``transform=``): the same data in another form, seeded and deterministic.

- ``original``: the file as it is.
- ``perturbed``: every non-zero numeric value moved by about 1 % in its own format;
  identifiers replaced by values that occur nowhere in the data.
- ``task``: from ``perturbed``: columns renamed to plain descriptions, categories recoded to
  plain words, numbers rounded to two decimals after a little noise; no dataset name.
- ``statistical``: from ``task``: categories coded as integers, numeric columns standardised
  (mean 0, variance 1), columns renamed ``X1`` … ``Xn`` and the target ``Y``.
- ``obfuscated`` (Silvestri et al. 2025): column names and categories (identifiers included)
  replaced by abstract tokens; numbers kept.
- ``like`` (Silvestri et al. 2025): each column shuffled on its own, which keeps every
  column's distribution exactly and breaks the dependencies between columns.
- ``twin``: new rows drawn column after column from trees fitted to the file, in its formats,
  none equal to a real row (``tabmem.data.twin``): a table no model can have seen.

What a transform may do to each column comes from the dataset's ``transform_spec:`` block
(``tabmem.data.transform_spec``). Each step draws from its own random stream, seeded by the
run's seed, the dataset's name and the step, so ``task`` starts from exactly the
``perturbed`` data of the same seed.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tabmem.data.dataset import Dataset
from tabmem.data.perturb import perturb_column, replace_identifiers
from tabmem.data.table import RawTable
from tabmem.data.transform_spec import TransformSpec, build_spec, is_plain_number
from tabmem.errors import ConfigError

Step = Callable[
    [RawTable, TransformSpec, Mapping[str, Any], np.random.Generator],
    tuple[RawTable, TransformSpec],
]

PIPELINES: dict[str, tuple[str, ...]] = {
    "original": (),
    "perturbed": ("perturbed",),
    "task": ("perturbed", "task"),
    "statistical": ("perturbed", "task", "statistical"),
    "obfuscated": ("obfuscated",),
    "like": ("like",),
    "twin": (),
}
KEEP_IDENTITY = {"original", "perturbed", "like", "twin"}
"""Transforms after which the dataset is still presented under its name and aliases."""


def spec_of(dataset: Dataset, table: RawTable | None = None) -> TransformSpec:
    """The dataset's column kinds, names and recodes (from its config, or inferred);
    ``table`` is the dataset's own table when the caller has it already."""
    table = table or RawTable.from_dataset(dataset)
    return build_spec(
        dataset.name,
        table.header,
        table.columns(),
        dataset.spec.target,
        dataset.spec.extra.get("transform_spec"),
    )


def transform_name(dataset: Dataset) -> str:
    """The transform a dataset went through (``original`` for a file as loaded)."""
    return str(dataset.spec.extra.get("transform", "original"))


def _numbers(values: Sequence[str]) -> np.ndarray:
    return np.array([float(v) for v in values if v.strip()], dtype=float)


def _fixed(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _perturbed(
    table: RawTable, spec: TransformSpec, params: Mapping[str, Any], rng: np.random.Generator
) -> tuple[RawTable, TransformSpec]:
    relative_error = float(params.get("relative_error", 0.01))
    columns = []
    for column, values in zip(spec.columns, table.columns(), strict=True):
        if column.kind == "numeric":
            values = perturb_column(values, relative_error, rng)
        elif column.kind == "identifier":
            values = replace_identifiers(values, rng)
        columns.append(values)
    return table.with_columns(columns), spec


def _noisy(values: list[str], noise: float, decimals: int, rng: np.random.Generator) -> list[str]:
    """Numbers plus Gaussian noise of ``noise`` column standard deviations, rounded; zeros and
    empty values kept."""
    present = _numbers(values)
    scale = noise * float(present.std()) if present.size else 0.0
    draws = rng.normal(0.0, 1.0, len(values)) * scale
    out = []
    for value, draw in zip(values, draws, strict=True):
        number = float(value) if value else 0.0
        out.append(value if not value else _fixed(number + draw if number else 0.0, decimals))
    return out


def _unique_names(names: list[str]) -> list[str]:
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(
            f"transform_spec gives two columns the description '{repeated[0]}'; "
            "make the descriptions distinct."
        )
    return names


def _task(
    table: RawTable, spec: TransformSpec, params: Mapping[str, Any], rng: np.random.Generator
) -> tuple[RawTable, TransformSpec]:
    noise = float(params.get("task_noise", 0.01))
    decimals = int(params.get("task_decimals", 2))
    columns = []
    for column, values in zip(spec.columns, table.columns(), strict=True):
        stripped = [v.strip() for v in values]
        if column.kind == "numeric":
            columns.append(_noisy(stripped, noise, decimals, rng))
        else:
            columns.append([column.recode.get(v, v) for v in stripped])
    names = _unique_names([c.description or c.name for c in spec.columns])
    cleared = replace(
        spec, columns=tuple(replace(c, description="", recode={}) for c in spec.columns)
    )
    return table.with_columns(columns, names), cleared.renamed(names)


def _category_codes(values: list[str]) -> list[str]:
    """Each distinct non-empty value as an integer code, in sorted order (numbers by value)."""
    distinct = sorted(
        {v for v in values if v},
        key=lambda v: (0, float(v), "") if is_plain_number(v) else (1, 0.0, v),
    )
    codes = {v: str(i) for i, v in enumerate(distinct)}
    return [codes.get(v, "") for v in values]


def _standardised(values: list[str], decimals: int) -> list[str]:
    """(x - mean) / sd over the non-empty values (population sd), rounded; empty kept."""
    present = _numbers(values)
    mean, sd = float(present.mean()), float(present.std())
    return [
        "" if not v else _fixed((float(v) - mean) / sd if sd > 0 else 0.0, decimals) for v in values
    ]


def _statistical(
    table: RawTable, spec: TransformSpec, params: Mapping[str, Any], rng: np.random.Generator
) -> tuple[RawTable, TransformSpec]:
    decimals = int(params.get("statistical_decimals", 2))
    columns, names, feature = [], [], 0
    for column, values in zip(spec.columns, table.columns(), strict=True):
        stripped = [v.strip() for v in values]
        if column.kind == "numeric":
            columns.append(_standardised(stripped, decimals))
        else:
            columns.append(_category_codes(stripped))
        if column.name == spec.target:
            names.append("Y")
        else:
            feature += 1
            names.append(f"X{feature}")
    return table.with_columns(columns, names), spec.renamed(names, task="")


def _tokens(values: list[str], rng: np.random.Generator) -> list[str]:
    """Each distinct non-empty value as an abstract token ``v1``, ``v2``, … in random order."""
    distinct = sorted({v for v in values if v})
    order = rng.permutation(len(distinct))
    tokens = {distinct[i]: f"v{rank + 1}" for rank, i in enumerate(order)}
    return [tokens.get(v, "") for v in values]


def _obfuscated(
    table: RawTable, spec: TransformSpec, params: Mapping[str, Any], rng: np.random.Generator
) -> tuple[RawTable, TransformSpec]:
    columns = []
    for column, values in zip(spec.columns, table.columns(), strict=True):
        stripped = [v.strip() for v in values]
        columns.append(stripped if column.kind == "numeric" else _tokens(stripped, rng))
    names = [f"F{j + 1}" for j in range(len(spec.columns))]
    cleared = replace(
        spec, columns=tuple(replace(c, description="", recode={}) for c in spec.columns)
    )
    return table.with_columns(columns, names), cleared.renamed(names, task="")


def _like(
    table: RawTable, spec: TransformSpec, params: Mapping[str, Any], rng: np.random.Generator
) -> tuple[RawTable, TransformSpec]:
    columns = [[values[i] for i in rng.permutation(len(values))] for values in table.columns()]
    return table.with_columns(columns), spec


STEPS: dict[str, Step] = {
    "perturbed": _perturbed,
    "task": _task,
    "statistical": _statistical,
    "obfuscated": _obfuscated,
    "like": _like,
}


def step_rng(seed: int, dataset: str, step: str) -> np.random.Generator:
    """The random stream of one step on one dataset: the same seed gives the same data."""
    return np.random.default_rng(
        [seed, zlib.crc32(dataset.encode("utf-8")), zlib.crc32(step.encode("utf-8"))]
    )


def _derived(dataset: Dataset, table: RawTable, spec: TransformSpec, name: str) -> Dataset:
    extra = {**dataset.spec.extra, "transform": name, "transform_spec": spec.as_dict()}
    changes: dict[str, Any] = {"target": spec.target, "extra": extra, "population": None}
    if name not in KEEP_IDENTITY:
        changes.update(aliases=(), description=spec.task)
    text = table.to_text()
    if not dataset.text.endswith(("\n", "\r")):
        text = text.removesuffix(dataset.newline)
    return Dataset(spec=replace(dataset.spec, **changes), path=dataset.path, text=text)


def apply_transform(dataset: Dataset, transform: Mapping[str, Any], seed: int) -> Dataset:
    """The dataset as the transform config describes it; ``original`` leaves it unchanged."""
    name = str(transform.get("name", "original"))
    if name not in PIPELINES:
        raise ConfigError(
            f"Unknown transform '{name}'; the transforms tabmem knows: {', '.join(PIPELINES)}."
        )
    if name == "original":
        return dataset
    if name == "twin":
        from tabmem.data.twin import twin_of  # its trees need sklearn: seconds to import

        return twin_of(dataset, seed)
    table = RawTable.from_dataset(dataset)
    spec = spec_of(dataset, table)
    for step in PIPELINES[name]:
        table, spec = STEPS[step](table, spec, transform, step_rng(seed, dataset.name, step))
    return _derived(dataset, table, spec, name)
