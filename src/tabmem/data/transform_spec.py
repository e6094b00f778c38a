"""What the transforms may do to each column of a dataset: its kind, its plain name, its recodes.

A dataset config may carry a ``transform_spec:`` block (see ``docs/transforms.md``)::

    transform_spec:
      task: "Predict the species of an iris flower from its measurements."
      columns:
        - {name: sepal_length, kind: numeric, description: "Sepal length (cm)"}
        - {name: species, kind: categorical, description: "Species",
           recode: {Iris-setosa: Setosa}}

Columns the block does not list are inferred from the data: numeric when every non-empty
value is a plain decimal number, categorical otherwise. Kinds:

- ``numeric``: perturbed (``perturbed``), rounded with noise (``task``), standardised
  (``statistical``);
- ``categorical``: kept, recoded (``task``), coded as integers (``statistical``);
- ``identifier``: replaced by values that do not occur in the data (``perturbed``), left out of
  the baselines' features.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tabmem.errors import ConfigError

KINDS = ("numeric", "categorical", "identifier")
PLAIN_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")


@dataclass(frozen=True)
class ColumnSpec:
    """One column: its name in the file, its kind, its plain description and category recodes."""

    name: str
    kind: str
    description: str = ""
    recode: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TransformSpec:
    """Every column of a dataset in file order, the target, and the task in plain words."""

    columns: tuple[ColumnSpec, ...]
    target: str | None
    task: str = ""

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def kinds(self) -> dict[str, str]:
        """Column name -> kind."""
        return {c.name: c.kind for c in self.columns}

    def renamed(self, names: Sequence[str], **changes: Any) -> TransformSpec:
        """The same columns under new names (in order), the target following its column."""
        target = None
        if self.target is not None:
            target = names[self.names.index(self.target)]
        columns = tuple(replace(c, name=n) for c, n in zip(self.columns, names, strict=True))
        return replace(self, columns=columns, target=target, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Plain data, as a ``transform_spec:`` block would hold it."""
        return {
            "task": self.task,
            "target": self.target,
            "columns": [{**asdict(c), "recode": dict(c.recode)} for c in self.columns],
        }


def is_plain_number(text: str) -> bool:
    """Whether ``text`` (surrounding whitespace ignored) is a plain decimal number."""
    return PLAIN_NUMBER.fullmatch(text.strip()) is not None


def infer_kind(values: Iterable[str]) -> str:
    """``numeric`` when every non-empty value is a plain number (and there is one), else
    ``categorical``."""
    present = [v for v in values if v.strip()]
    return "numeric" if present and all(is_plain_number(v) for v in present) else "categorical"


def plain(tree: Any) -> Any:
    """Mappings and lists (OmegaConf's included) as plain dicts and lists."""
    if isinstance(tree, Mapping):
        return {str(k): plain(v) for k, v in tree.items()}
    if isinstance(tree, Sequence) and not isinstance(tree, str):
        return [plain(v) for v in tree]
    return tree


def _column(entry: Mapping[str, Any], dataset: str) -> ColumnSpec:
    name = str(entry.get("name", ""))
    kind = str(entry.get("kind", ""))
    if kind and kind not in KINDS:
        raise ConfigError(
            f"Dataset '{dataset}': column '{name}' has kind '{kind}' in transform_spec; "
            f"use one of {', '.join(KINDS)}."
        )
    recode = {str(k): str(v) for k, v in (entry.get("recode") or {}).items()}
    return ColumnSpec(name, kind, str(entry.get("description") or ""), recode)


def build_spec(
    dataset: str,
    header: Sequence[str],
    columns: Sequence[Sequence[str]],
    target: str | None,
    block: Mapping[str, Any] | None,
) -> TransformSpec:
    """The spec of a table (header and column values) from a ``transform_spec:`` block, with
    every column the block leaves out, or leaves without a kind, inferred from its values."""
    block = plain(block or {})
    listed = {}
    for entry in block.get("columns") or []:
        column = _column(entry, dataset)
        if column.name not in header:
            raise ConfigError(
                f"Dataset '{dataset}': transform_spec names column '{column.name}', "
                "which is not in the file's header."
            )
        listed[column.name] = column
    target = str(block.get("target") or target or "") or None
    if target is not None and target not in header:
        raise ConfigError(f"Dataset '{dataset}': the target '{target}' is not in the header.")
    specs = []
    for name, values in zip(header, columns, strict=True):
        column = listed.get(name, ColumnSpec(name, ""))
        if not column.kind:
            column = replace(column, kind=infer_kind(values))
        if column.kind == "numeric" and infer_kind(values) != "numeric":
            raise ConfigError(
                f"Dataset '{dataset}': transform_spec calls column '{name}' numeric, but it "
                "holds values that are not numbers; call it categorical."
            )
        specs.append(column)
    return TransformSpec(tuple(specs), target, str(block.get("task") or ""))
