"""The probes table from a runs frame as ``load_runs`` returns it."""

from __future__ import annotations

import pandas as pd

from tabmem.report.probes_table import cell_text, probes_table, probes_tables
from tabmem.report.writers import latex, markdown


def run(model, dataset, test, transform, verdict, rate, n=40):
    return {
        "run_id": f"{model}-{dataset}-{test}-{transform}",
        "model": model,
        "dataset": dataset,
        "test": test,
        "transform": transform,
        "verdict": verdict,
        "metric.rate": rate,
        "metric.n_queries": n,
    }


RUNS = pd.DataFrame(
    [
        run("oracle-memorizer", "iris", "completion_choice", "original", "evidence", 1.0),
        run("oracle-memorizer", "iris", "existence", "original", "evidence", 0.975),
        run("oracle-memorizer", "iris", "existence", "like", "no_evidence", 0.2),
        run("oracle-memorizer", "adult", "existence", "obfuscated", "ambiguous", 0.35, n=38),
        run("oracle-memorizer", "adult", "completion_choice", "like", "not_applicable", None, 0),
        run("oracle-memorizer", "adult", "header", "original", "evidence", 1.0),
        run("oracle-null", "iris", "existence", "perturbed", "no_evidence", 0.2),
        run("oracle-null", "iris", "existence", "original", "no_evidence", 0.225),
    ]
)


def test_one_row_per_dataset_and_one_column_per_transform_and_probe() -> None:
    table = probes_table(RUNS, "oracle-memorizer")
    assert list(table.frame.columns) == [
        "dataset",
        "real · completion",
        "real · existence",
        "like · completion",
        "like · existence",
        "obfuscated · completion",
        "obfuscated · existence",
    ]
    rows = {r["dataset"]: r for r in table.frame.to_dict("records")}
    assert list(rows) == ["adult", "iris"]
    assert rows["iris"]["real · completion"] == "1.00 ✓"
    assert rows["iris"]["real · existence"] == "0.97 ✓"  # 0.975 is stored as 0.97499...
    assert rows["iris"]["like · existence"] == "0.20"
    assert rows["iris"]["obfuscated · existence"] == ""
    assert rows["adult"]["obfuscated · existence"] == "0.35 ?"
    assert rows["adult"]["like · completion"] == "n/a"
    assert rows["adult"]["real · existence"] == ""  # the header run is not a probe
    assert len(table.run_ids) == 5
    assert table.footnotes[-1] == "Questions per cell: 0–40."


def test_one_table_per_model_with_probe_runs_and_transforms_outside_the_three_ignored() -> None:
    tables = probes_tables(RUNS)
    assert [t.name for t in tables] == ["probes-oracle-memorizer", "probes-oracle-null"]
    null = tables[1].frame.to_dict("records")
    assert null == [
        {
            "dataset": "iris",
            "real · completion": "",
            "real · existence": "0.23",
            "like · completion": "",
            "like · existence": "",
            "obfuscated · completion": "",
            "obfuscated · existence": "",
        }
    ]


def test_the_table_writes_as_markdown_and_latex() -> None:
    table = probes_table(RUNS, "oracle-memorizer")
    assert "| iris | 1.00 ✓ | 0.97 ✓ |" in markdown(table)
    assert "1.00 \\checkmark{}" in latex(table)


def test_an_empty_frame_gives_no_table() -> None:
    assert probes_tables(pd.DataFrame(columns=["model", "test", "transform"])) == []
    assert cell_text(pd.Series({"verdict": "evidence", "metric.rate": float("nan")})) == "n/a"
