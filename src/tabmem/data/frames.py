"""A pandas DataFrame as canonical CSV text, and the file it is kept in under outputs/.

The tests read a dataset's exact text, so a frame is turned into text one fixed way: header
first, no index, ``\\n`` line endings, minimal quoting, missing values empty, and each number in
its shortest exact form with whole numbers written without ``.0`` (``5`` and ``5.1``, as the
shipped files write them; pandas would write ``5.0``). The text's sha256 names the file and is
part of the cell's identity, so the same frame is the same cell and an edited one a new cell.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pandas as pd


def _number(value: float) -> str:
    text = repr(float(value))
    return text.removesuffix(".0")


def frame_csv_text(frame: pd.DataFrame) -> str:
    """The frame's canonical CSV text (see the module docstring)."""
    return frame.to_csv(index=False, lineterminator="\n", float_format=_number)


def missing_note(frame: pd.DataFrame, name: str) -> str:
    """One sentence on the frame's missing values (NaN, None, NaT), which its text writes as
    empty fields: how many, in which columns, and how to keep them as a file writes them
    (pandas reads ``n/a``, ``NA``, ``null`` … as missing); "" when it has none."""
    counts = frame.isna().sum()
    counts = counts[counts > 0]
    if counts.empty:
        return ""
    shown = [f"{column} {int(n):,}" for column, n in counts.items()]
    columns = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
    total = int(counts.sum())
    return (
        f"DataFrame '{name}': {total:,} missing value{'s' if total > 1 else ''} ({columns}) "
        "are written as empty fields in the file the model is shown; to show them as your file "
        "writes them (n/a, NA, …), read it with pandas.read_csv(..., keep_default_na=False) or "
        "pass the file's path instead."
    )


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_frame(frame: pd.DataFrame, name: str, folder: Path) -> tuple[Path, str]:
    """Write the frame's text once as ``<folder>/<name>-<sha256 prefix>.csv``; return the path
    and the full sha256. An existing file of that name already holds the same text."""
    text = frame_csv_text(frame)
    digest = text_sha256(text)
    path = folder / f"{name}-{digest[:16]}.csv"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(text, encoding="utf-8", newline="")
        partial.replace(path)
    return path, digest
