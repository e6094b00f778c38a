"""The bundle's manifest: package versions as installed, data files by their sha256 as
data/provenance.json records them, a round trip through bundle.json, one sentence for a folder
that is not a bundle."""

from __future__ import annotations

import hashlib
from importlib import metadata

import pytest

from tabmem.data import dataset_specs
from tabmem.data.provenance import load_provenance
from tabmem.errors import ConfigError
from tabmem.paths import data_dir
from tabmem.report.bundle import (
    MANIFEST,
    BundleCell,
    BundleDatasetVerdict,
    DataFile,
    Manifest,
    data_file,
    file_sha256,
    package_versions,
    verdict_table,
)


def manifest() -> Manifest:
    return Manifest(
        experiment="grid",
        created="2026-01-01T00:00:00+00:00",
        python="3.11.7",
        packages={"tabmem": "0.1.0"},
        data={"iris": DataFile("iris.csv", "ab" * 32)},
        cells=[
            BundleCell(
                "cells/r1", "r1", "m", "iris", "header", "original", 3, "evidence", 1e-7, 4, 4
            ),
            BundleCell("cells/r2", "r2", "m", "iris", "sample", "original", 3, "not_applicable"),
        ],
        dataset_verdicts=[
            BundleDatasetVerdict(
                "m", "iris", "original", 3, "evidence", 2e-7, {"header": "r1"}, "r3"
            )
        ],
    )


def test_package_versions_are_tabmem_and_its_requirements_as_installed():
    versions = package_versions()
    assert versions["tabmem"] == metadata.version("tabmem")
    for name in ("mlflow", "pandas", "hydra-core", "scipy"):
        assert versions[name] == metadata.version(name)
    assert "pytest" not in versions  # an extra's requirement is not the package's own


def test_a_data_file_is_its_configs_file_with_the_provenance_sha256(tmp_path):
    iris = data_file({"name": "iris", "file": "iris.csv", "path": None})
    assert iris == data_dir() / "iris.csv"
    assert file_sha256(iris) == load_provenance().by_file()["iris.csv"].sha256
    assert dataset_specs()["iris"].file == "iris.csv"
    own = tmp_path / "own.csv"
    own.write_text("a,b\n1,2\n")
    assert data_file({"name": "iris", "file": "iris.csv", "path": None}, own) == own
    assert file_sha256(own) == hashlib.sha256(b"a,b\n1,2\n").hexdigest()


def test_the_manifest_reads_back_as_written(tmp_path):
    written = manifest()
    (tmp_path / MANIFEST).write_text(written.to_json())
    assert Manifest.read(tmp_path) == written


def test_a_folder_without_a_manifest_or_with_another_file_is_one_sentence(tmp_path):
    with pytest.raises(ConfigError, match=r"is not a bundle: it has no bundle\.json"):
        Manifest.read(tmp_path)
    (tmp_path / MANIFEST).write_text('{"format": "something-else/1"}')
    with pytest.raises(ConfigError, match="is not a tabmem bundle's manifest"):
        Manifest.read(tmp_path)


def test_the_verdict_table_has_one_line_per_cell_and_dataset_verdict():
    table = verdict_table(manifest())
    assert "| m | iris | original | header | 3 | evidence | 1e-07 | 4/4 | cells/r1 |" in table
    assert "| m | iris | original | sample | 3 | not_applicable |  |  | cells/r2 |" in table
    assert "| m | iris | original | 3 | evidence | 2e-07 | header |" in table
    assert f"| iris | iris.csv | `{'ab' * 32}` |" in table
