"""The footnote of a paper table with missing cells: the command that would fill them.

A table never invents a number: a cell without a run prints ``-`` and the table's footnote
names one ``tabmem run -m`` sweep over the missing models, datasets and tests. The sweep
may include cells that already ran; the runner skips those (same configuration, finished, in
the same experiment: a table read from every experiment names none, so the sweep logs to the
default one). A user's own file is named as ``dataset=csv`` with its name and the path its
runs recorded (a path to fill in where none is known).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from functools import lru_cache

NO_RUN = "-"


@lru_cache(maxsize=1)
def user_provided_datasets() -> frozenset[str]:
    """Datasets whose file the user provides (``dataset.path=``), from ``conf/dataset/``."""
    from tabmem.data import dataset_specs

    return frozenset(name for name, spec in dataset_specs().items() if spec.user_provided)


@lru_cache(maxsize=1)
def dataset_configs() -> frozenset[str]:
    """The names ``dataset=`` takes (``conf/dataset/``); any other dataset of a run was a
    user's own file, run as ``dataset=csv dataset.name=<name>``."""
    from tabmem.data import dataset_specs

    return frozenset(dataset_specs())


@dataclass
class MissingCells:
    """Cells a table wanted but found no run for, merged into one sweep."""

    experiment: str
    paths: dict[str, str] = field(default_factory=dict)  # a user's own file: its recorded path
    models: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    overrides: dict[str, list[str]] = field(default_factory=dict)

    def add(self, model: str, dataset: str, *overrides: str) -> None:
        """One missing cell: its model, its dataset and ``key=value`` overrides naming the
        rest (``test=…``, ``transform=…``, ``test.temperature=…``)."""
        _append(self.models, model)
        _append(self.datasets, dataset)
        for override in overrides:
            key, _, value = override.partition("=")
            _append(self.overrides.setdefault(key, []), value)

    def __bool__(self) -> bool:
        return bool(self.models)

    def command(self, datasets: list[str]) -> str:
        """``tabmem run -m`` over the missing models, the given datasets and overrides."""
        parts = [f"model={','.join(self.models)}", f"dataset={','.join(datasets)}"]
        parts += [f"{key}={','.join(values)}" for key, values in self.overrides.items()]
        if self.experiment:  # else the default experiment, where plain runs were logged
            parts.append(f"experiment={self.experiment}")
        return " ".join(["tabmem run -m", *parts])

    def footnote(self, mark: str = NO_RUN) -> str:
        """``mark``: no run yet, and the command that would fill those cells ('' if none)."""
        if not self:
            return ""
        own = [d for d in self.datasets if d not in dataset_configs()]
        user = [d for d in self.datasets if d in user_provided_datasets()]
        shipped = [d for d in self.datasets if d not in {*user, *own}]
        text = f"`{mark}` : no run yet (nothing is carried over from the papers)."
        if shipped:
            text += f" Fill with `{self.command(shipped)}` (cells that already ran are skipped)."
        if user and shipped:
            text += (
                f" User-provided datasets ({', '.join(user)}): the same with "
                "`dataset=<name> dataset.path=/path/to/file.csv`, one dataset at a time."
            )
        elif user:
            command = self.command(["<name>"]) + " dataset.path=/path/to/file.csv"
            text += f" Fill with `{command}` for each of {', '.join(user)} (files you provide)."
        for name in own:
            path = shlex.quote(f"dataset.path={self.paths.get(name) or f'/path/to/{name}.csv'}")
            command = self.command(["csv"]) + f" dataset.name={name} {path}"
            text += f" Your file {name}: `{command}`."
        return text


def _append(values: list[str], value: str) -> None:
    if value not in values:
        values.append(value)
