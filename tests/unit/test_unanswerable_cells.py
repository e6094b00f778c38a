"""Cells whose verdict could not have been otherwise say ``not_applicable`` and why: a reference
model asked about a file it never knew, a test that needs two columns on a file of one."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tabmem.battery.base import TestContext, run_test
from tabmem.battery.lifecycle import Lifecycle
from tabmem.data import Dataset, DatasetSpec, dataset_specs, load_dataset
from tabmem.data.transforms import apply_transform
from tabmem.llm.client import LanguageModel
from tabmem.llm.oracle.backend import OracleBackend
from tabmem.paths import conf_dir
from tabmem.results import TestResult, Verdict

USER_TEXT = "id,height\n" + "".join(f"{i},{150 + i * 7 % 40}\n" for i in range(40))


def _user_file(tmp_path: Path, text: str = USER_TEXT) -> Dataset:
    path = tmp_path / "mine.csv"
    path.write_text(text)
    return load_dataset(DatasetSpec(name="mine", path=str(path), user_provided=True))


@pytest.fixture(scope="module")
def oracles():
    built = {name: OracleBackend(name, f"oracle-{name}", 30) for name in ("memorizer", "null")}
    yield {
        name: LanguageModel(b, b.identity["model"], show_progress=False)
        for name, b in built.items()
    }
    for backend in built.values():
        backend.close()


def test_the_memorizer_on_a_users_file_is_not_applicable(oracles, tmp_path: Path) -> None:
    dataset = _user_file(tmp_path)
    params = {"n_queries": 5}
    result = run_test("row_completion", TestContext(dataset, oracles["memorizer"], params, 0))
    assert result.verdict is Verdict.NOT_APPLICABLE and result.n_queries == 0
    assert "knows only the files shipped" in result.reason and "mine.csv" in result.reason


def test_the_memorizer_answers_about_shipped_files_their_transforms_and_copies(
    oracles, tmp_path: Path
) -> None:
    memorizer = oracles["memorizer"]
    iris = load_dataset(dataset_specs()["iris"])
    assert memorizer.unknown_data_reason(iris) == ""
    twin = apply_transform(iris, OmegaConf.load(conf_dir() / "transform" / "perturbed.yaml"), 0)
    assert twin.text != iris.text
    assert memorizer.unknown_data_reason(twin) == ""
    copy = _user_file(tmp_path, iris.text)
    assert memorizer.unknown_data_reason(copy) == ""


def test_the_null_model_knows_no_file_so_any_file_is_fair(oracles, tmp_path: Path) -> None:
    assert oracles["null"].unknown_data_reason(_user_file(tmp_path)) == ""


class _AsksOneColumnFromOthers(Lifecycle):
    name, title, claims, min_columns = "two_columns", "two columns", "rows_seen", 2
    settings = dict

    def bind(self, ctx: TestContext) -> TestContext:
        return ctx

    def plan(self, ctx: TestContext) -> TestResult:
        return TestResult("two_columns", Verdict.NO_EVIDENCE, "asked", 1, 0)

    def word(self, ctx, queries, facts):  # pragma: no cover - never reached here
        raise AssertionError

    def score(self, ctx, facts, answer):  # pragma: no cover
        raise AssertionError

    def decide(self, ctx, facts, records, context):  # pragma: no cover
        raise AssertionError


def test_a_test_that_needs_two_columns_is_not_applicable_on_one(tmp_path: Path) -> None:
    one = _user_file(tmp_path, "x\n" + "".join(f"{i}\n" for i in range(30)))
    result = _AsksOneColumnFromOthers().run(TestContext(one, None, {}, 0))
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert "1 column" in result.reason and "at least 2" in result.reason
    two = _user_file(tmp_path)
    assert _AsksOneColumnFromOthers().run(TestContext(two, None, {}, 0)).reason == "asked"
