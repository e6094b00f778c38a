"""The in-process calibration: its smoke size end to end, the FPR bound, the dataset
verdicts' grouping, and the shared plan giving what ``run_test`` gives."""

from __future__ import annotations

import csv
import importlib.util
import time
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from tabmem.battery.base import TestContext, run_test
from tabmem.battery.windows import window
from tabmem.calibrate import SIZES, calibrate, run
from tabmem.calibrate.cells import BASELINE_SHARED, Job, ModelSpec, run_job
from tabmem.calibrate.run import compose_world, plan_jobs, read_cells, run_jobs, tabulate
from tabmem.calibrate.tables import (
    DATASET_VERDICT,
    breakdown_markdown,
    dataset_verdicts,
    file_power_markdown,
    fpr_rows,
    fpr_upper_bound,
)
from tabmem.llm.oracle.partial import Recall
from tabmem.llm.stopping import StopRule


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("calibration")
    console = Console(record=True, width=160)
    outcome = calibrate(SIZES["smoke"], out, workers=1, console=console)
    return outcome, out, console.export_text()


def test_smoke_size_runs_every_cell_and_prints_its_tables(smoke) -> None:
    outcome, out, printed = smoke
    size = SIZES["smoke"]
    # per setting: the negatives and one partial memorizer on the file, the memorizer on its twin
    models = len(size.negatives) + len(size.shares) * len(size.rests) + 1
    assert len(outcome.cells) == models * len(size.tests) * len(size.settings)
    assert outcome.jobs[0] == outcome.jobs[1] > 0
    assert len(outcome.verdicts) == models * len(size.settings)
    assert "False positives on reference negatives" in printed
    for test in (*size.tests, DATASET_VERDICT):
        assert test in printed
    assert f"{len(outcome.cells)} cells and {len(outcome.verdicts)} dataset verdicts in" in printed
    for name in (
        "reference_cells.csv",
        "reference_fpr.md",
        "reference_power.md",
        "reference_power.png",
    ):
        assert (out / name).stat().st_size > 0
    with (out / "reference_cells.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(outcome.cells)
    assert {r["transform"] for r in rows if r["model"] == "oracle-memorizer"} == {"twin"}
    assert DATASET_VERDICT in (out / "reference_power.md").read_text()
    assert not (out / "reference_cells.partial.csv").exists()  # kept only while running


def test_fpr_table_counts_the_negatives_of_each_setting(smoke) -> None:
    outcome, _, _ = smoke
    size = SIZES["smoke"]
    negatives = len(size.negatives) + 1  # and the memorizer on the twin
    for row in outcome.fpr:
        assert row["cells"] == negatives
        assert row["evidence"] + row["ambiguous"] <= row["applicable"] <= row["cells"]
        assert row["fpr_upper_95"] == fpr_upper_bound(row["evidence"], row["applicable"])
    assert {(r["setting"], r["test"]) for r in outcome.fpr} == {
        (s, t) for s in size.settings for t in (*size.tests, DATASET_VERDICT)
    }


def test_recorded_cells_give_the_same_tables_again(smoke, tmp_path) -> None:
    outcome, out, _ = smoke
    console = Console(record=True, width=160)
    again = tabulate(read_cells(out / "reference_cells.csv"), tmp_path, console)
    assert again.fpr == outcome.fpr
    assert again.power == outcome.power
    assert "tabulated from recorded cells" in console.export_text()
    assert (tmp_path / "reference_power.png").stat().st_size > 0


@pytest.mark.parametrize("n", [1, 10, 500, 1000])
def test_fpr_bound_with_no_evidence_is_the_exact_formula(n: int) -> None:
    assert fpr_upper_bound(0, n) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-9)


def test_fpr_bound_grows_with_evidence_and_shrinks_with_cells() -> None:
    assert fpr_upper_bound(0, 500) < 0.006
    assert fpr_upper_bound(1, 500) > fpr_upper_bound(0, 500)
    assert fpr_upper_bound(1, 1000) < fpr_upper_bound(1, 500)
    assert fpr_upper_bound(0, 0) == 1.0
    assert fpr_upper_bound(3, 3) == 1.0


def _row(test: str, verdict: str, p: float | None, seed: int = 0, setting: str = "default"):
    return {
        "model": "oracle-learner",
        "rest": "",
        "share": "",
        "dataset": "iris",
        "transform": "original",
        "seed": seed,
        "setting": setting,
        "test": test,
        "verdict": verdict,
        "p_value": p,
    }


def test_dataset_verdicts_group_one_model_file_seed_and_setting() -> None:
    rows = [
        _row("row_completion", "evidence", 1e-9),
        _row("feature_completion", "no_evidence", 0.8),
        _row("min_k_prob", "not_applicable", None),
        _row("row_completion", "no_evidence", 0.7, seed=1),
        _row("feature_completion", "no_evidence", 0.4, seed=1),
        _row("row_completion", "not_applicable", None, setting="papers"),
    ]
    verdicts = {(v["seed"], v["setting"]): v for v in dataset_verdicts(rows)}
    assert set(verdicts) == {(0, "default"), (1, "default"), (0, "papers")}
    assert verdicts[(0, "default")]["verdict"] == "evidence"
    assert verdicts[(0, "default")]["tests"] == 3
    assert verdicts[(0, "default")]["combined"] == 2
    assert verdicts[(0, "default")]["carried_by"] == "row_completion"
    assert verdicts[(1, "default")]["verdict"] == "no_evidence"
    assert verdicts[(0, "papers")]["verdict"] == "not_applicable"
    assert 0.01 <= verdicts[(1, "default")]["p_value"] <= 1


def test_a_group_without_a_test_applicable_elsewhere_gives_no_dataset_verdict() -> None:
    rows = [
        _row("row_completion", "no_evidence", 0.7),
        _row("first_token", "evidence", 1e-6),
        _row("first_token", "evidence", 1e-6, seed=1),  # a --tests run of first token alone
        _row("min_k_prob", "not_applicable", None),  # never applicable: not required
    ]
    verdicts = dataset_verdicts(rows)
    assert [(v["seed"], v["tests"]) for v in verdicts] == [(0, 3)]


def test_file_power_counts_each_file_apart() -> None:
    def verdict(dataset: str, share: float, seed: int, found: bool) -> dict:
        return {
            "model": "oracle-partial",
            "rest": "forest",
            "share": share,
            "dataset": dataset,
            "transform": "original",
            "seed": seed,
            "setting": "default",
            "test": DATASET_VERDICT,
            "verdict": "evidence" if found else "no_evidence",
        }

    rows = [verdict("iris", 0.1, s, s < 1) for s in range(3)]
    rows += [verdict("adult", 0.1, s, True) for s in range(3)]
    text = file_power_markdown(rows)
    assert "### dataset verdict per file, rest: forest, setting: default" in text
    assert "| adult | 3/3 = 1.000 [0.29, 1.00] |" in text
    assert "| iris | 1/3 = 0.333 [0.01, 0.91] |" in text


def test_fpr_rows_count_applicable_dataset_verdicts_only() -> None:
    rows = [
        _row("row_completion", "evidence", 1e-9),
        _row("row_completion", "no_evidence", 0.7, seed=1),
        _row("row_completion", "not_applicable", None, seed=2),
    ]
    verdicts = dataset_verdicts(rows)
    fpr = {r["test"]: r for r in fpr_rows(rows, verdicts, ["row_completion"])}
    assert fpr["row_completion"]["cells"] == 3
    assert fpr["row_completion"]["applicable"] == 2
    assert fpr["row_completion"]["evidence"] == 1
    assert fpr[DATASET_VERDICT]["applicable"] == 2
    assert fpr[DATASET_VERDICT]["evidence"] == 1


def test_boundary_shares_run_on_more_seeds() -> None:
    size = replace(
        SIZES["power"],
        datasets=("iris",),
        settings=("default",),
        power_seeds=2,
        boundary_seeds=3,
        rests=("forest-quiet", "forest"),
    )
    jobs = plan_jobs(size, {"default": {t: {} for t in ("header",)}})
    per_share: dict[tuple[float, str], int] = {}
    for job in jobs:
        for spec in job.models:
            assert spec.recall is not None
            key = (spec.recall.share, spec.recall.rest_label)
            per_share[key] = per_share.get(key, 0) + 1
    assert {rest for _, rest in per_share} == {"forest-quiet", "forest"}
    assert per_share[(0.05, "forest-quiet")] == per_share[(0.1, "forest")] == 3
    assert per_share[(0.02, "forest-quiet")] == per_share[(0.4, "forest")] == 2


def test_the_group_bound_counts_a_model_on_a_file_once() -> None:
    """Fourteen seeds of one model on one file are one unit, however many find evidence."""
    rows = [
        _row("sample", "evidence" if seed < 3 else "no_evidence", 0.5, seed) for seed in range(14)
    ]
    rows += [{**_row("sample", "no_evidence", 0.5, seed), "dataset": "wine"} for seed in range(14)]
    (fpr,) = fpr_rows(rows, [], ["sample"])
    assert (fpr["applicable"], fpr["evidence"]) == (28, 3)
    assert (fpr["groups"], fpr["groups_evidence"]) == (2, 1)
    assert fpr["group_upper_95"] == fpr_upper_bound(1, 2)
    assert fpr["fpr_upper_95"] == fpr_upper_bound(3, 28)


def test_evidence_is_broken_down_per_negative_and_per_file() -> None:
    rows = [_row("sample", "evidence", 1e-9), _row("sample", "no_evidence", 0.5, seed=1)]
    rows += [{**_row("sample", "no_evidence", 0.5), "model": "oracle-moments-t0"}]
    rows += [
        {**_row("sample", "no_evidence", 0.5), "model": "oracle-memorizer", "transform": "twin"}
    ]
    rows += [{**_row("sample", "evidence", 1e-9), "model": "oracle-partial", "share": 0.1}]
    verdicts = dataset_verdicts(rows)
    by_model = breakdown_markdown(rows, verdicts, ["sample"], "model", BASELINE_SHARED)
    assert "| negative | sample | dataset verdict | shares a model with a baseline |" in by_model
    assert "| oracle-learner | 1/2 | 1/2 | the count tests' baselines" in by_model
    assert "| oracle-moments-t0 | 0/1 | 0/1 |  |" in by_model
    assert "| oracle-memorizer on twins | 0/1 | 0/1 |  |" in by_model
    assert "oracle-partial" not in by_model  # a positive
    by_file = breakdown_markdown(rows, verdicts, ["sample"], "dataset")
    assert "| iris | 1/4 | 1/4 |" in by_file


def test_the_dataset_verdict_is_also_given_without_the_sample_test_and_per_suite() -> None:
    tests = ["header", "row_completion", "existence", "sample"]
    suites = run.verdict_suites(tests)
    assert suites[DATASET_VERDICT] is None
    assert suites[f"{DATASET_VERDICT}, no sample"] == ("header", "row_completion", "existence")
    assert suites["memorization suite"] == ("header", "row_completion")
    assert "memorization suite, no sample" not in suites  # the same tests again
    # a variant that combines the same tests as another is not given twice
    assert list(run.verdict_suites(["header", "row_completion"])) == [DATASET_VERDICT]
    rows = [_row("header", "no_evidence", 0.5), _row("sample", "evidence", 1e-9)]
    members = suites[f"{DATASET_VERDICT}, no sample"]
    (alone,) = dataset_verdicts(rows, members=members, label="no sample")
    assert (alone["test"], alone["verdict"], alone["tests"]) == ("no sample", "no_evidence", 1)


def test_a_shared_plan_gives_what_run_test_gives() -> None:
    tests = ("row_completion", "feature_completion")
    world = compose_world(replace(SIZES["smoke"], tests=tests))
    specs = (ModelSpec("oracle-copula"), ModelSpec("oracle-partial", Recall(0.2, 3, "random")))
    rows = run_job(world, Job("iris", "original", 3, "default", specs, tests))
    shared = {(r["model"], r["test"]): r for r in rows}
    dataset = world.dataset("iris", "original", 3)
    for spec in specs:
        for test in tests:
            ctx = TestContext(dataset, world.model(spec), world.settings["default"][test], 3)
            alone = run_test(test, ctx)
            row = shared[(spec.name, test)]
            assert (row["verdict"], row["n_hits"], row["n_queries"], row["p_value"]) == (
                str(alone.verdict),
                alone.n_hits,
                alone.n_queries,
                alone.p_value,
            )


@pytest.mark.parametrize("name", ["oracle-learner", "oracle-forest", "oracle-copula"])
def test_a_draft_ended_where_the_stop_rule_settles_it_is_cut_to_the_same_answer(name) -> None:
    world = compose_world(replace(SIZES["smoke"], datasets=("iris", "titanic")))
    oracle = world.oracle(ModelSpec(name))
    shorter = 0
    for file in ("iris", "titanic"):
        dataset = world.dataset(file, "original", 0)
        rule = StopRule.first_row(dataset.header, dataset.delimiter)
        for target in range(10, len(dataset.rows), len(dataset.rows) // 12):
            win = window(dataset, target, 10)
            budget = len(win.expected) // 2 + 32  # room for a few rows, as row completion asks
            whole = oracle.answer(win.prefix, budget, [], target, chat=True).text
            done = lambda text, rule=rule: rule.end(text) is not None  # noqa: E731
            ended = oracle.answer(win.prefix, budget, [], target, chat=True, settled=done).text
            assert rule.cut(ended) == rule.cut(whole)
            assert whole.startswith(ended)
            shorter += len(ended) < len(whole)
    assert shorter >= 20  # the rows after the first were not written


def test_no_job_starts_after_the_deadline() -> None:
    size = SIZES["smoke"]
    world = compose_world(size)
    jobs = plan_jobs(size, world.settings)
    advanced: list[list[dict]] = []
    rows, ran = run_jobs(world, jobs, 1, advanced.append, deadline=time.perf_counter())
    assert (rows, ran, advanced) == ([], 0, [])
    rows, ran = run_jobs(world, jobs[:1], 1, advanced.append)
    assert ran == 1
    assert advanced == [rows] and rows


def test_runs_from_other_seeds_add_up_and_overlaps_count_once(smoke, tmp_path) -> None:
    outcome, out, _ = smoke
    size = replace(SIZES["smoke"], first_seed=5, negative_seeds=2, power_seeds=1)
    world = compose_world(size)
    seeds = {
        (j.seed, j.transform, bool(j.models[-1].recall)) for j in plan_jobs(size, world.settings)
    }
    # negatives at seeds 5 and 6 (real file and twin), the partial memorizer at seed 5 only
    assert seeds == {
        (5, "original", True),
        (5, "twin", False),
        (6, "original", False),
        (6, "twin", False),
    }
    moved = tmp_path / "moved.csv"
    with (out / "reference_cells.csv").open() as src, moved.open("w", newline="") as dst:
        rows = list(csv.DictReader(src))
        writer = csv.DictWriter(dst, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, "seed": int(r["seed"]) + 1} for r in rows)
    both = read_cells(out / "reference_cells.csv", moved, out / "reference_cells.csv")
    assert len(both) == 2 * len(outcome.cells)
    assert {c["seed"] for c in both} == {0, 1}


def _script():
    path = Path(__file__).resolve().parents[2] / "scripts" / "calibrate_reference.py"
    spec = importlib.util.spec_from_file_location("calibrate_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_tabulates_recorded_cells_and_refuses_an_unknown_size(
    smoke, tmp_path, capsys
) -> None:
    outcome, out, _ = smoke
    script = _script()
    cells = out / "reference_cells.csv"
    assert script.main(["--from-cells", str(cells), str(cells), "--out", str(tmp_path)]) == 0
    assert "tabulated from recorded cells" in capsys.readouterr().out
    with (tmp_path / "reference_cells.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == len(outcome.cells)
    with pytest.raises(SystemExit):
        script.main(["--size", "everything"])
    assert "invalid choice: 'everything'" in capsys.readouterr().err


def _cell(test: str, setting: str, transform: str, seed: int, model: str, applies: bool) -> dict:
    return {
        "test": test,
        "setting": setting,
        "dataset": "iris",
        "transform": transform,
        "seed": seed,
        "model": model,
        "verdict": "no_evidence" if applies else "not_applicable",
    }


def test_top_up_adds_seeds_where_a_test_applied_until_its_cells_are_applicable() -> None:
    size = replace(SIZES["smoke"], negative_seeds=2, settings=("default", "papers"))
    # header: the same counts at both settings; row completion: other counts at the papers'
    settings = {
        "default": {"header": {"n": 1}, "row_completion": {"n": 1}},
        "papers": {"header": {"n": 1}, "row_completion": {"n": 2}},
    }
    cells = []
    for seed in (0, 1):
        for model in size.negatives:
            cells.append(_cell("header", "default", "original", seed, model, seed == 1))
            cells.append(_cell("row_completion", "default", "original", seed, model, True))
            cells.append(_cell("row_completion", "papers", "original", seed, model, True))
        for test, setting, applies in (
            ("header", "default", False),
            ("row_completion", "default", True),
            ("row_completion", "papers", False),
        ):
            cells.append(_cell(test, setting, "twin", seed, "oracle-memorizer", applies))
    jobs = run.top_up_jobs(size, settings, cells, ["iris"])
    # 6 cells per test and setting planned: header has 2 applicable, one per seed on the
    # real file (never on the twin): seeds 2-5 there, counted at both settings; row
    # completion at the papers' counts lacks 2, which one seed on the real file gives
    negatives = tuple(ModelSpec(n) for n in size.negatives)
    assert sorted(jobs, key=lambda j: (j.setting, j.seed)) == [
        *(
            Job("iris", "original", s, "default", negatives, ("header",), ("papers",))
            for s in (2, 3, 4, 5)
        ),
        Job("iris", "original", 2, "papers", negatives, ("row_completion",)),
    ]
    # a test that never applied gets no seeds; one that has its cells gets none either
    never = [{**c, "verdict": "not_applicable"} if c["test"] == "header" else c for c in cells]
    assert all(
        j.tests == ("row_completion",) for j in run.top_up_jobs(size, settings, never, ["iris"])
    )


def test_a_run_tops_up_a_test_that_did_not_apply_on_every_cell(tmp_path) -> None:
    # first token cannot ask wine's real file (every first token is the same) but asks its twin
    size = replace(
        SIZES["smoke"],
        datasets=("wine",),
        tests=("first_token",),
        negatives=("oracle-null",),
        power_seeds=0,
        settings=("default",),
    )
    outcome = calibrate(size, tmp_path, workers=1, console=Console(record=True))
    seen = {(c["transform"], c["seed"], c["verdict"] != "not_applicable") for c in outcome.cells}
    assert seen == {("original", 0, False), ("twin", 0, True), ("twin", 1, True)}
    assert outcome.jobs == (3, 3)
    assert outcome.fpr[0]["applicable"] == 2
    assert "Partial memorizers: none." in (tmp_path / "reference_fpr.md").read_text()


def test_a_workers_unit_is_one_file_transform_and_seed_at_every_setting() -> None:
    size = replace(SIZES["smoke"], negative_seeds=2, power_seeds=0)
    world = compose_world(size)
    jobs = sorted(plan_jobs(size, world.settings), key=lambda j: (j.seed, j.transform, j.setting))
    units = run.same_file_units(jobs)
    assert [j for unit in units for j in unit] == jobs
    assert [(u[0].seed, u[0].transform, len(u)) for u in units] == [
        (s, t, len({j.setting for j in jobs if (j.seed, j.transform) == (s, t)}))
        for s in (0, 1)
        for t in ("original", "twin")
    ]


def test_a_worker_keeps_to_the_files_it_has_run_and_takes_others_rather_than_wait() -> None:
    def unit(dataset: str, transform: str, seed: int) -> tuple[Job, ...]:
        return (Job(dataset, transform, seed, "default", (), ()),)

    world = compose_world(SIZES["smoke"])
    left = [
        unit("adult", "original", 0),
        unit("adult", "twin", 0),
        unit("iris", "original", 0),
        unit("adult", "original", 1),
        unit("iris", "original", 1),
    ]
    with run.WorkerPool(world, 2) as pool:
        taken = [pool._take(w, left)[0] for w in (0, 1, 1, 0, 0)]
    assert [(j.dataset, j.transform, j.seed) for j in taken] == [
        ("adult", "original", 0),  # worker 0 claims adult
        ("adult", "twin", 0),  # a twin goes to whoever is free
        ("iris", "original", 0),  # worker 1 claims iris
        ("adult", "original", 1),  # worker 0 keeps to adult
        ("iris", "original", 1),  # nothing of its own is left: it takes iris rather than wait
    ]
    assert left == []


def test_two_workers_give_the_cells_one_worker_gives(smoke, tmp_path) -> None:
    outcome, _, _ = smoke
    two = calibrate(SIZES["smoke"], tmp_path, workers=2, console=Console(record=True))
    assert two.jobs == outcome.jobs
    key = lambda row: tuple(str(row[k]) for k in sorted(row))  # noqa: E731
    assert sorted(map(key, two.cells)) == sorted(map(key, outcome.cells))


def test_a_cell_that_raises_stops_the_run_with_where_its_finished_cells_are(
    tmp_path, monkeypatch
) -> None:
    size = replace(SIZES["smoke"], negatives=("oracle-null",), power_seeds=0)
    calls = []

    def second_fails(world, job):
        calls.append(job)
        if len(calls) == 2:
            raise ValueError("'yerr' must not contain negative values")
        return run_job(world, job)

    monkeypatch.setattr(run, "run_job", second_fails)
    with pytest.raises(RuntimeError, match=r"a cell failed \(ValueError: 'yerr'") as error:
        calibrate(size, tmp_path, workers=1, console=Console(record=True))
    assert "--from-cells" in str(error.value)
    kept = (tmp_path / run.PARTIAL_CELLS).read_text().splitlines()
    assert len(kept) > 1  # the header and the first job's cells
