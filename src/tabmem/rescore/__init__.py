"""Score answers recorded elsewhere with a test's own scoring and verdict, logged as runs.

    python -m tabmem.rescore FILE --dataset NAME --test TEST --model-name NAME [...]
    python -m tabmem.rescore --folder DIR [--data NAME=PATH ...] [...]
    python -m tabmem.rescore BUNDLE [--data NAME=PATH ...]

``layouts`` reads a file into ``Recorded`` lines (a run's queries.json, the published CSV
layouts of the papers' answers); ``core`` locates each line in the dataset and scores and
decides as a live run does; ``run`` logs one file as an MLflow run; ``folder`` does so for a
whole folder of published answers; ``marks`` sets the results beside the paper's own marks;
``bundle`` rescores a grid's reproducibility bundle (``tabmem bundle``) and compares verdicts.
Lines that cannot be located are counted with their reasons, never scored.
"""

from tabmem.rescore.core import Located, locate_all, rescore
from tabmem.rescore.layouts import FORMATS, guess_format, read_transcript
from tabmem.rescore.run import Rescored, run_rescore

__all__ = [
    "FORMATS",
    "Located",
    "Rescored",
    "guess_format",
    "locate_all",
    "read_transcript",
    "rescore",
    "run_rescore",
]
