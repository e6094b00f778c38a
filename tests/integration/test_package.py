"""tabmem as a package: the wheel carries the configs and the shipped datasets, and the
``tabmem`` command works from any folder with them, writing into that folder's ``outputs/``.

The default tests build the wheel offline (this environment's setuptools) and run its code and
data, unpacked and first on the path, from an empty folder; the slow test installs the wheel
into a fresh virtual environment from the package index, as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_demo import copy_tree  # noqa: E402  (the files a fresh clone has)

ENV = {
    **os.environ,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
}
ENV.pop("MLFLOW_TRACKING_URI", None)
CELL = ("model=oracle-memorizer", "dataset=iris", "test=header")
QUIET = ("progress=false", "show_queries=false")


def _build_wheel(folder: Path, *pip_options: str) -> Path:
    checkout = folder / "checkout"
    copy_tree(checkout)  # the files a clone has: no build/ of the repository's
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", *pip_options, str(checkout)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = folder.glob("tabmem-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("wheel"), "--no-build-isolation")


@pytest.fixture(scope="module")
def unpacked(wheel: Path) -> Path:
    folder = wheel.parent / "unpacked"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(folder)
    return folder


def _tabmem(code: Path, cwd: Path, *arguments: str) -> subprocess.CompletedProcess:
    """``tabmem ARGUMENTS`` in ``cwd`` with the package at ``code`` first on the path."""
    return subprocess.run(
        [sys.executable, "-m", "tabmem.cli", *arguments],
        cwd=cwd,
        env={**ENV, "PYTHONPATH": str(code)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_wheel_carries_every_config_and_shipped_dataset(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = {f"tabmem/conf/{p.relative_to(ROOT / 'conf')}" for p in (ROOT / "conf").rglob("*")}
    configs = {name for name in configs if not name.endswith("/") and "." in name}
    assert "tabmem/conf/config.yaml" in configs
    assert configs <= names, sorted(configs - names)
    provenance = json.loads((ROOT / "data" / "provenance.json").read_text())
    shipped = {f"tabmem/datasets/{entry['file']}" for entry in provenance["files"]}
    assert len(shipped) >= 10
    assert shipped | {"tabmem/datasets/provenance.json"} <= names
    assert {"tabmem/main.py", "tabmem/cli.py", "tabmem/conf/__init__.py"} <= names  # pkg://


def test_every_command_names_itself_from_another_folder(unpacked: Path, tmp_path: Path):
    where = _tabmem(unpacked, tmp_path, "run", "--cfg", "job")
    assert where.returncode == 0, where.stderr[-3000:]
    assert "outputs_dir: outputs" in where.stdout
    helped = _tabmem(unpacked, tmp_path, "run", "--help")
    assert helped.returncode == 0, helped.stderr[-3000:]
    assert "== Config groups" in helped.stdout and "oracle-memorizer" in helped.stdout
    for command in ("rescore", "tables", "calibration", "lab"):
        done = _tabmem(unpacked, tmp_path, command, "--help")
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.startswith(f"usage: tabmem {command} "), done.stdout[:200]
    assert list(tmp_path.iterdir()) == []


def test_a_users_own_configs_join_the_shipped_ones(unpacked: Path, tmp_path: Path):
    own = tmp_path / "own"
    (own / "model").mkdir(parents=True)
    (own / "model" / "my-oracle.yaml").write_text("name: my-oracle\nbackend: oracle\n")
    composed = _tabmem(
        unpacked, tmp_path, "run", "--config-dir", str(own), "model=my-oracle", "--cfg", "job"
    )
    assert composed.returncode == 0, composed.stderr[-3000:]
    assert "name: my-oracle" in composed.stdout and "name: iris" in composed.stdout


def test_a_cell_run_from_the_wheel_writes_into_the_current_folder(unpacked: Path, tmp_path: Path):
    found = _tabmem(unpacked, tmp_path, "run", *CELL, *QUIET)
    assert found.returncode == 0, found.stderr[-3000:]
    assert "evidence" in found.stdout
    assert (tmp_path / "outputs" / "mlflow.db").is_file()
    located = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tabmem.paths import conf_dir, data_dir; print(conf_dir()); print(data_dir())",
        ],
        cwd=tmp_path,
        env={**ENV, "PYTHONPATH": str(unpacked)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert located.stdout.split() == [
        str(unpacked / "tabmem" / "conf"),
        str(unpacked / "tabmem" / "datasets"),
    ]
    tables = _tabmem(unpacked, tmp_path, "tables")
    assert tables.returncode == 0, tables.stderr[-3000:]
    assert (tmp_path / "outputs" / "paper" / "index.md").is_file()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_wheel_installed_into_a_fresh_venv_runs_the_readme_commands(tmp_path: Path):
    """Needs the package index (the wheel's build backend and dependencies come from it)."""
    wheel = _build_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    folder = tmp_path / "empty"
    folder.mkdir()
    command = str(venv / "bin" / "tabmem")
    cell = subprocess.run(
        [command, "run", *CELL, *QUIET], cwd=folder, env=ENV, capture_output=True, text=True
    )
    assert cell.returncode == 0, cell.stderr[-3000:]
    assert "evidence" in cell.stdout
    tables = subprocess.run(
        [command, "tables"], cwd=folder, env=ENV, capture_output=True, text=True
    )
    assert tables.returncode == 0, tables.stderr[-3000:]
    assert (folder / "outputs" / "paper" / "index.md").is_file()
    for name in ("lab", "calibration"):
        helped = subprocess.run([command, name, "--help"], env=ENV, capture_output=True, text=True)
        assert helped.stdout.startswith(f"usage: tabmem {name} "), helped.stderr[-3000:]
