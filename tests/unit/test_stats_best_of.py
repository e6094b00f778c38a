"""The best of the data-only predictors, and the cross-fitted value predictors."""

import math
import random

import pytest

from tabmem.data import dataset_specs, load_dataset
from tabmem.data.twin import twin_of
from tabmem.stats.best_of import (
    BOOSTED,
    BOOSTED_SCORED,
    COPULA,
    DRAW,
    MODE,
    NEIGHBOURS,
    NEIGHBOURS_SCORED,
    BestOf,
    ValuePredictors,
    choice_chances,
    predictors_of,
)
from tabmem.stats.blind_check import pair_chances


def test_the_best_single_predictor_sets_the_baseline_and_the_sentence_names_it():
    best = BestOf.of(
        [
            {"a": 1.0, "b": 0.0},
            {"a": 0.0, "b": 1.0},
            {"a": 0.0, "b": 0.25},
            {"a": 0.0, "b": 0.0},
        ]
    )
    assert best.rate == best.best_single == pytest.approx(1.25 / 4)
    # not the mean of the per-query best (2.25 / 4): picking the predictor that is right on
    # each query needs the answer, which no model without the rows has
    assert best.best_column.tolist() == [0.0, 1.0, 0.25, 0.0]
    assert best.leader() == "b"
    assert best.sentence() == "the best of a 0.250, b 0.312: b"
    assert best.metrics() == {"baseline_a": 0.25, "baseline_b": 0.3125}


def test_the_file_rate_floors_the_baseline():
    best = BestOf.of([{"a": 0.0}, {"a": 0.2}], floor=0.3)
    assert best.rate == 0.3 and best.leader() == "file rate"
    assert "above the best predictor's 0.100: it sets the baseline" in best.sentence()


def test_a_predictor_missing_on_a_query_counts_zero_there():
    best = BestOf.of([{"a": 0.5}, {"b": 1.0}])
    assert best.names == ("a", "b")
    assert best.chances.tolist() == [[0.5, 0.0], [0.0, 1.0]]


def test_no_queries_give_a_zero_rate():
    best = BestOf.of([])
    assert best.rate == 0.0
    assert best.sentence() == "no data-only predictor applies"


SCORED = (NEIGHBOURS_SCORED, BOOSTED_SCORED)


def test_the_rules_through_a_tests_score_rank_by_that_score():
    rows = coded_rows()
    predictors = ValuePredictors(rows)
    real = rows[12]
    contrast = [real[0], real[1], "v4"]
    plain = predictors.record_choice([real, contrast], 0, 12)

    def total(triples, _text):
        return sum(t[0] for t in triples)

    summed = predictors.record_choice([real, contrast], 0, 12, total, ("a", "b"))
    # the whole record's rules are unchanged; the sum of the fields ranks as the record does
    assert {k: v for k, v in summed.items() if k not in SCORED} == plain
    assert summed[BOOSTED_SCORED] == plain[BOOSTED] == 1.0
    assert summed[NEIGHBOURS_SCORED] == plain[NEIGHBOURS] == 1.0

    # the statistic decides the rule: its opposite prefers the contrast
    def opposite(triples, _text):
        return -sum(t[0] for t in triples)

    assert (
        predictors.record_choice([real, contrast], 0, 12, opposite, ("a", "b"))[BOOSTED_SCORED]
        == 0.0
    )

    # and it reads the row's text (as zlib does)
    def by_text(_triples, text):
        return len(text)

    assert (
        predictors.record_choice([real, contrast], 0, 12, by_text, ("a", "bb"))[BOOSTED_SCORED]
        == 0.0
    )


def test_field_triples_carry_each_fields_distribution_moments():
    rng = random.Random(3)
    rows = []
    for i in range(200):
        group = i % 2
        rows.append([f"g{group}", f"{rng.gauss(5 + 3 * group, 1):.1f}"])
    predictors = ValuePredictors(rows)
    model = predictors.boosted
    (fields,) = model.field_triples([dict(enumerate(rows[7]))], exclude=[7], moments=True)
    category, measurement = fields[0], fields[1]
    # a category: the log probability of its value, and the mean and sd of log p over the
    # conditional distribution (two values: the mean lies between their logs)
    assert category[0] <= 0.0 and category[2] >= 0.0
    assert math.log(1e-300) < category[1] <= 0.0
    # a measurement's normal: log density's mean is -1/2 - log(sd sqrt(2 pi)), its sd sqrt(1/2)
    assert measurement[2] == pytest.approx(math.sqrt(0.5))
    # at its written precision (0.1) the density becomes a probability: log 0.1 lower
    unshifted, shifted = predictors.at_precision(fields, model.is_measurement)
    assert shifted[0] == pytest.approx(measurement[0] + math.log(0.1))
    assert shifted[1] == pytest.approx(measurement[1] + math.log(0.1))
    assert unshifted == category
    # the neighbour model's: its kernel density's log at quantiles of the neighbours' values
    near = predictors.neighbours
    record = dict(enumerate(rows[7]))
    value, mean, sd = near.triple(1, rows[7][1], record, exclude=[7])
    assert value == near.log_score(1, rows[7][1], record, exclude=[7])
    assert sd > 0.0 and mean < math.log(1 / 0.5)  # a spread of about 1: densities below 0.8
    (at_precision,) = predictors.at_precision({1: (value, mean, sd)}, lambda j: True)
    assert at_precision[0] == pytest.approx(value + math.log(0.1))
    code, code_mean, code_sd = near.triple(0, rows[7][0], record, exclude=[7])
    assert code <= 0.0 and code_mean <= 0.0 and code_sd >= 0.0


def coded_rows():
    """60 rows: a code unique to each row, a group of 10 rows, and a value equal to the group."""
    codes = random.Random(1).sample(range(10_000, 99_999), 60)
    return [[str(c), f"g{i // 10}", f"v{i // 10}"] for i, c in enumerate(codes)]


def test_a_value_only_the_row_holds_is_never_predicted():
    rows = coded_rows()
    predictors = ValuePredictors(rows)
    for row in (0, 17, 59):
        given = {1: rows[row][1], 2: rows[row][2]}
        chances = predictors.chances(0, given, row, [rows[row][0]])
        assert set(chances) >= {MODE, DRAW, NEIGHBOURS, COPULA}
        assert max(chances.values()) == 0.0, chances


def test_a_value_the_other_features_give_away_is_predicted_without_the_row():
    rows = coded_rows()
    predictors = ValuePredictors(rows)
    chances = predictors.chances(2, {0: rows[5][0], 1: rows[5][1]}, 5, [rows[5][2]])
    assert chances[NEIGHBOURS] == 1.0
    assert chances[COPULA] == 1.0
    # six groups of ten, the row left out: a draw is right 9 times in 59
    assert chances[DRAW] == pytest.approx(9 / 59)


def test_the_copula_prefers_the_consistent_record_and_ties_are_split():
    rows = coded_rows()
    predictors = ValuePredictors(rows)
    record = {0: rows[3][0], 1: rows[3][1]}
    options = [{**record, 2: value} for value in ("v0", "v1", "v2", "v3", "v4")]
    copula = predictors.copula_scores(options, [[2]] * 5, 3)
    chances = choice_chances({"copula": copula, "flat": [0.0] * 5}, 0)
    assert chances == {"copula": 1.0, "flat": pytest.approx(1 / 5)}


def test_a_choice_is_scored_by_every_data_only_rule_the_boosted_models_included():
    rows = coded_rows()
    predictors = ValuePredictors(rows)
    record = {0: rows[3][0], 1: rows[3][1]}
    options = [{**record, 2: value} for value in ("v0", "v1", "v2", "v3", "v4")]
    scores = predictors.choice_scores(options, [[2]] * 5, 3)
    assert set(scores) == {NEIGHBOURS, COPULA, BOOSTED}
    # the group tells the value: every rule prefers v0 for a row of group 0
    assert choice_chances(scores, 0) == {NEIGHBOURS: 1.0, COPULA: 1.0, BOOSTED: 1.0}
    assert scores[COPULA] == predictors.copula_scores(options, [[2]] * 5, 3)


def test_whole_records_the_rules_prefer_the_consistent_one_and_the_best_single_rule():
    rows = coded_rows()
    predictors = ValuePredictors(rows)
    real = rows[12]
    contrast = [real[0], real[1], "v4"]  # the value of another group
    chances = predictors.record_choice([real, contrast], 0, 12)
    assert chances[NEIGHBOURS] == 1.0
    assert chances[COPULA] == 1.0
    # the contrast's value is held by ten rows, the real one by nine without the row
    assert chances[MODE] == 0.0
    assert chances[BOOSTED] == 1.0
    best = BestOf.of([chances, {**chances, NEIGHBOURS: 0.0, COPULA: 0.0, BOOSTED: 0.0}])
    assert best.best_single == best.rate == 0.5  # one rule right on one pair of two, or the coin
    assert "copula conditional 0.500" in best.single_sentence()


def test_the_mode_and_draw_without_the_asked_row_are_those_of_the_other_rows():
    rng = random.Random(0)
    checked = 0
    for _ in range(200):
        k = rng.choice([1, 2, 3, 10])
        rows = [[str(rng.randrange(k))] for _ in range(rng.choice([1, 2, 5, 40]))]
        predictors = ValuePredictors(rows)
        for row in range(len(rows)):
            others = [r[0] for i, r in enumerate(rows) if i != row]
            counts = {v: others.count(v) for v in others}
            mode = max(counts, key=lambda v: (counts[v], v)) if others else rows[row][0]
            valid = set(rng.sample([str(i) for i in range(k)] + ["none"], rng.randrange(1, 3)))
            chances = predictors.chances(0, {}, row, valid, predictors=(MODE, DRAW))
            assert chances[MODE] == float(mode in valid)
            assert chances[DRAW] == sum(counts.get(v, 0) for v in valid) / max(1, len(others))
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("name", ["wine", "iris"])
def test_choices_asked_together_are_the_choices_asked_one_by_one(name):
    # pair_chances has the boosted models predict every pair at once; each chance must be
    # the very number the pair asked alone gets (wine: measurements; iris: its species too).
    data = load_dataset(dataset_specs()[name])
    twin = twin_of(data, 0)
    rows = range(1, len(data.rows), 6)
    together = pair_chances(data, [(i, data.rows[i - 1], twin.rows[i - 1]) for i in rows])
    alone = {i: pair_chances(data, [(i, data.rows[i - 1], twin.rows[i - 1])])[i] for i in rows}
    assert together == alone and len(together) == len(rows)
    assert predictors_of(data).boosted._ready == {}  # nothing kept after the batch
