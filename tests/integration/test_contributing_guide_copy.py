"""docs/contributing.md followed in a temporary copy of the repository: a new test, written as
two files, is refused until the guide's steps are done, then runs and appears in the
calibration table without a change to ``report/``."""

from __future__ import annotations

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


def add_to_suite(path: Path, after: str) -> None:
    """Step 3 of the guide: the test joins a suite (its ``defaults`` and its ``suite`` list)."""
    text = path.read_text()
    text = text.replace(
        f"  - /test/{after}@{after}\n", f"  - /test/{after}@{after}\n  - /test/{NEW}@{NEW}\n"
    )
    text = text.replace(f" {after},", f" {after}, {NEW},", 1)
    path.write_text(text)


def test_a_test_added_by_the_guide_reaches_the_calibration_table(tmp_path):
    copy = tmp_path / "repo"
    copy_tree(copy)
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
    assert f"conf/test/calibration_rows.yaml does not run ['{NEW}']" in refused.stdout
    assert f"README.md's test= row does not name ['{NEW}']" in refused.stdout
    # Step 3: the calibration suites run it; README's test= row names it.
    for suite in ("calibration", "calibration_rows", "lab_rows"):
        add_to_suite(copy / "conf" / "test" / f"{suite}.yaml", after="existence")
    readme = copy / "README.md"
    readme.write_text(readme.read_text().replace("`existence`,", f"`existence`, `{NEW}`,", 1))
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
    table = run_python(
        "scripts/calibration_table.py",
        "--tracking-uri",
        f"sqlite:///{outputs / 'mlflow.db'}",
        "--out",
        str(tmp_path / "cal"),
        root=copy,
        timeout=600,
    )
    assert table.returncode == 0, table.stderr[-3000:]
    written = (tmp_path / "cal" / "calibration.md").read_text()
    assert f"| {NEW} |" in written
    changed = subprocess.run(
        [
            "diff",
            "-r",
            str(ROOT / "src" / "tabmem" / "report"),
            str(copy / "src" / "tabmem" / "report"),
        ],
        capture_output=True,
        text=True,
    )
    assert changed.returncode == 0, changed.stdout
