"""Calibration in this process: the reference part of ``make calibrate`` (every test of rows
seen against the reference models' Python objects, no HTTP, no subprocess, no MLflow) at
thousands of cells, with the dataset verdict, the false-positive bounds and the power by
share (``scripts/calibrate_reference.py``, ``make calibrate-reference``)."""

from tabmem.calibrate.run import SIZES, Outcome, Size, calibrate

__all__ = ["SIZES", "Outcome", "Size", "calibrate"]
