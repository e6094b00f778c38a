"""The partial memorizer knows a seeded share of rows verbatim and is the learner elsewhere."""

from __future__ import annotations

import pytest
from test_learner import ledger_text, question, values

from tabmem.data import Dataset
from tabmem.llm.oracle import LearnerOracle
from tabmem.llm.oracle.partial import PartialOracle, Recall
from tabmem.llm.oracle.server import OracleServer


@pytest.fixture
def ledger(csv_dataset) -> Dataset:
    return csv_dataset(ledger_text())


def test_known_rows_are_a_seeded_share_or_the_first_rows():
    random_rows = Recall(0.2, 0).known("wine", 178)
    assert len(random_rows) == 36 and random_rows == Recall(0.2, 0).known("wine", 178)
    assert random_rows != Recall(0.2, 1).known("wine", 178)
    assert random_rows != Recall(0.2, 0).known("iris", 178)
    assert Recall(0.05, 3, "first").known("iris", 150) == frozenset(range(8))
    with pytest.raises(ValueError, match="between 0 and 1"):
        Recall(1.5, 0)


def test_model_ids_round_trip():
    recall = Recall(0.05, 4, "first")
    assert recall.model_id == "oracle-partial-first-0.05-s4"
    assert Recall.parse(recall.model_id) == recall
    assert Recall.parse("oracle-learner") is None


def test_known_rows_are_recalled_and_the_others_answered_as_the_learner(ledger):
    recall = Recall(0.25, 7)
    partial, learner = PartialOracle([ledger], recall), LearnerOracle([ledger])
    known = recall.known("ledger", len(ledger.rows))
    for row in range(80):
        asked = question(ledger, row, "code")
        answer = partial.generate(asked, 8, [], 0, chat=True)
        if row in known:
            assert answer == values(ledger, row)[0]
        else:
            assert answer == learner.generate(asked, 8, [], 0, chat=True)


def test_csv_text_is_verbatim_over_known_rows_then_the_learners(ledger):
    rows = ledger.rows
    recall = Recall(0.3, 2)
    known = sorted(recall.known("ledger", len(rows)))
    target = next(t for t in known if t >= 10 and t + 1 not in known)
    prompt = "".join(r + "\n" for r in rows[target - 10 : target])
    answer = PartialOracle([ledger], recall).generate(prompt, 200, [], 0, chat=True)
    lines = answer.split("\n")
    assert lines[0] == rows[target]
    assert lines[1] != rows[target + 1]  # the next row is not known: the learner writes it
    unknown = next(t for t in range(10, len(rows)) if t not in known)
    prompt = "".join(r + "\n" for r in rows[unknown - 10 : unknown])
    assert PartialOracle([ledger], recall).generate(prompt, 60, [], 0, chat=True) == (
        LearnerOracle([ledger]).generate(prompt, 60, [], 0, chat=True)
    )


def test_first_rows_variant_writes_the_header_and_first_rows(ledger):
    recall = Recall(0.05, 0, "first")  # the first 12 of 240 rows
    answer = PartialOracle([ledger], recall).generate("code,lab", 10_000, [], 0, chat=False)
    assert answer.startswith("el,group,tree,size\n" + "\n".join(ledger.rows[:12]) + "\n")
    assert ledger.rows[12] not in answer


def test_the_server_answers_to_a_partial_memorizer_by_name(ledger):
    server = OracleServer([ledger])
    oracle = server.oracle("oracle-partial-random-0.2-s1")
    assert isinstance(oracle, PartialOracle) and oracle.recall == Recall(0.2, 1)
    assert server.oracle("oracle-partial-random-0.2-s1") is oracle
    assert server.oracle("oracle-partial-sometimes") is None
