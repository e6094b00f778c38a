"""Each test states what its evidence claims; the grids and tables that group tests by claim
follow from it, or this fails saying what to add where."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tabmem.battery.base import CLAIMS, claiming, register, registry
from tabmem.report.calibration import claiming_in_order

ROOT = Path(__file__).resolve().parents[2]


def _suite(name: str) -> set[str]:
    return set(yaml.safe_load((ROOT / "conf" / "test" / f"{name}.yaml").read_text())["suite"])


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
    missing = sorted(wanted - _suite(suite))
    assert not missing, f"conf/test/{suite}.yaml does not run {missing}, which claim {claims}"


def test_the_calibration_tables_list_every_test_of_their_claim():
    for claim in ("rows_seen", "knowledge"):
        assert sorted(claiming_in_order(claim)) == claiming(claim)


def test_the_readme_names_every_test():
    readme = (ROOT / "README.md").read_text()
    unnamed = sorted(name for name in registry() if f"`{name}`" not in readme)
    assert not unnamed, f"README.md's test= row does not name {unnamed}"
