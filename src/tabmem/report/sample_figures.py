"""Figures of the sampling tests: samples beside the data (scatter), and correlation heat maps.

The samples and the correlations come from the runs' artifacts (``samples.json``,
``correlation_pairs.json``). The scatter plots' data panel is the dataset's own file, read
through the dataset registry (with the run's ``dataset.path`` for user-provided files): the
store holds the samples, not the data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from tabmem.report.paper_runs import TEMPERATURE, PaperRuns
from tabmem.report.writers import ReportFigure

PREFERRED_PAIRS = (("longitude", "latitude"),)
"""Feature pairs drawn when a dataset has them; otherwise its most correlated numeric pair."""


def real_data(runs: PaperRuns, run: pd.Series) -> pd.DataFrame | None:
    """The dataset of a run as a DataFrame, or None when its file cannot be read here."""
    from tabmem.data import dataset_specs, load_dataset
    from tabmem.errors import TabmemError

    spec = dataset_specs().get(str(run["dataset"]))
    if spec is None:
        return None
    path = run.get("param.dataset.path")
    if isinstance(path, str) and path not in ("", "None"):
        from dataclasses import replace

        spec = replace(spec, path=path)
    try:
        return load_dataset(spec).frame
    except TabmemError:
        return None


def numeric(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns of ``frame`` whose values are numbers (others dropped), as floats."""
    values = frame.apply(pd.to_numeric, errors="coerce")
    return values.loc[:, values.notna().mean() >= 0.9]


def feature_pair(data: pd.DataFrame) -> tuple[str, str] | None:
    """The pair to draw: a preferred one if present, else the most correlated numeric pair."""
    columns = list(numeric(data).columns)
    for x, y in PREFERRED_PAIRS:
        if x in columns and y in columns:
            return x, y
    if len(columns) < 2:
        return None
    corr = numeric(data).corr().abs().to_numpy(copy=True)
    np.fill_diagonal(corr, -1.0)
    i, j = np.unravel_index(np.nanargmax(corr), corr.shape)
    return columns[min(i, j)], columns[max(i, j)]


def _sample_runs(runs: PaperRuns) -> dict[str, list[pd.Series]]:
    """Sampling runs of the shown models, by dataset."""
    found = runs.runs_of("sample")
    found = found[found["model"].isin(runs.models) & (found["transform"] == "original")]
    by_dataset: dict[str, list[pd.Series]] = {}
    for dataset in runs.datasets:
        rows = found[found["dataset"] == dataset]
        if not rows.empty:
            by_dataset[dataset] = [r for _, r in rows.iterrows()]
    return by_dataset


def scatter_figures(runs: PaperRuns) -> list[ReportFigure]:
    """One figure per dataset with samples: the data, then each model's samples per temperature."""
    figures = []
    for dataset, found in _sample_runs(runs).items():
        data = real_data(runs, found[0])
        figure = _scatter(runs, dataset, found, data) if data is not None else None
        if figure is not None:
            figures.append(figure)
    return figures or [_placeholder("samples_scatter", "Samples beside the data", "sample")]


def _temperature(run: pd.Series) -> float:
    value = pd.to_numeric(run.get(TEMPERATURE), errors="coerce")
    return float(value) if pd.notna(value) else float("nan")


def _scatter(
    runs: PaperRuns, dataset: str, found: list[pd.Series], data: pd.DataFrame
) -> ReportFigure | None:
    pair = feature_pair(data)
    if pair is None:
        return None
    x, y = pair
    models = [m for m in runs.models if any(r["model"] == m for r in found)]
    known = {_temperature(r) for r in found}
    temperatures = sorted(t for t in known if not np.isnan(t))  # NaN != NaN: one column for all
    temperatures += [float("nan")] * any(np.isnan(t) for t in known)
    fig = Figure(figsize=(3.2 * (1 + len(temperatures)), 3.0 * len(models)))
    axes = fig.subplots(len(models), 1 + len(temperatures), squeeze=False)
    real = numeric(data)[[x, y]].dropna()
    run_ids = []
    _points(axes[0][0], real, x, y, f"data\n{len(real)} rows", "grey")
    for axis in axes[1:, 0]:
        axis.axis("off")
    for axis_row, model in zip(axes, models, strict=True):
        for axis, temperature in zip(axis_row[1:], temperatures, strict=True):
            run = next((r for r in found if r["model"] == model and _same(r, temperature)), None)
            title = f"{model}\ntemperature {temperature:g}"
            samples = _samples(runs, run, x, y) if run is not None else None
            if samples is None:
                axis.set_title(title, fontsize="small")
                axis.text(0.5, 0.5, "no run", transform=axis.transAxes, ha="center")
                continue
            run_ids.append(str(run["run_id"]))
            _points(axis, samples, x, y, f"{title}, {len(samples)} samples", "tab:blue")
    for axis in axes.flat:  # the data's range, whatever the samples say (limits set, not shared:
        axis.set_xlim(*_padded(real[x]))  # matplotlib's shared axes cost O(panels²) per draw)
        axis.set_ylim(*_padded(real[y]))
        axis.xaxis.set_major_locator(MaxNLocator(4))
        axis.label_outer()
    axes[0][0].tick_params(labelbottom=True, labelleft=True)
    axes[0][0].set_xlabel(x, visible=True)
    fig.subplots_adjust(wspace=0.1, hspace=0.45)
    return ReportFigure(
        name=f"samples_scatter_{dataset}",
        title=f"{dataset}: zero-knowledge samples beside the data ({x}, {y})",
        figure=fig,
        caption=(
            f"Top left: every row of the {dataset} file. Then one row per model: its complete "
            f"samples whose {x} and {y} are numbers, at each sampling temperature it was run "
            "at (same axes as the data)."
        ),
        run_ids=run_ids,
    )


def _padded(values: pd.Series) -> tuple[float, float]:
    low, high = float(values.min()), float(values.max())
    margin = 0.05 * (high - low) or 0.5
    return low - margin, high + margin


def _same(run: pd.Series, temperature: float) -> bool:
    value = _temperature(run)
    return value == temperature or (np.isnan(value) and np.isnan(temperature))


def _samples(runs: PaperRuns, run: pd.Series, x: str, y: str) -> pd.DataFrame | None:
    table = runs.artifact_table(str(run["run_id"]), "samples.json")
    if table is None or x not in table or y not in table:
        return None
    if "complete" in table:
        table = table[table["complete"].astype(bool)]
    return table[[x, y]].apply(pd.to_numeric, errors="coerce").dropna()


RASTERIZE_POINTS = 2000  # larger scatters are drawn as an image in the PDF; each such panel
# costs a figure-sized bitmap, so small ones (most sample panels) stay vector


def _points(axis, frame: pd.DataFrame, x: str, y: str, title: str, colour: str) -> None:
    many = len(frame) > RASTERIZE_POINTS
    axis.scatter(frame[x], frame[y], s=4, alpha=0.5, color=colour, linewidths=0, rasterized=many)
    axis.set_xlabel(x)
    axis.set_ylabel(y)
    axis.set_title(title, fontsize="small")


def heat_map_figures(runs: PaperRuns) -> list[ReportFigure]:
    """One figure per dataset: the data's Pearson correlations, then each model's samples'."""
    found = runs.runs_of("conditional_distribution")
    found = found[found["model"].isin(runs.models) & (found["transform"] == "original")]
    figures = []
    for dataset in runs.datasets:
        pairs = {}
        for _, run in found[found["dataset"] == dataset].iterrows():
            table = runs.artifact_table(str(run["run_id"]), "correlation_pairs.json")
            if table is not None and not table.empty:
                pairs[str(run["model"])] = (table, str(run["run_id"]))
        if pairs:
            figures.append(_heat_maps(runs, dataset, pairs))
    return figures or [
        _placeholder("correlations", "Correlation heat maps", "conditional_distribution")
    ]


def correlation_matrix(pairs: pd.DataFrame, column: str) -> pd.DataFrame:
    """A symmetric correlation matrix (ones on the diagonal) from one column of pair rows."""
    names = list(dict.fromkeys([*pairs["feature_a"], *pairs["feature_b"]]))
    position = {name: i for i, name in enumerate(names)}
    a = pairs["feature_a"].map(position).to_numpy()
    b = pairs["feature_b"].map(position).to_numpy()
    values = pairs[column].to_numpy(dtype=float)
    matrix = np.eye(len(names))
    matrix[a, b] = values
    matrix[b, a] = values
    return pd.DataFrame(matrix, index=names, columns=names)


def _heat_maps(
    runs: PaperRuns, dataset: str, pairs: dict[str, tuple[pd.DataFrame, str]]
) -> ReportFigure:
    models = [m for m in runs.models if m in pairs]
    first = pairs[models[0]][0]
    panels = [("data", correlation_matrix(first, "data_r"))]
    panels += [(f"{m} samples", correlation_matrix(pairs[m][0], "sample_r")) for m in models]
    size = max(3.0, 0.45 * len(panels[0][1]) + 1.5)
    fig = Figure(figsize=(size * len(panels) + 1, size))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    image = None
    for number, (axis, (title, matrix)) in enumerate(zip(axes, panels, strict=True)):
        image = axis.imshow(matrix.to_numpy(dtype=float), cmap="RdBu_r", vmin=-1, vmax=1)
        ticks = range(len(matrix))
        first = number == 0
        axis.set_xticks(ticks, matrix.columns if first else [], rotation=90, fontsize="x-small")
        axis.set_yticks(ticks, matrix.index if first else [], fontsize="x-small")
        axis.set_title(title, fontsize="small")
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="Pearson r")
    return ReportFigure(
        name=f"correlations_{dataset}",
        title=f"{dataset}: Pearson correlations of the data and of each model's samples",
        figure=fig,
        caption=(
            "From each conditional-distribution run's correlation_pairs.json: the data's "
            "correlations between numeric features (left, labelled) and those of each model's "
            "samples, features in the same order. White cells: a correlation the samples do "
            "not define."
        ),
        run_ids=[pairs[m][1] for m in models],
    )


def _placeholder(name: str, title: str, test: str) -> ReportFigure:
    """A figure that says no run could fill it, and which command would."""
    fig = Figure(figsize=(6, 2))
    axis = fig.subplots()
    axis.axis("off")
    command = f"tabmem run +grid=paper model=<model>  (or test={test})"
    axis.text(0.5, 0.5, f"no run yet\n{command}", ha="center", va="center")
    return ReportFigure(
        name=name, title=title, figure=fig, caption=f"No run yet. Fill with: {command}"
    )
