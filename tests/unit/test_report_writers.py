import pandas as pd

from tabmem.report.writers import ReportTable, latex, markdown, write_table
from tabmem.tracking.runs import latest_finished

TABLE = ReportTable(
    name="t",
    title="Header test_1",
    frame=pd.DataFrame({"dataset": ["iris", "a|b"], "gpt-4": ["✓", "-"]}),
    footnotes=["- : no run; fill with python run.py"],
)


def test_markdown_escapes_pipes_and_keeps_footnotes():
    text = markdown(TABLE)
    assert "| dataset | gpt-4 |" in text
    assert "| a\\|b | - |" in text
    assert text.rstrip().endswith("- : no run; fill with python run.py")


def test_latex_escapes_special_characters():
    text = latex(TABLE)
    assert "\\caption{Header test\\_1}" in text
    assert "iris & \\checkmark{} \\\\" in text


def test_write_table_writes_three_formats(tmp_path):
    paths = write_table(TABLE, tmp_path)
    assert sorted(p.suffix for p in paths) == [".csv", ".md", ".tex"]
    assert pd.read_csv(paths[2])["gpt-4"].tolist() == ["✓", "-"]


def test_latest_finished_keeps_newest_finished_run_per_cell():
    frame = pd.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "status": ["FINISHED", "FINISHED", "FAILED"],
            "start_time": pd.to_datetime([1, 2, 3], unit="s"),
            "model": ["m"] * 3,
            "dataset": ["iris"] * 3,
            "test": ["header"] * 3,
            "transform": ["original"] * 3,
        }
    )
    assert latest_finished(frame)["run_id"].tolist() == ["b"]


def test_latest_finished_leaves_out_runs_that_are_no_cell():
    frame = pd.DataFrame(
        {
            "run_id": ["cell", "page"],
            "status": ["FINISHED", "FINISHED"],
            "start_time": pd.to_datetime([1, 2], unit="s"),
            "model": ["m", ""],
            "dataset": ["iris", ""],
            "test": ["header", ""],  # a grid's page of who memorized what has no cell tags
            "transform": ["original", ""],
        }
    )
    assert latest_finished(frame)["run_id"].tolist() == ["cell"]
