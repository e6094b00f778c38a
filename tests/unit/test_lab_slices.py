"""A lab pool of parts of one large file: the cut, the configs the sweep finds, the plan."""

from math import isnan, nan

import pandas as pd
import pytest
from omegaconf import OmegaConf

from tabmem.data import dataset_specs, load_dataset
from tabmem.errors import ConfigError
from tabmem.lab.ground_truth import siblings
from tabmem.lab.plan import make_plan
from tabmem.lab.slices import Slices, load_slices, write_slices

SECTION = {"source": "iris", "rows": 20, "count": 3, "start": 100}


def test_parts_are_consecutive_rows_with_the_header_exactly_as_in_the_file():
    iris = load_dataset(dataset_specs()["iris"])
    parts = Slices("iris", 20, 3, 90).texts(iris)
    assert list(parts) == ["iris-part1", "iris-part2", "iris-part3"]
    for k, text in enumerate(parts.values()):
        lines = text.split(iris.newline)
        assert lines[0] == iris.header and lines[-1] == ""
        assert lines[1:-1] == iris.rows[90 + 20 * k : 110 + 20 * k]
    with pytest.raises(ConfigError, match="need 60 rows of 'iris' from row 100, and it has 150"):
        Slices("iris", 20, 3, 100).texts(iris)  # 100 + 60 > 150
    assert iris.n_rows == 150


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({**SECTION, "source": "nope"}, "unknown source dataset 'nope'"),
        ({**SECTION, "rows": 1}, "rows >= 2, count >= 2 and start >= 0"),
        ({**SECTION, "count": 1}, "rows >= 2, count >= 2 and start >= 0"),
    ],
)
def test_a_bad_slices_section_is_one_sentence(section, message):
    with pytest.raises(ConfigError, match=message):
        load_slices(section)


def test_written_parts_load_as_datasets_of_the_source_family(tmp_path):
    slices = load_slices({**SECTION, "start": 0})
    specs = write_slices(slices, tmp_path)
    assert list(specs) == slices.names
    written = OmegaConf.load(tmp_path / "conf" / "dataset" / "iris-part2.yaml")
    assert written.name == "iris-part2" and written.file is None
    assert written.description.startswith("Data rows 21-40 of iris: ")
    part = load_dataset(specs["iris-part2"])
    iris = load_dataset(dataset_specs()["iris"])
    assert part.rows == iris.rows[20:40] and part.header == iris.header
    assert part.spec.family_name == iris.spec.family_name  # never each other's few-shot example
    assert part.spec.target == iris.spec.target


def test_parts_join_the_pool_and_the_source_is_never_other_text():
    cfg = {
        "name": "t",
        "seed": 0,
        "pool": ["wine"],
        "slices": {**SECTION, "start": 0, "count": 5},
        "n_planted": 3,
        "repetitions": [4, 1],
        "checkpoints": [0, 4],
        "stream": {"sources": ["tables"]},
    }
    plan = make_plan(cfg)
    assert set(plan.planted) | set(plan.held_out) == {"wine", *plan.slices.names}
    assert sorted(plan.planted.values()) == [1, 4, 4]
    assert "iris" not in plan.stream.tables and "wine" not in plan.stream.tables
    named = make_plan({**cfg, "plantable": ["wine"], "n_planted": 6 - 1})
    assert "wine" in named.planted  # the named plantable files and every part


def test_a_parts_unread_control_is_its_never_read_siblings_on_the_same_checkpoint():
    truth = pd.DataFrame(
        {
            "passes": [4, 4, 4, 4, 0, 0],
            "dataset": ["p1", "p2", "p3", "p4", "p1", "p2"],
            "loss": [0.8, 0.9, 1.0, 1.1, 2.5, 2.5],
            "loss_drop": [1.7, 1.6, 1.5, 1.4, 0.0, 0.0],
            "unread_loss": [nan] * 6,
            "unread_loss_drop": [nan] * 6,
            "learned_over_unread": [nan] * 6,
        }
    )
    out = siblings(truth, ["p3", "p4"])
    first = out.iloc[0]  # p1 read: against p3 and p4 after 4 passes
    assert first["unread_loss"] == pytest.approx(1.05)
    assert first["learned_over_unread"] == pytest.approx(1.7 - 1.45)
    assert out.iloc[2]["learned_over_unread"] == pytest.approx(1.5 - 1.4)  # p3: p4 alone
    assert isnan(out.iloc[4]["learned_over_unread"])  # no never-read part measured at p0
