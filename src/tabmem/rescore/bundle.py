"""Check a bundle (``tabmem bundle``): every cell's recorded answers scored again, offline.

``tabmem rescore BUNDLE`` reads the bundle's manifest, checks that each data file here has the
sha256 the bundle recorded, rescores each cell's ``queries.json`` with the test settings, seed
and transform of its ``config.yaml`` (a run logged per cell, as any rescoring logs, in a fresh
store where none is), combines the rescored tests of rows seen into dataset verdicts again, and
sets every verdict beside the recorded one. Cells of tests that cannot score recorded answers
are counted, not rescored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabmem.errors import ConfigError, DatasetError, TabmemError
from tabmem.report.bundle import (
    BundleCell,
    BundleDatasetVerdict,
    Manifest,
    data_file,
    file_sha256,
    package_versions,
)
from tabmem.rescore.run import recorded_config, recorded_settings, run_rescore


@dataclass(frozen=True)
class CellCheck:
    """One cell of the bundle: its rescored verdict, or why it was not rescored (``skipped``:
    a test that cannot score recorded answers) or could not be (``error``)."""

    cell: BundleCell
    verdict: str | None
    p_value: float | None = None
    run_id: str = ""
    skipped: str = ""
    error: str = ""

    @property
    def differs(self) -> bool:
        return bool(self.error) or (self.verdict is not None and self.verdict != self.cell.verdict)


@dataclass(frozen=True)
class DataCheck:
    """A data file the bundle names: its sha256 in the bundle and here."""

    dataset: str
    file: str
    recorded: str
    found: str


@dataclass
class BundleCheck:
    """What the check found: each cell, each dataset verdict, each data file, and the package
    versions that differ from the bundle's (name: bundle's, here)."""

    manifest: Manifest
    cells: list[CellCheck]
    datasets: list[tuple[BundleDatasetVerdict, str | None]] = field(default_factory=list)
    data: list[DataCheck] = field(default_factory=list)
    versions: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def reproduces(self) -> bool:
        """Every rescored verdict and every data file as the bundle recorded them."""
        return (
            not any(c.differs for c in self.cells)
            and all(found in (None, d.verdict) for d, found in self.datasets)
            and all(d.found == d.recorded for d in self.data)
        )

    def said(self) -> str:
        """The check in a few lines: data files, then cells, then dataset verdicts."""
        lines = []
        for d in self.data:
            if d.found == d.recorded:
                lines.append(f"Data: {d.file} has the bundle's sha256.")
            else:
                lines.append(
                    f"Data: {d.file} differs from the bundle's file (sha256 {d.found[:12]}… "
                    f"here, {d.recorded[:12]}… in the bundle)."
                )
        rescored = [c for c in self.cells if not c.skipped]
        agree = sum(not c.differs for c in rescored)
        lines.append(f"{agree} of {len(rescored)} cells reproduce the recorded verdict.")
        lines += [
            f"  differs: {c.cell.name}: recorded {c.cell.verdict}, "
            + (f"rescored {c.verdict}" if c.verdict else f"not rescored: {c.error}")
            for c in rescored
            if c.differs
        ]
        skipped = Counter(c.skipped for c in self.cells if c.skipped)
        if skipped:
            said = "; ".join(f"{n} × {why}" for why, n in skipped.items())
            lines.append(f"{skipped.total()} cells not rescored: {said}.")
        compared = [(d, found) for d, found in self.datasets if found is not None]
        if self.datasets:
            same = sum(found == d.verdict for d, found in compared)
            lines.append(
                f"{same} of {len(compared)} dataset verdicts reproduce the recorded verdict"
                + (
                    f" ({len(self.datasets) - len(compared)} not recomputed: some of their "
                    "tests were not rescored)."
                    if len(compared) < len(self.datasets)
                    else "."
                )
            )
            lines += [
                f"  differs: {d.name}: recorded {d.verdict}, rescored {found}"
                for d, found in compared
                if found != d.verdict
            ]
        if self.versions:
            shown = ", ".join(
                f"{n} {here} (bundle: {was})" for n, (was, here) in self.versions.items()
            )
            lines.append(f"Package versions here that differ from the bundle's: {shown}.")
        return "\n".join(lines)


def check_bundle(
    folder: Path,
    *,
    experiment: str = "rescore",
    outputs_dir: Path = Path("outputs"),
    data_paths: Mapping[str, Path] | None = None,
) -> BundleCheck:
    """Check the bundle in ``folder``: its data files' sha256 here, each cell's answers
    rescored (logged as runs of ``experiment`` under ``outputs_dir``), its dataset verdicts
    recombined. ``data_paths`` gives the file of a dataset by name where the bundle's path is
    not one here (a user's file)."""
    manifest = Manifest.read(folder)
    paths = dict(data_paths or {})
    configs = {}
    for cell in manifest.cells:
        configs[cell.run_id] = recorded_config(folder / cell.folder / "queries.json")
        if not configs[cell.run_id]:
            raise ConfigError(f"{folder / cell.folder} has no config.yaml: the bundle is damaged.")
    data = []
    for name, recorded in manifest.data.items():
        config = next(configs[c.run_id] for c in manifest.cells if c.dataset == name)
        try:
            path = data_file(config["config"]["dataset"], paths.get(name))
        except DatasetError as exc:
            raise DatasetError(f"{str(exc).rstrip('.')} (here: --data {name}=PATH).") from exc
        data.append(DataCheck(name, recorded.file, recorded.sha256, file_sha256(path)))
    cells = [
        _check_cell(folder, cell, configs[cell.run_id], experiment, outputs_dir, paths)
        for cell in manifest.cells
    ]
    here = package_versions()
    versions = {n: (v, here.get(n, "not installed")) for n, v in manifest.packages.items()}
    return BundleCheck(
        manifest,
        cells,
        _dataset_checks(manifest, cells, configs),
        data,
        {n: pair for n, pair in versions.items() if pair[0] != pair[1]},
    )


def _check_cell(
    folder: Path,
    cell: BundleCell,
    beside: dict[str, Any],
    experiment: str,
    outputs_dir: Path,
    paths: Mapping[str, Path],
) -> CellCheck:
    """One cell's answers rescored with its recorded settings; a cell without answers or of a
    test that cannot score recorded ones is not rescored, and an error is said, not raised."""
    from tabmem.battery.lifecycle import rescorable_test

    queries = folder / cell.folder / "queries.json"
    if not queries.is_file():
        return CellCheck(cell, None, skipped="its run recorded no answers")
    try:
        rescorable_test(cell.test)
    except ConfigError:
        return CellCheck(cell, None, skipped=f"{cell.test} cannot score recorded answers yet")
    recorded_path = beside.get("data_path")
    path = paths.get(cell.dataset) or (Path(recorded_path) if recorded_path else None)
    try:
        done = run_rescore(
            queries,
            str(path) if beside["dataset_name"] else str(beside["--dataset"]),
            cell.test,
            cell.model,
            layout="queries",
            transform=str(beside.get("transform") or "original"),
            seed=int(beside.get("seed") or 0),
            experiment=experiment,
            outputs_dir=outputs_dir,
            settings=recorded_settings(beside, cell.test),
            data_path=path,
            dataset_name=beside["dataset_name"],
            quiet=True,
        )
    except TabmemError as exc:
        return CellCheck(cell, None, error=str(exc))
    result = done.result
    return CellCheck(cell, result.verdict.value, result.p_value, done.run_id or "")


def _dataset_checks(
    manifest: Manifest, cells: list[CellCheck], configs: Mapping[str, dict[str, Any]]
) -> list[tuple[BundleDatasetVerdict, str | None]]:
    """Each recorded dataset verdict beside the one its runs, rescored, combine into under the
    rule of the grid's config (None where one of them was not rescored)."""
    if not manifest.dataset_verdicts:
        return []
    from tabmem.report.dataset_verdicts import combine_outcomes, rule_of
    from tabmem.results import CellResult

    rescored = {c.cell.run_id: c for c in cells if c.verdict is not None}
    rule = rule_of(next(iter(configs.values())).get("config"))
    found = []
    for d in manifest.dataset_verdicts:
        members = [rescored.get(run_id) for run_id in d.tests.values()]
        outcomes = [
            CellResult(
                model=d.model,
                dataset=d.dataset,
                test=c.cell.test,
                transform=d.transform,
                status="finished",
                verdict=str(c.verdict),
                run_id=c.run_id,
                p_value=c.p_value,
                seed=d.seed,
            )
            for c in members
            if c is not None
        ]
        combined = combine_outcomes(outcomes, rule) if len(outcomes) == len(members) else []
        found.append((d, combined[0][1].verdict.value if combined else None))
    return found
