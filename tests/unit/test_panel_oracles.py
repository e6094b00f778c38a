"""The adversary panel: data-only reference models of families no baseline uses, at a spread,
cross-fitted, and none of them given a finding by the sample test on iris."""

from __future__ import annotations

import re

import pytest
from test_copula_learner import columns, ledger_text, question

from tabmem.data import Dataset, dataset_specs, load_dataset
from tabmem.llm.oracle import ORACLES
from tabmem.llm.oracle.catalog import PANEL, at_spread, split_spread, spread_oracle
from tabmem.llm.oracle.panel import BoostedOracle, MixtureOracle, MomentsOracle, PanelOracle
from tabmem.llm.oracle.server import OracleServer

FAMILIES = (MomentsOracle, MixtureOracle, BoostedOracle)


@pytest.fixture
def ledger(csv_dataset) -> Dataset:
    return csv_dataset(ledger_text())


@pytest.fixture(scope="module")
def iris() -> Dataset:
    spec = dataset_specs().get("iris")
    if spec is None:
        pytest.skip("no iris config")
    return load_dataset(spec)


def observation(oracle: PanelOracle, dataset: Dataset, seed: int) -> dict[str, str]:
    text = oracle.generate(
        f"Dataset: {dataset.name}\nColumns: {', '.join(dataset.feature_names)}\nRecord:",
        200,
        [],
        seed,
        0.7,
        chat=True,
    )
    return dict(pair.split(" = ", 1) for pair in re.split(r", (?=\w+ = )", text))


def test_the_families_are_served_by_name_and_spread() -> None:
    assert set(PANEL) == {"oracle-moments", "oracle-mixture", "oracle-boosted"}
    assert all(ORACLES[cls.model_name] is cls for cls in FAMILIES)
    assert at_spread("oracle-moments", 0.25) == "oracle-moments-t0.25"
    assert at_spread("oracle-moments", 1.0) == at_spread("oracle-moments", None) == "oracle-moments"
    assert split_spread("oracle-boosted-t0") == ("oracle-boosted", 0.0)
    assert split_spread("oracle-learner") == ("oracle-learner", None)
    with pytest.raises(ValueError, match="takes no spread"):
        at_spread("oracle-learner", 0.5)
    oracle = spread_oracle("oracle-mixture-t0.5", [])
    assert isinstance(oracle, MixtureOracle) and oracle.spread == 0.5
    assert OracleServer([]).oracle("oracle-moments-t0") is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_every_prompt_kind_gets_an_answer_in_the_files_values(family, ledger: Dataset) -> None:
    oracle = family([ledger], spread=0.25)
    names = ledger.feature_names
    values = {
        n: {f.strip().strip('"') for f in c} for n, c in zip(names, columns(ledger), strict=True)
    }
    for row in (5, 150):
        for asked in ("tree", "size", "group"):
            answer = oracle.generate(question(ledger, row, asked), 8, [], 0, chat=True)
            assert answer in values[asked]
    options = "group = [hidden], tree = pine\nA) group = alpha\nB) group = beta\nC) group = gamma"
    assert oracle.generate(options, 4, [], 0, chat=True) in {"A", "B", "C"}
    pairs = observation(oracle, ledger, 3)
    assert list(pairs) == names
    assert all(v in values[n] for n, v in pairs.items() if n != "note")
    rows = oracle.generate(ledger.prefix_text(10), 120, [], 0).split("\n")
    assert len(rows[0].split(",")) >= len(names)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_value_only_the_asked_rows_hold_is_never_written(family, ledger: Dataset) -> None:
    """Every row's code is unique: the asked row's own code can only come from the asked row."""
    oracle = family([ledger], spread=1.0)
    code = ledger.feature_names.index("code")
    for row in (4, 40, 200):
        own = ledger.rows[row].split(",")[code]
        for seed in range(3):
            answer = oracle.generate(question(ledger, row, "code"), 8, [], seed, 0.7, chat=True)
            assert answer and answer != own


def test_the_class_moment_sampler_at_zero_spread_writes_each_class_middle(iris: Dataset) -> None:
    oracle = MomentsOracle([iris], spread=0.0)
    records = {tuple(observation(oracle, iris, seed).values()) for seed in range(30)}
    # one record per class: its means, each at the nearest value of its column
    assert len(records) == 3
    assert {r[-1] for r in records} == {"Iris-setosa", "Iris-versicolor", "Iris-virginica"}
    real = {tuple(f.strip() for f in row.split(",")) for row in iris.rows}
    assert any(r in real for r in records)  # setosa's middle is a real row


def test_a_sharper_spread_writes_fewer_distinct_records(iris: Dataset) -> None:
    sharp, wide = MomentsOracle([iris], spread=0.25), MomentsOracle([iris], spread=1.0)
    distinct = [
        len({tuple(observation(o, iris, seed).values()) for seed in range(40)})
        for o in (sharp, wide)
    ]
    assert distinct[0] < distinct[1]
