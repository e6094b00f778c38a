"""The forest scorer gives a log-probability per field of a CSV line, from forests that never
held the row at the line's place: the real row and the twin row read in its place are scored
by one rule, whatever the real row's values."""

from __future__ import annotations

import math
import random

import pytest

from tabmem.api import compose_config
from tabmem.calibrate.cells import OracleObjectBackend, run_shared
from tabmem.calibrate.run import inapplicable_reasons
from tabmem.data import Dataset
from tabmem.jobs import test_plan as plan_of
from tabmem.llm.base import GENERATE, LOGPROBS, TOKEN_MOMENTS, capabilities_of
from tabmem.llm.client import LanguageModel
from tabmem.llm.oracle import ORACLES, ForestOracle, forest
from tabmem.llm.oracle.scorer import ScorerOracle
from tabmem.stats.formats import column_width

PLACE = 100
"""The row scored: ``rows`` puts there a line whose every value recurs before it."""
HEADER = "group,size,weight,note"


@pytest.fixture(autouse=True)
def few_trees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten trees a forest: what is tested holds for any forest, and fits stay fast."""
    monkeypatch.setattr(forest, "TREES", 10)


def rows(n_rows: int = 120, seed: int = 5) -> list[str]:
    """Distinct lines of a group, a size that follows it (one decimal), a weight and a note,
    on few values each, so that values recur; the line at ``PLACE`` is one whose every value
    is in a line before it."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n_rows:
        group = rng.choice("ABC")
        size = {"A": 10, "B": 20, "C": 30}[group] + rng.randint(-3, 3) + rng.choice((0, 0.5))
        line = f"{group},{size:.1f},{rng.randint(50, 60)},{rng.choice(('dry', 'wet'))}"
        if line not in out and (len(out) != PLACE or recurs(line, out)):
            out.append(line)
    return out


def recurs(line: str, before: list[str]) -> bool:
    """Whether every value of ``line`` is in some line of ``before``, in its column."""
    split = [other.split(",") for other in before]
    return all(any(o[j] == v for o in split) for j, v in enumerate(line.split(",")))


def text_of(lines: list[str]) -> str:
    return "\n".join([HEADER, *lines]) + "\n"


@pytest.fixture
def files(csv_dataset) -> tuple[Dataset, Dataset, str, str]:
    """The file, the same file with the row at ``PLACE`` replaced by a line no row is (its
    twin), the real row and the twin line; every value of both lines recurs before
    ``PLACE``, so the two files differ in that row alone."""
    lines = rows()
    real = lines[PLACE]
    twin = ",".join((lines[3].split(",")[0], lines[3].split(",")[1], lines[7].split(",")[2], "wet"))
    if twin in lines:
        twin = twin.removesuffix("wet") + "dry"
    assert twin not in lines
    assert recurs(real, lines[:PLACE]) and recurs(twin, lines[:PLACE])
    changed = [*lines[:PLACE], twin, *lines[PLACE + 1 :]]
    first = csv_dataset(text_of(lines))
    second = csv_dataset(text_of(changed))
    return first, second, real, twin


def context(dataset: Dataset, before: int = 5) -> str:
    """The header and the ``before`` rows before ``PLACE``, as the likelihood tests read them."""
    nl = dataset.newline
    return dataset.header + nl + "".join(r + nl for r in dataset.rows[PLACE - before : PLACE])


def test_the_scorer_is_served_under_its_name_and_scores_text() -> None:
    assert ORACLES["oracle-scorer"] is ScorerOracle
    assert capabilities_of(ScorerOracle([])) == {GENERATE, LOGPROBS, TOKEN_MOMENTS}
    assert capabilities_of(ForestOracle([])) == {GENERATE}


def test_one_log_probability_per_field_and_none_for_what_it_cannot_read(files) -> None:
    dataset, _, real, twin = files
    scorer = ScorerOracle([dataset])
    ctx = context(dataset)
    assert scorer.place(scorer._tables[0], ctx) == PLACE
    assert scorer.place(scorer._tables[0], dataset.header + "\n") is None
    for line in (real, twin):
        logprobs = scorer.logprobs(line, ctx)
        assert logprobs is not None and len(logprobs) == 4
        assert all(math.isfinite(v) and v <= 0 for v in logprobs)
        [triples] = scorer.logprob_moments_batch([(ctx, line)])
        assert [t[0] for t in triples] == logprobs
        assert all(math.isfinite(mean) and sd >= 0 for _, mean, sd in triples)
    assert scorer.logprobs("A,10.0,55", ctx) is None  # a field short
    assert scorer.logprobs(real, "a,b,c\n1,2,3\n") is None  # no file it knows
    assert column_width(["5.1", "5", "4.25"]) == pytest.approx(0.01)
    assert column_width(["39", "50"]) == 1.0


def test_the_row_at_the_place_never_shapes_its_score(files) -> None:
    """The file and the file with the real row replaced by the twin line: the real row's
    scores do not move, and the twin line gets the same scores as a twin (in the first file)
    and as the real row (in the second): one rule, which never read the row at the place."""
    first, second, real, twin = files
    one, other = ScorerOracle([first]), ScorerOracle([second])
    ctx = context(first)
    assert ctx == context(second)
    assert one.logprobs(real, ctx) == other.logprobs(real, ctx)
    assert one.logprobs(twin, ctx) == other.logprobs(twin, ctx)
    assert one.logprobs(real, ctx) != one.logprobs(twin, ctx)


def test_the_in_process_backend_scores_only_where_its_oracle_does(files) -> None:
    dataset, _, real, _ = files
    scorer = OracleObjectBackend(ScorerOracle([dataset]), "oracle-scorer")
    forest = OracleObjectBackend(ForestOracle([dataset]), "oracle-forest")
    assert capabilities_of(scorer) == {GENERATE, LOGPROBS, TOKEN_MOMENTS}
    assert capabilities_of(forest) == {GENERATE}
    assert capabilities_of(OracleObjectBackend) == {GENERATE}
    assert scorer.logprobs(real, context(dataset)) is not None
    reasons = inapplicable_reasons()
    assert {"min_k_prob", "zlib_ratio", "min_k_plus_plus", "likelihood_inference"} <= set(reasons)


def test_a_log_probability_test_runs_on_the_scorer_and_not_on_the_forest(files) -> None:
    dataset = files[0]
    fewer = ["test=zlib_ratio", "test.n_rows=30", "test.n_permutations=99"]
    params = dict(plan_of(compose_config([*fewer, "test.order_permutations=19"]).test))
    params = params["zlib_ratio"]
    models = [
        LanguageModel(OracleObjectBackend(cls([dataset]), cls.model_name), cls.model_name)
        for cls in (ScorerOracle, ForestOracle)
    ]
    scored, text_only = run_shared("zlib_ratio", dataset, params, 0, models)
    assert str(scored.verdict) != "not_applicable", scored.reason
    assert scored.n_queries == 30
    assert str(text_only.verdict) == "not_applicable"
