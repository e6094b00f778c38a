"""The never-published control dataset: deterministic, shipped as generated, and learnable."""

from __future__ import annotations

import csv
import io

from tabmem.data.synthetic import COLUMNS, generate_synthetic_novel
from tabmem.paths import data_dir


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_generation_is_deterministic_and_seed_dependent() -> None:
    assert generate_synthetic_novel() == generate_synthetic_novel()
    assert generate_synthetic_novel(seed=1) != generate_synthetic_novel(seed=2)
    assert generate_synthetic_novel(50) == generate_synthetic_novel(50, 20260101)


def test_shipped_file_equals_a_fresh_generation() -> None:
    shipped = (data_dir() / "synthetic-novel.csv").read_bytes()
    assert shipped == generate_synthetic_novel().encode("utf-8")


def test_shape_and_value_formats() -> None:
    text = generate_synthetic_novel()
    assert text.endswith("\n") and "\r" not in text
    rows = _rows(text)
    assert len(rows) == 600
    assert tuple(rows[0]) == COLUMNS
    assert all(len(r["brine_index"].split(".")[1]) == 2 for r in rows)
    assert all(len(r["canopy_pct"].split(".")[1]) == 1 for r in rows)
    assert all(r["terrace"].isdigit() for r in rows)


def test_target_is_binary_and_depends_on_features() -> None:
    rows = _rows(generate_synthetic_novel())
    assert {r["sealed"] for r in rows} == {"yes", "no"}
    yes = [float(r["sap_yield"]) for r in rows if r["sealed"] == "yes"]
    no = [float(r["sap_yield"]) for r in rows if r["sealed"] == "no"]
    assert sum(yes) / len(yes) > sum(no) / len(no) + 1.0
    share = len(yes) / len(rows)
    assert 0.3 < share < 0.8


def test_categories_are_invented_words() -> None:
    rows = _rows(generate_synthetic_novel())
    groves = {r["grove"] for r in rows}
    assert groves == {"Velmora", "Quisthaven", "Tarnwick", "Oblenne", "Drusk"}
    assert len({r["weave"] for r in rows}) == 3


def test_prefix_of_a_longer_run_matches_a_shorter_run() -> None:
    short = generate_synthetic_novel(10).splitlines()
    long = generate_synthetic_novel(20).splitlines()
    assert long[:11] == short
