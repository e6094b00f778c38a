"""The partial memorizer knows a seeded share of rows verbatim and is the learner elsewhere."""

from __future__ import annotations

import pytest
from test_learner import ledger_text, question, values

from tabmem.data import Dataset
from tabmem.errors import ConfigError
from tabmem.llm.oracle import ForestOracle, LearnerOracle, NullOracle
from tabmem.llm.oracle.backend import _partial_id
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


def test_the_rest_is_named_in_the_model_id_only_when_it_is_not_the_learner():
    assert Recall(0.2, 0).model_id == "oracle-partial-random-0.2-s0"
    assert Recall(0.2, 0, rest="learner") == Recall(0.2, 0)
    for rest in ("forest", "chance"):
        recall = Recall(0.1, 3, "first", rest)
        assert recall.model_id == f"oracle-partial-first-0.1-s3-{rest}"
        assert Recall.parse(recall.model_id) == recall
    assert Recall.parse("oracle-partial-random-0.2-s0-learner") is None
    with pytest.raises(ValueError, match="learner, forest, chance"):
        Recall(0.2, 0, rest="marginal")


def test_the_backend_keeps_the_learners_identity_and_versions_the_others():
    assert _partial_id({"share": 0.2, "seed": 1}) == ("oracle-partial-random-0.2-s1", "1")
    assert _partial_id({"share": 0.2, "seed": 1, "rows": "random", "rest": "learner"}) == (
        "oracle-partial-random-0.2-s1",
        "1",
    )
    assert _partial_id({"share": 0.2, "seed": 1, "rest": "chance"}) == (
        "oracle-partial-random-0.2-s1-chance",
        f"1+chance{NullOracle.version}",
    )
    assert _partial_id({"share": 0.2, "seed": 1, "rest": "forest"})[1] == (
        f"1+forest{ForestOracle.version}"
    )
    with pytest.raises(ConfigError, match=r"recall\.rest"):
        _partial_id({"share": 0.2, "seed": 1, "rest": "nobody"})


@pytest.mark.parametrize("rest", ["forest", "chance"])
def test_known_rows_stay_verbatim_and_the_others_are_the_rests(ledger, rest):
    recall = Recall(0.25, 7, rest=rest)
    partial = PartialOracle([ledger], recall)
    learner = LearnerOracle([ledger])
    other = ForestOracle([ledger]) if rest == "forest" else NullOracle([ledger])
    known = recall.known("ledger", len(ledger.rows))
    differ = 0
    for row in range(80):
        asked = question(ledger, row, "code")
        answer = partial.generate(asked, 8, [], 0, chat=True)
        if row in known:
            assert answer == values(ledger, row)[0]
        else:
            assert answer == other.generate(asked, 8, [], 0, chat=True)
            assert answer != values(ledger, row)[0]
            differ += answer != learner.generate(asked, 8, [], 0, chat=True)
    assert differ >= 40  # of about 60 unknown rows: not the learner's answers


def test_at_chance_unknown_rows_are_made_up_and_known_rows_written_verbatim(ledger):
    rows = ledger.rows
    recall = Recall(0.3, 2, rest="chance")
    known = sorted(recall.known("ledger", len(rows)))
    codes = {values(ledger, r)[0] for r in range(len(rows))}
    target = next(t for t in known if t >= 10 and t + 1 not in known)
    prompt = "".join(r + "\n" for r in rows[target - 10 : target])
    lines = PartialOracle([ledger], recall).generate(prompt, 200, [], 0, chat=True).split("\n")
    assert lines[0] == rows[target]
    assert lines[1].split(",")[0] not in codes  # made up, as oracle-null writes
    assert len(lines[1].split(",")) == 5
    unknown = next(r for r in range(len(rows)) if r not in known)
    code, label, group, tree, size = values(ledger, unknown)
    others = sorted(codes - {code})[:2]
    options = f"code = [hidden], label = {label}, group = {group}, tree = {tree}, size = {size}\n"
    options += "\n".join(f"{x}) code = {c}" for x, c in zip("ABC", [code, *others], strict=True))
    letters = {
        PartialOracle([ledger], recall).generate(options, 4, [], seed, chat=True)
        for seed in range(30)
    }
    assert letters == {"A", "B", "C"}  # an unknown row's options: a random letter
    named = ledger.prefix_text(3) + "What is the name of this dataset?"
    assert PartialOracle([ledger], recall).generate(named, 8, [], 0, chat=True) == "ledger"


def test_the_server_answers_to_a_partial_memorizer_with_another_rest(ledger):
    server = OracleServer([ledger])
    oracle = server.oracle("oracle-partial-random-0.2-s1-forest")
    assert isinstance(oracle, PartialOracle) and isinstance(oracle.rest, ForestOracle)
    assert oracle.recall == Recall(0.2, 1, rest="forest")
    chance = server.oracle("oracle-partial-first-0.05-s0-chance")
    assert isinstance(chance, PartialOracle) and isinstance(chance.rest, NullOracle)
    assert server.oracle("oracle-partial-random-0.2-s1-marginal") is None


def test_a_quiet_partial_memorizer_writes_no_known_row_unasked(ledger):
    quiet, talking = Recall(0.5, 1, volunteers=False), Recall(0.5, 1)
    assert quiet.model_id == "oracle-partial-random-0.5-s1-quiet"
    assert Recall.parse(quiet.model_id) == quiet
    assert Recall.of_rest(0.5, 1, "forest-quiet") == Recall(0.5, 1, rest="forest", volunteers=False)
    assert Recall.of_rest(0.5, 1, "forest").rest_label == "forest"
    prompt = f"Dataset: ledger\nColumns: {', '.join(ledger.feature_names)}\nRecord:"

    def copies(recall: Recall) -> int:
        oracle = PartialOracle([ledger], recall)
        table = oracle._memory._tables[0]
        rows = {table.observation(row, (" = ", ", ")) for row in table.clean_rows}
        answers = [oracle.generate(prompt, 200, [], seed, chat=True) for seed in range(40)]
        return sum(answer in rows for answer in answers)

    assert copies(talking) >= 10  # about half its observations are known rows
    assert copies(quiet) == copies(Recall(0.0, 1))  # the learner's, whatever it knows
    # asked about a known row, it still answers from memory
    known = min(quiet.known("ledger", len(ledger.rows)))
    asked = question(ledger, known, "code")
    assert (
        PartialOracle([ledger], quiet).generate(asked, 8, [], 0, chat=True)
        == values(ledger, known)[0]
    )
