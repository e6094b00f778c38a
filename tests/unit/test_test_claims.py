"""Each test states what its evidence claims; the suites and tables that group tests by claim
follow from it, and the user's guides name every test and suite, or this fails saying what to
add where."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tabmem.api import compose_config
from tabmem.battery.base import CLAIMS, claiming, claiming_in_order, register, registry
from tabmem.jobs import test_plan as plan_of
from tabmem.suites import suite_members

ROOT = Path(__file__).resolve().parents[2]
SUITES = sorted(
    path.stem
    for path in (ROOT / "conf" / "test").glob("*.yaml")
    if suite_members(yaml.safe_load(path.read_text()))
)


def test_every_test_claims_one_thing():
    claimed = [name for claim in CLAIMS for name in claiming(claim)]
    assert sorted(claimed) == sorted(registry())
    with pytest.raises(ValueError, match="claims one of"):
        register("made-up", claims="nothing")


@pytest.mark.parametrize(
    ("suite", "claims"),
    [
        ("calibration_rows", ("rows_seen",)),
        ("lab_rows", ("rows_seen",)),
        ("calibration", ("rows_seen", "knowledge")),
    ],
)
def test_the_calibration_suites_run_every_test_of_their_claims(suite, claims):
    wanted = {name for claim in claims for name in claiming(claim)}
    runs = {name for name, _ in plan_of(compose_config([f"test={suite}"]).test)}
    missing = sorted(wanted - runs)
    assert not missing, f"conf/test/{suite}.yaml does not run {missing}, which claim {claims}"


def test_the_calibration_tables_list_every_test_of_their_claim():
    for claim in ("rows_seen", "knowledge"):
        assert sorted(claiming_in_order(claim)) == claiming(claim)


def test_the_claims_table_names_every_test():
    text = (ROOT / "docs" / "tests.md").read_text()
    table = text.split("## What each test claims", 1)[1].split("\n## ", 1)[0]
    unnamed = sorted(name for name in registry() if f"`{name}`" not in table)
    assert not unnamed, f"docs/tests.md's claims table does not name {unnamed}"


def test_the_readme_names_every_suite():
    assert {"memorization", "calibration", "lab_rows"} <= set(SUITES)
    readme = (ROOT / "README.md").read_text()
    unnamed = sorted(name for name in SUITES if f"`{name}`" not in readme)
    assert not unnamed, f"README.md's test= row does not name the suites {unnamed}"
