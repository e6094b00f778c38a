"""tabmem: tests large language models for knowledge and memorization of tabular datasets."""

__version__ = "0.1.0"
