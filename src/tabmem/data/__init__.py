"""Datasets: the registry, canonical CSV text, a DataFrame view, and transforms."""

from tabmem.data.dataset import Dataset, DatasetSpec
from tabmem.data.registry import dataset_specs, load_dataset

__all__ = ["Dataset", "DatasetSpec", "dataset_specs", "load_dataset"]
