"""Write a table as Markdown, LaTeX and CSV, and a figure as PNG and PDF."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tabmem.markdown import markdown_table


@dataclass
class ReportTable:
    """One table of the report: its cells as strings, footnotes, and the runs it came from.

    ``sources`` traces each number to its run: one dict per filled cell with ``row``,
    ``column``, ``model`` and ``run_id`` (written as ``<name>.sources.csv``).
    """

    name: str
    title: str
    frame: pd.DataFrame
    footnotes: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    sources: list[dict[str, str]] = field(default_factory=list)


@dataclass
class ReportFigure:
    """One figure of the report (a matplotlib Figure), its caption and the runs it came from."""

    name: str
    title: str
    figure: object
    caption: str = ""
    run_ids: list[str] = field(default_factory=list)


def markdown(table: ReportTable) -> str:
    """A GitHub-flavoured Markdown table with its title and footnotes."""
    frame = table.frame.astype(str)
    rows = [[_md_cell(v) for v in row] for row in frame.itertuples(False)]
    notes = [f"\n{note}" for note in table.footnotes]
    grid = markdown_table(list(frame.columns), rows)
    return "\n".join([f"## {table.title}\n", grid, *notes]) + "\n"


def _md_cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", "<br>")


def latex(table: ReportTable) -> str:
    """A LaTeX tabular in a table environment, footnotes below it."""
    frame = table.frame.astype(str)
    columns = "l" * len(frame.columns)
    lines = [
        "\\begin{table}[t]",
        "\\centering",
        f"\\caption{{{_tex(table.title)}}}",
        f"\\begin{{tabular}}{{{columns}}}",
        "\\hline",
        " & ".join(_tex(str(c)) for c in frame.columns) + " \\\\",
        "\\hline",
    ]
    lines += [" & ".join(_tex(str(v)) for v in row) + " \\\\" for row in frame.itertuples(False)]
    lines += ["\\hline", "\\end{tabular}"]
    lines += [f"\\\\[2pt]{{\\footnotesize {_tex(note)}}}" for note in table.footnotes]
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


_TEX = {
    "\\": "\\textbackslash{}",
    "&": "\\&",
    "%": "\\%",
    "$": "\\$",
    "#": "\\#",
    "_": "\\_",
    "{": "\\{",
    "}": "\\}",
    "~": "\\textasciitilde{}",
    "^": "\\textasciicircum{}",
    "✓": "\\checkmark{}",
    "✗": "$\\times$",
    "±": "$\\pm$",
    "≥": "$\\geq$",
    "†": "\\dag{}",
    "`": "",
}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)


def write_table(table: ReportTable, folder: Path) -> list[Path]:
    """``<name>.md``, ``<name>.tex`` and ``<name>.csv`` under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{table.name}.{ext}" for ext in ("md", "tex", "csv")]
    paths[0].write_text(markdown(table), encoding="utf-8")
    paths[1].write_text(latex(table), encoding="utf-8")
    table.frame.to_csv(paths[2], index=False)
    return paths


def write_sources(table: ReportTable, folder: Path) -> Path | None:
    """``<name>.sources.csv``: which run each cell's number came from (None without sources)."""
    if not table.sources:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{table.name}.sources.csv"
    pd.DataFrame(table.sources).to_csv(path, index=False)
    return path


DPI = 150
MAX_PIXELS = 8e6  # a figure with many models' panels is drawn at a lower resolution, not slower


def write_figure(figure: object, name: str, folder: Path) -> list[Path]:
    """``<name>.png`` and ``<name>.pdf`` under ``folder``, cropped to the same tight box
    (laid out once: text layout is most of the cost of a large figure)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png", folder / f"{name}.pdf"]
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw_without_rendering()  # runs a constrained layout, so the box holds what is drawn
    box = figure.get_tightbbox(renderer).padded(0.1)
    dpi = min(DPI, math.sqrt(MAX_PIXELS / max(box.width * box.height, 1e-9)))
    for path in paths:
        figure.savefig(path, bbox_inches=box, dpi=dpi)
    return paths
