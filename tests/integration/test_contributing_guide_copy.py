"""docs/contributing.md followed in a temporary copy of the repository: a new test of rows
seen, written as two files (its module and its YAML) plus its docs, is refused until its docs
name it, joins the calibration suites by its claim, runs, and appears in the calibration table
and the paper tables' index without a change to ``report/``; a new backend and a new dataset,
added by the guide's steps, keep the checks green and run a cell."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_demo import copy_tree  # noqa: E402  (the files a fresh clone has)
from harness import run_python, run_tabmem  # noqa: E402

NEW = "existence_three"

TEST_MODULE = '''"""Existence with three versions of a record (written by following the guide)."""

from tabmem.battery.existence import Existence
from tabmem.battery.lifecycle import register_lifecycle


@register_lifecycle
class ExistenceThree(Existence):
    """The existence probe with one real record among two altered copies."""

    name = "existence_three"
    title = "existence, three versions"
'''


def fingerprints(tree: Path) -> dict[str, str]:
    """Each file of ``tree`` (bytecode left out) by its path, with a digest of its bytes."""
    return {
        str(path.relative_to(tree)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in tree.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def touched(before: dict[str, str], tree: Path) -> list[str]:
    """The files of ``tree`` added or changed since ``before``, its docs and tests aside."""
    after = fingerprints(tree)
    return sorted(
        path
        for path, digest in after.items()
        if before.get(path) != digest and not path.startswith(("docs/", "tests/"))
    )


def write_report(copy: Path, script: str, outputs: Path, out: Path) -> None:
    """A report script of the copy (calibration table, paper tables) on the store in ``outputs``."""
    done = run_python(
        script,
        "--tracking-uri",
        f"sqlite:///{outputs / 'mlflow.db'}",
        "--out",
        str(out),
        root=copy,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_test_added_by_the_guide_reaches_the_calibration_table(tmp_path):
    copy = tmp_path / "repo"
    copy_tree(copy)
    shipped = fingerprints(copy)
    # Step 1 and 2: the test's module and its config.
    (copy / "src" / "tabmem" / "battery" / f"{NEW}.py").write_text(TEST_MODULE)
    config = (copy / "conf" / "test" / "existence.yaml").read_text()
    config = config.replace("name: existence\n", f"name: {NEW}\n").replace(
        "n_options: 5 ", "n_options: 3 "
    )
    (copy / "conf" / "test" / f"{NEW}.yaml").write_text(config)
    checks = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_test_claims.py"]
    refused = run_python(*checks, root=copy, timeout=600)
    assert refused.returncode == 1, refused.stdout[-3000:]
    assert "1 failed" in refused.stdout, refused.stdout[-3000:]  # the suites run it already
    assert f"docs/tests.md's claims table does not name ['{NEW}']" in refused.stdout
    # Step 3 asks nothing of a test of rows seen: the calibration suites name the claim.
    plans = run_python(
        "-c",
        "from tabmem.api import compose_config; from tabmem.jobs import test_plan; "
        "[print(s, *(n for n, _ in test_plan(compose_config([f'test={s}']).test))) "
        "for s in ('calibration', 'calibration_rows', 'lab_rows')]",
        root=copy,
        timeout=600,
    )
    assert plans.returncode == 0, plans.stderr[-3000:]
    assert [NEW in line.split() for line in plans.stdout.splitlines()] == [True] * 3
    # Step 4: its name in the claims table of docs/tests.md.
    guide = copy / "docs" / "tests.md"
    guide.write_text(guide.read_text().replace("`existence`,", f"`existence`, `{NEW}`,", 1))
    # Issue 41's measure: the files a newcomer touched, docs and tests aside.
    assert touched(shipped, copy) == [
        f"conf/test/{NEW}.yaml",
        f"src/tabmem/battery/{NEW}.py",
    ]
    configs = "tests/unit/test_test_configs.py"
    accepted = run_python(
        *checks, configs, "tests/unit/test_contributing_guide.py", root=copy, timeout=600
    )
    assert accepted.returncode == 0, accepted.stdout[-3000:]
    # It runs as a cell and the calibration table lists it, report/ untouched.
    outputs = tmp_path / "outputs"
    cell = run_tabmem(
        outputs,
        "model=oracle-memorizer",
        "dataset=iris",
        f"test={NEW}",
        "experiment=calibrate",
        root=copy,
        timeout=600,
    )
    assert cell.returncode == 0, cell.stderr[-3000:]
    write_report(copy, "scripts/calibration_table.py", outputs, tmp_path / "cal")
    written = (tmp_path / "cal" / "calibration.md").read_text()
    assert f"| {NEW} |" in written
    # make paper-tables on the same store: its index lists the run through the calibration tables.
    write_report(copy, "scripts/paper_tables.py", outputs, tmp_path / "paper")
    used = (tmp_path / "paper" / "runs.csv").read_text().splitlines()
    new_runs = [line.split(",")[0] for line in used if f",{NEW}," in line]
    assert len(new_runs) == 1, used
    assert f"`{new_runs[0]}`" in (tmp_path / "paper" / "index.md").read_text()
    changed = subprocess.run(
        [
            "diff",
            "-r",
            "--exclude=__pycache__",  # the suite's own runs may compile these modules
            str(ROOT / "src" / "tabmem" / "report"),
            str(copy / "src" / "tabmem" / "report"),
        ],
        capture_output=True,
        text=True,
    )
    assert changed.returncode == 0, changed.stdout


BACKEND_MODULE = '''"""A backend that repeats the last line it was shown (the guide's example)."""

from tabmem.llm.base import BaseBackend, GenerationParams, Message


class RepeaterBackend(BaseBackend):
    """Answers every request with the last non-empty line of its prompt: a model that
    repeats what it read and never writes what follows."""

    def __init__(self, name: str) -> None:
        self.identity = {"provider": "repeater", "model": name}

    @classmethod
    def from_config(cls, cfg, ctx=None):
        return cls(str(cfg["name"]))

    def complete(self, prompt: str, params: GenerationParams) -> str:
        lines = [line for line in prompt.splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def chat(self, messages: list[Message], params: GenerationParams) -> str:
        return self.complete(messages[-1]["content"], params)
'''

MODEL_CONFIG = """# Repeats the last line of its prompt (the guide's example backend).
name: repeater
backend: repeater
prompt_form: completion
context_window: 100000
"""

DATASET_CONFIG = """name: orchard-plots
file: orchard-plots.csv
path: null
delimiter: ","
kind: tabular
description: "Invented orchard plots written by the guide-following test."
aliases: []
family: orchard-plots
target: organic
user_provided: false
how_to_get: null
transform_spec:
  task: "Predict whether a plot is farmed organically from its records."
  columns:
    - {name: plot, kind: categorical, description: "Plot"}
    - {name: trees, kind: numeric, description: "Trees"}
    - {name: yield_kg, kind: numeric, description: "Yield (kg)"}
    - {name: organic, kind: categorical, description: "Organic"}
"""


def orchard_csv(rows: int = 120, seed: int = 7) -> str:
    """A small invented file: plots, their trees, their yield and whether they are organic."""
    rng = random.Random(seed)
    lines = ["plot,trees,yield_kg,organic"]
    for i in range(rows):
        trees = rng.randint(20, 400)
        lines.append(f"P{i:03d},{trees},{trees * rng.uniform(8, 30):.1f},{rng.choice('yn')}")
    return "\n".join(lines) + "\n"


def test_a_backend_and_a_dataset_added_by_the_guide_run_a_cell(tmp_path):
    copy = tmp_path / "repo"
    copy_tree(copy)
    # A backend: its module, its row in BACKENDS, a model config and its row in the docs.
    (copy / "src" / "tabmem" / "llm" / "repeater_backend.py").write_text(BACKEND_MODULE)
    backends = copy / "src" / "tabmem" / "llm" / "backends.py"
    row = '    "repeater": BackendKind("tabmem.llm.repeater_backend:RepeaterBackend"),\n'
    text = backends.read_text()
    anchor = '    "python": BackendKind('
    assert anchor in text
    backends.write_text(text.replace(anchor, row + anchor, 1))
    (copy / "conf" / "model" / "repeater.yaml").write_text(MODEL_CONFIG)
    # A dataset: the file, its provenance entry (measured by --write), its config.
    (copy / "data" / "orchard-plots.csv").write_text(orchard_csv())
    provenance = copy / "data" / "provenance.json"
    listed = json.loads(provenance.read_text())
    listed["files"].append(
        {
            "dataset": "orchard-plots",
            "file": "orchard-plots.csv",
            "source": "written by tests/integration/test_contributing_guide_copy.py",
            "licence": "this project's own data, under the project's licence",
            "sha256": "",
            "rows": 0,
            "columns": 0,
        }
    )
    provenance.write_text(json.dumps(listed))
    (copy / "conf" / "dataset" / "orchard-plots.yaml").write_text(DATASET_CONFIG)
    stale = run_python("scripts/data_provenance.py", root=copy, timeout=600)
    assert stale.returncode == 1 and "orchard-plots.csv" in stale.stdout, stale.stdout
    written = run_python("scripts/data_provenance.py", "--write", root=copy, timeout=600)
    assert written.returncode == 0, written.stdout + written.stderr
    assert "orchard-plots" in (copy / "data" / "PROVENANCE.md").read_text()
    checks = run_python(
        "-m",
        "pytest",
        "-v",
        "-p",
        "no:cacheprovider",
        "tests/unit/test_data_registry.py",
        "tests/unit/test_data_provenance.py",
        "tests/unit/test_layout.py",
        "tests/unit/test_contributing_guide.py",
        root=copy,
        timeout=900,
    )
    assert checks.returncode == 0, checks.stdout[-3000:]
    assert "[orchard-plots]" in checks.stdout  # the registry tests took it from provenance.json
    # The new backend answers a cell on the new dataset: it repeats the last row shown,
    # never the next one, so row completion finds no evidence.
    outputs = tmp_path / "outputs"
    cell = run_tabmem(
        outputs,
        "model=repeater",
        "dataset=orchard-plots",
        "test=row_completion",
        "test.n_queries=10",
        root=copy,
        timeout=600,
    )
    assert cell.returncode == 0, cell.stderr[-3000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{outputs / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1
    tags = runs[0].data.tags
    assert (tags["model"], tags["dataset"], tags["verdict"]) == (
        "repeater",
        "orchard-plots",
        "no_evidence",
    )
    assert runs[0].data.metrics["n_queries"] == 10
