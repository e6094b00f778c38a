"""A cell's dataset as an MLflow dataset input, so that the UI's runs list names it.

The input carries the file as the source, the table the model was shown (a twin or a
perturbed file under the transform's name), and the sha256 of the text the model was shown:
its first 32 hex digits as the digest (MLflow's column holds 36 characters) and all 64 as a tag.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlflow.entities import DatasetInput

    from tabmem.data.dataset import Dataset

DIGEST_CHARS = 32


@dataclass(frozen=True)
class ShownData:
    """What a run's dataset input is made of, without MLflow: the process that writes the run
    (``tabmem.tracking.writer``) turns it into MLflow's input."""

    name: str
    transform: str
    sha256: str
    source: str
    frame: Any  # the table as a pandas DataFrame

    @classmethod
    def of(cls, dataset: Dataset) -> ShownData:
        """The data of ``dataset`` as transformed for the cell."""
        transform = str(dataset.spec.extra.get("transform", "original"))
        name = dataset.name if transform == "original" else f"{dataset.name} ({transform})"
        sha256 = hashlib.sha256(dataset.text.encode("utf-8")).hexdigest()
        return cls(name, transform, sha256, str(dataset.path), dataset.frame)

    def to_input(self) -> DatasetInput:
        """MLflow's dataset input: the file as the source, the digest and tags above."""
        import mlflow.data
        from mlflow.entities import DatasetInput, InputTag

        # MLflow warns that a local path matches two registered source kinds, and hints at
        # integer columns for model schemas; neither concerns a dataset logged as an input.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            logged = mlflow.data.from_pandas(
                self.frame, source=self.source, name=self.name, digest=self.sha256[:DIGEST_CHARS]
            )
            entity = logged._to_mlflow_entity()  # the schema is inferred here
        tags = [
            InputTag("mlflow.data.context", "evaluation"),
            InputTag("tabmem.sha256", self.sha256),
            InputTag("tabmem.transform", self.transform),
        ]
        return DatasetInput(entity, tags=tags)


def dataset_input(dataset: Dataset) -> DatasetInput:
    """The dataset input of a run over ``dataset`` (as transformed for the cell)."""
    return ShownData.of(dataset).to_input()
