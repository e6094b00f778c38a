"""A dataset as a classification problem: feature values as the file writes them, and labels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tabmem.data.dataset import Dataset
from tabmem.data.table import RawTable
from tabmem.data.transforms import spec_of


@dataclass(frozen=True)
class PredictionData:
    """Every row with a label: its feature values (stripped text), its label, its row number.

    ``kinds`` gives each feature's kind (numeric, categorical, identifier) for the baselines.
    """

    target: str
    features: tuple[str, ...]
    kinds: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]
    labels: tuple[str, ...]
    rows: tuple[int, ...]

    @property
    def classes(self) -> list[str]:
        return sorted(set(self.labels))

    def kind_map(self) -> dict[str, str]:
        return dict(zip(self.features, self.kinds, strict=True))

    def frame(self, indices: Sequence[int]) -> pd.DataFrame:
        """The rows at ``indices`` as a DataFrame: numeric features as floats (NaN if empty),
        the others as text (None if empty)."""
        columns = {}
        for j, (name, kind) in enumerate(zip(self.features, self.kinds, strict=True)):
            raw = [self.values[i][j] for i in indices]
            if kind == "numeric":
                columns[name] = np.array([float(v) if v else np.nan for v in raw], dtype=float)
            else:
                columns[name] = pd.Series([v or None for v in raw], dtype=object)
        return pd.DataFrame(columns)


def prediction_data(dataset: Dataset) -> PredictionData | None:
    """The dataset's rows with a non-empty target, or None when it has no target column."""
    table = RawTable.from_dataset(dataset)
    spec = spec_of(dataset, table)
    if spec.target is None:
        return None
    target = spec.names.index(spec.target)
    keep = [j for j in range(len(spec.columns)) if j != target]
    values, labels, rows = [], [], []
    for number, row in enumerate(table.rows, start=1):
        label = row[target].strip()
        if not label:
            continue
        values.append(tuple(row[j].strip() for j in keep))
        labels.append(label)
        rows.append(number)
    return PredictionData(
        target=spec.target,
        features=tuple(spec.names[j] for j in keep),
        kinds=tuple(spec.columns[j].kind for j in keep),
        values=tuple(values),
        labels=tuple(labels),
        rows=tuple(rows),
    )
