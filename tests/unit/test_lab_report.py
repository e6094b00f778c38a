"""The contamination lab's plan and its TPR/FPR table, on hand-made cells."""

from math import isnan, nan
from pathlib import Path

import pandas as pd
import pytest

from tabmem.data import Dataset, DatasetSpec
from tabmem.errors import ConfigError
from tabmem.lab.evaluate import sweep_command
from tabmem.lab.plan import LabPlan, load_lab_config, make_plan
from tabmem.lab.report import (
    GROUP_BEFORE,
    GROUP_HELD_OUT,
    GROUP_PLANTED,
    exposure_markdown,
    exposure_table,
    ground_truth_markdown,
    ground_truth_view,
    lab_cells,
    rate_markdown,
    rate_table,
)


def config(**changes):
    base = {
        "name": "t",
        "seed": 0,
        "pool": ["a", "b", "c", "d"],
        "plantable": ["a", "b", "c"],
        "n_planted": 2,
        "repetitions": [1, 8],
        "checkpoints": [0, 4, 8],
    }
    return {**base, **changes}


def test_plan_is_seeded_and_deals_repetitions_in_turn():
    plan = make_plan(config())
    assert plan == make_plan(config())
    assert sorted(plan.planted.values()) == [1, 8]
    assert set(plan.planted) <= {"a", "b", "c"}
    assert set(plan.held_out) == {"a", "b", "c", "d"} - set(plan.planted)
    assert plan.checkpoints == [0, 4, 8]


def test_schedule_reads_each_planted_file_as_often_as_planted():
    plan = LabPlan("t", {"a": 1, "b": 3}, ["c"], [0, 3])
    schedule = plan.schedule(seed=1)
    assert len(schedule) == 3
    assert sum(p.count("a") for p in schedule) == 1
    assert sum(p.count("b") for p in schedule) == 3
    assert plan.seen("b", 2) == 2 and plan.seen("a", 2) == 1 and plan.seen("c", 3) == 0


def test_plan_needs_a_held_out_dataset_and_positive_repetitions():
    with pytest.raises(ConfigError, match="held-out"):
        make_plan(config(n_planted=3, plantable=["a", "b", "c"], pool=["a", "b", "c"]))
    with pytest.raises(ConfigError, match="repetitions"):
        make_plan(config(repetitions=[0]))


def test_first_rows_plants_the_header_and_first_rows_exactly_as_in_the_file():
    plan = make_plan(config(first_rows={"a": 2, "b": 2, "c": 2}, n_planted=3))
    assert plan.first_rows == {"a": 2, "b": 2, "c": 2}
    text = "x,y\r\n1,2\r\n3,4\r\n5,6\r\n"
    dataset = Dataset(DatasetSpec(name="a"), Path("a.csv"), text)
    assert plan.planted_text(dataset) == "x,y\r\n1,2\r\n3,4\r\n"
    whole = make_plan(config(first_rows={"a": 9}, n_planted=3))
    assert whole.planted_text(dataset) == text  # the file is shorter than the limit
    assert plan.unread_text(dataset) == "x,y\r\n5,6\r\n"  # the header and the rows never read
    assert whole.unread_text(dataset) is None
    assert make_plan(config()).unread_text(dataset) is None  # read whole
    held = make_plan(config(first_rows={"c": 1}))
    assert held.first_rows == ({"c": 1} if "c" in held.planted else {})  # only where planted
    with pytest.raises(ConfigError, match="first_rows"):
        make_plan(config(first_rows={"d": 5}))  # not plantable
    with pytest.raises(ConfigError, match="first_rows"):
        make_plan(config(first_rows={"a": 0}))


def test_shipped_lab_settings_load_and_plan():
    standard = make_plan(load_lab_config("standard"))
    assert sorted(standard.planted.values()) == [2, 6, 12, 24]
    assert len(standard.held_out) >= 2
    assert standard.first_rows == {"openml-diabetes": 150}
    for setting in ("minimal", "full"):
        cfg = load_lab_config(setting)
        plan = make_plan(cfg)
        assert plan.planted and plan.held_out
    minimal = make_plan(load_lab_config("minimal"))
    assert len(minimal.planted) == 1
    full = make_plan(load_lab_config("full"))
    assert sorted(full.planted.values()) == [2, 2, 8, 8, 24, 24]
    assert {"california-housing", "adult"} <= set(full.held_out)
    assert set(full.first_rows) == {
        "openml-diabetes",
        "scikit-diabetes",
        "titanic",
        "synthetic-novel",
    }
    stream = make_plan(load_lab_config("stream"))
    assert stream.planted == {"icu": 16, "iris": 4, "wine": 1}
    assert stream.held_out == ["synthetic-novel"] and stream.stream.ratio == 1.0
    assert "synthetic-novel" not in stream.stream.tables
    with pytest.raises(ConfigError, match="No lab setting"):
        load_lab_config("nonexistent")


def runs(rows):
    frame = pd.DataFrame(rows)
    frame["status"] = "FINISHED"
    frame["param.model.lab.setting"] = "t"
    return frame


def cell(model, passes, dataset, verdict, planted=0, seen=0, test="header"):
    row = {"model": model, "dataset": dataset, "test": test, "verdict": verdict}
    row["param.model.lab.passes"] = str(passes)
    if planted:
        row[f"param.model.lab.planted.{dataset}"] = str(planted)
        row[f"param.model.lab.seen.{dataset}"] = str(seen)
    return row


def test_each_cell_keeps_its_hits_queries_and_p_value():
    row = cell("p8", 8, "a", "evidence", planted=8, seen=8)
    row.update({"metric.n_hits": 22.0, "metric.n_queries": 25.0, "metric.p_value": 0.0024})
    cells = lab_cells(runs([row, cell("p0", 0, "a", "no_evidence")]), "t")
    assert cells[["n_hits", "n_queries", "p_value"]].iloc[0].tolist() == [22.0, 25.0, 0.0024]
    assert cells["p_value"].isna().iloc[1]  # a run that logged none


def test_rate_table_by_hand():
    frame = runs(
        [
            cell("p0", 0, "a", "no_evidence", planted=8, seen=0),
            cell("p4", 4, "a", "ambiguous", planted=8, seen=4),
            cell("p8", 8, "a", "evidence", planted=8, seen=8),
            cell("p0", 0, "c", "no_evidence"),
            cell("p4", 4, "c", "no_evidence"),
            cell("p8", 8, "c", "evidence"),
        ]
    )
    cells = lab_cells(frame, "t")
    assert list(cells["seen"]) == [0, 4, 8, 0, 0, 0]
    table = rate_table(cells).set_index(["group", "repetitions"])
    assert table.loc[(GROUP_PLANTED, 8), "rate"] == 1.0
    assert table.loc[(GROUP_PLANTED, 4), "detected"] == 0
    assert table.loc[(GROUP_PLANTED, 4), "ambiguous"] == 1
    assert table.loc[(GROUP_BEFORE, 0), "cells"] == 1
    held = table.loc[(GROUP_HELD_OUT, 0)]
    assert (held["detected"], held["cells"]) == (1, 3)
    assert held["rate"] == pytest.approx(1 / 3)
    # exact 95 % interval of 1/3: Clopper-Pearson
    assert held["ci_low"] == pytest.approx(0.0084, abs=1e-4)
    assert held["ci_high"] == pytest.approx(0.9057, abs=1e-4)


def found_cells_and_truth() -> tuple[pd.DataFrame, pd.DataFrame]:
    """File a, read 8 times (its first 150 rows), found by two tests and the dataset verdict;
    file c held out: the runs and the ground truth the report tests read."""
    frame = runs(
        [
            cell("p8", 8, "a", "evidence", planted=8, seen=8),
            cell("p8", 8, "a", "evidence", planted=8, seen=8, test="min_k_prob"),
            cell("p8", 8, "a", "no_evidence", planted=8, seen=8, test="first_token"),
            cell("p8", 8, "a", "evidence", planted=8, seen=8, test="dataset"),
            cell("p8", 8, "c", "no_evidence"),
            cell("p0", 0, "a", "no_evidence", planted=8, seen=0),
        ]
    )
    truth = pd.DataFrame(
        {
            "passes": [8, 8, 0],
            "repetitions": [8, 0, 0],
            "dataset": ["a", "c", "a"],
            "group": ["planted", "held out", "planted"],
            "first_rows": [150, 0, 150],
            "loss": [0.1, 1.4, 1.3],
            "base_loss": [1.3, 1.41, 1.3],
            "loss_drop": [1.2, 0.01, 0.0],
            "unread_loss": [1.5, float("nan"), 1.35],
            "learned_over_unread": [1.35, float("nan"), 0.0],
            "twin_loss_drop": [0.4, 0.02, 0.0],
            "learned_over_twin": [0.8, -0.01, 0.0],
            "rows_written_back": [0.35, 0.0, 0.0],
            "rows_n": [20, 20, 20],
        }
    )
    return frame, truth


def test_ground_truth_sits_beside_the_tests_that_found_each_file():
    frame, truth = found_cells_and_truth()
    view = ground_truth_view(truth, lab_cells(frame, "t"))
    assert view["found_by"].tolist() == ["header, min_k_prob", "", ""]
    assert view["dataset_verdict"].tolist() == ["evidence", "", ""]
    lines = ground_truth_markdown(view).splitlines()
    assert lines[2] == (
        "| after 8 passes | a (first 150 rows) | planted | 8 | 0.100 | 1.300 | +1.200 | +0.400 "
        "| +0.800 | +1.350 | 7 / 20 | header, min_k_prob | evidence |"
    )
    assert lines[3].startswith("| after 0 passes | a (first 150 rows) | planted | 0 |")
    assert lines[4].endswith("| +0.010 | +0.020 | -0.010 | - | 0 / 20 | - | - |")  # held out last


def test_a_file_planted_by_its_first_rows_is_named_with_their_count():
    partial = cell("p8", 8, "a", "evidence", planted=8, seen=8)
    partial["param.model.lab.first_rows.a"] = "150"
    frame = runs([partial, cell("p8", 8, "b", "no_evidence", planted=8, seen=8)])
    cells = lab_cells(frame, "t")
    assert cells["first_rows"].tolist() == [150, 0]
    row = rate_table(cells).iloc[0]
    assert (row["detected"], row["cells"]) == (1, 2)
    assert row["datasets"] == "a (first 150 rows), b"


def test_not_applicable_cells_are_counted_apart_not_as_misses():
    frame = runs(
        [
            cell("p8", 8, "a", "evidence", planted=8, seen=8, test="row_order"),
            cell("p8", 8, "b", "not_applicable", planted=8, seen=8, test="row_order"),
            cell("p8", 8, "c", "not_applicable", test="row_order"),
        ]
    )
    table = rate_table(lab_cells(frame, "t")).set_index(["group", "repetitions"])
    planted = table.loc[(GROUP_PLANTED, 8)]
    assert (planted["detected"], planted["cells"], planted["not_applicable"]) == (1, 1, 1)
    assert planted["rate"] == 1.0
    held = table.loc[(GROUP_HELD_OUT, 0)]
    assert (held["cells"], held["not_applicable"]) == (0, 1)
    assert held["rate"] != held["rate"]  # no applicable cell: no rate (NaN)
    assert "| 0 / 0 | - | - | 1 |" in rate_markdown(rate_table(lab_cells(frame, "t")))


def test_cells_of_other_settings_are_ignored():
    frame = runs([cell("p8", 8, "a", "evidence", planted=8, seen=8)])
    assert lab_cells(frame, "other").empty
    assert rate_table(lab_cells(frame, "other")).empty


def test_only_one_version_of_a_setting_counts():
    old = cell("p8", 8, "a", "no_evidence", planted=8, seen=8)
    new = cell("p8", 8, "a", "evidence", planted=24, seen=8)
    frame = runs(
        [{**old, "param.model.lab.fingerprint": "v1"}, {**new, "param.model.lab.fingerprint": "v2"}]
    )
    frame["start_time"] = pd.to_datetime(["2026-01-01", "2026-01-02"])
    assert lab_cells(frame, "t")["verdict"].tolist() == ["evidence"]  # the latest version
    assert lab_cells(frame, "t", "v1")["verdict"].tolist() == ["no_evidence"]
    assert lab_cells(frame.iloc[::-1], "t")["planted"].tolist() == [24]


def test_the_figure_has_one_panel_per_test_the_dataset_verdict_first():
    import matplotlib.pyplot as plt

    from tabmem.lab.report import rate_figure

    frame = runs(
        [
            cell("p8", 8, "a", "evidence", planted=8, seen=8, test=test)
            for test in ("header", "dataset", "min_k_prob", "row_order", "sample")
        ]
        + [cell("p8", 8, "c", "no_evidence", test="header")]
    )
    figure = rate_figure(rate_table(lab_cells(frame, "t")))
    shown = [axis.get_title() for axis in figure.axes if axis.get_visible()]
    assert shown == ["dataset verdict", "header", "min_k_prob", "row_order", "sample"]
    assert list(figure.axes[0].get_xticks()) == [8]  # ticks at the repetitions planted
    plt.close(figure)


def test_paper_report_has_one_table_and_figure_per_setting():
    import matplotlib.pyplot as plt

    from tabmem.report.lab_tables import lab_reports

    frame = runs(
        [
            cell("p8", 8, "a", "evidence", planted=8, seen=8),
            cell("p8", 8, "c", "no_evidence"),
        ]
    )
    frame["run_id"] = ["r1", "r2"]
    tables, figures = lab_reports(frame)
    assert [t.name for t in tables] == ["lab-t"]
    assert tables[0].frame["detected / cells"].tolist() == ["1 / 1", "0 / 1"]
    assert tables[0].run_ids == ["r1", "r2"]
    assert [f.name for f in figures] == ["lab-t-tpr"]
    plt.close(figures[0].figure)
    assert lab_reports(frame.drop(columns=["param.model.lab.setting"])) == ([], [])


def test_the_sweep_runs_as_many_cells_at_once_as_the_setting_asks(tmp_path):
    one = sweep_command(["m"], ["iris"], ["header"], tmp_path, tmp_path, "lab-t")
    six = sweep_command(["m"], ["iris"], ["header"], tmp_path, tmp_path, "lab-t", (), 6)
    assert "hydra.launcher.n_jobs=1" in one
    assert "hydra.launcher.n_jobs=6" in six and "hydra.launcher.n_jobs=1" not in six
    for setting, jobs in (("minimal", 2), ("standard", 2), ("full", 6)):
        assert load_lab_config(setting).evaluation.jobs == jobs


def test_the_sweep_asks_every_cell_at_each_seed_and_the_view_counts_them(tmp_path):
    assert "seed=0" in sweep_command(["m"], ["iris"], ["header"], tmp_path, tmp_path, "lab-t")
    three = sweep_command(["m"], ["a"], ["h"], tmp_path, tmp_path, "lab-t", (), 2, [0, 1, 2])
    assert "seed=0,1,2" in three
    assert load_lab_config("parts").evaluation.seeds == [0, 1, 2]
    assert load_lab_config("minimal").evaluation.seeds == [0]
    rows = []
    for seed, (found, verdict) in enumerate(
        [("no_evidence", "ambiguous"), ("evidence", "evidence"), ("no_evidence", "no_evidence")]
    ):
        for test, said in (("reference_ratio", found), ("dataset", verdict)):
            rows.append({**cell("p4", 4, "a", said, 4, 4, test), "param.seed": str(seed)})
    cells = lab_cells(runs(rows[::-1]), "t")
    assert sorted(cells["seed"]) == [0, 0, 1, 1, 2, 2]
    truth = pd.DataFrame({"passes": [4], "dataset": ["a"]})
    view = ground_truth_view(truth, cells)
    assert view["found_by"].tolist() == ["reference_ratio (1/3)"]
    assert view["dataset_verdict"].tolist() == ["ambiguous / evidence / no_evidence"]
    table = rate_table(cells)
    assert table.loc[table["test"] == "dataset", ["cells", "detected"]].values.tolist() == [[3, 1]]


def test_exposure_is_the_smallest_times_read_from_which_every_learned_file_is_found():
    frame = runs(
        [
            cell("p16", 16, "a", "evidence", planted=16, seen=16),
            cell("p16", 16, "b", "evidence", planted=4, seen=4),
            cell("p16", 16, "c", "no_evidence", planted=1, seen=1),
            cell("p16", 16, "d", "no_evidence", planted=1, seen=1),  # learned nothing
            cell("p16", 16, "h", "no_evidence"),
            cell("p0", 0, "a", "no_evidence", planted=16, seen=0),
            cell("p16", 16, "a", "evidence", planted=16, seen=16, test="zlib_ratio"),
            cell("p16", 16, "b", "no_evidence", planted=4, seen=4, test="zlib_ratio"),
            cell("p16", 16, "h", "evidence", test="zlib_ratio"),
            cell("p0", 0, "a", "no_evidence", planted=16, seen=0, test="zlib_ratio"),
        ]
    )
    truth = pd.DataFrame(
        {
            "passes": [16, 16, 16, 16, 16, 0],
            "dataset": ["a", "b", "c", "d", "h", "a"],
            "learned_over_twin": [0.5, 0.1, 0.02, -0.01, 0.0, 0.0],
            "learned_over_unread": [nan, nan, nan, nan, nan, nan],
        }
    )
    table = exposure_table(lab_cells(frame, "t"), truth).set_index("test")
    header = table.loc["header"]
    assert header["smallest_exposure"] == 4  # c, read once, learned and was missed
    assert header["found_by_times_read"] == (  # d learned nothing
        "1: 0/1 [0.00, 0.97]; 4: 1/1 [0.03, 1.00]; 16: 1/1 [0.03, 1.00]"
    )
    # c beat its twin but not its own unread rows: the model knew the file's distribution,
    # not these rows, so c is not a file that learned its rows
    siblings = truth.assign(learned_over_unread=[nan, nan, -0.05, nan, nan, nan])
    unread = exposure_table(lab_cells(frame, "t"), siblings).set_index("test")
    assert (
        unread.loc["header", "found_by_times_read"] == "4: 1/1 [0.03, 1.00]; 16: 1/1 [0.03, 1.00]"
    )
    assert (header["false_positives"], header["negatives"]) == (0, 2)
    assert header["fpr_high"] == pytest.approx(0.8419, abs=1e-4)
    zlib = table.loc["zlib_ratio"]
    assert isnan(zlib["smallest_exposure"])  # a false positive: no exposure at FPR <= 1 %
    assert (zlib["false_positives"], zlib["negatives"]) == (1, 2)
    lines = exposure_markdown(table.reset_index()).splitlines()
    assert lines[2] == (
        "| header | 4 | 1: 0/1 [0.00, 0.97]; 4: 1/1 [0.03, 1.00]; 16: 1/1 [0.03, 1.00] "
        "| 0 / 2 | 0.84 |"
    )
    assert lines[3].startswith("| zlib_ratio | - | 4: 0/1 [0.00, 0.97]; 16: 1/1 [0.03, 1.00] |")


def test_the_report_writes_each_phases_seconds_beside_the_tables(tmp_path):
    from tabmem.lab.report import write_report

    frame, truth = found_cells_and_truth()
    cells = lab_cells(frame, "t")
    seconds = {"train": 1442.4, "ground_truth": 432.0, "evaluate": 788.9}
    view = ground_truth_view(truth, cells)
    files = write_report(rate_table(cells), cells, tmp_path, view, seconds)
    timings = files["timings_md"].read_text()
    assert "| train | 1,442 |" in timings and "| ground truth | 432 |" in timings
    assert "| evaluate | 789 |" in timings and f"{len(cells)} cells evaluated" in timings
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files.values())
