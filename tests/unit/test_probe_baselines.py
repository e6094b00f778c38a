"""The probes' baseline is what a model of the distribution, without the record, could pick."""

from __future__ import annotations

import random
from pathlib import Path

import yaml
from test_probes_tests import Backend

from tabmem.battery.base import TestContext, get_test
from tabmem.data import Dataset, DatasetSpec
from tabmem.llm.client import LanguageModel
from tabmem.llm.oracle import LearnerOracle, MemorizerOracle
from tabmem.results import Verdict

ROOT = Path(__file__).resolve().parents[2]


def valleys_text(n_rows: int = 240) -> str:
    """Six valleys of six villages each (the village follows the valley) and an altitude that
    follows the village."""
    rng = random.Random(4)
    lines = ["valley,village,altitude"]
    for _ in range(n_rows):
        valley = rng.randrange(6)
        village = rng.randrange(6)
        altitude = 300 + 200 * valley + 20 * village + rng.randint(0, 9)
        lines.append(f"V{valley},V{valley}-{village},{altitude}")
    return "\n".join(lines) + "\n"


VALLEYS = Dataset(spec=DatasetSpec(name="valleys"), path=Path("v.csv"), text=valleys_text())


def run(test: str, oracle) -> object:
    params = yaml.safe_load((ROOT / "conf" / "test" / f"{test}.yaml").read_text())
    backend = Backend(
        lambda prompt, p, chat: oracle.generate(prompt, p.max_tokens, p.stop, p.seed, chat=chat)
    )
    model = LanguageModel(backend, "probe", show_progress=False)
    return get_test(test)(TestContext(VALLEYS, model, {**params, "n_queries": 30}, seed=0))


def test_the_learner_beats_chance_but_not_the_data_only_rule() -> None:
    result = run("completion_choice", LearnerOracle([VALLEYS]))
    assert result.rate >= 0.6  # far above chance 0.2: evidence under the old rule
    assert result.metrics["chance_p_value"] < 0.001
    assert result.metrics["data_rule_rate"] >= 0.6
    assert result.verdict is Verdict.NO_EVIDENCE, result.reason


def test_the_memorizer_still_beats_it() -> None:
    result = run("completion_choice", MemorizerOracle([VALLEYS]))
    assert result.rate >= 0.9
    assert result.verdict is Verdict.EVIDENCE, result.reason


def test_existence_too_compares_with_the_record_the_rule_picks() -> None:
    learned = run("existence", LearnerOracle([VALLEYS]))
    assert learned.metrics["chance_p_value"] < 1e-9  # 23 of 30: far above chance
    assert learned.rate <= learned.baseline  # and no better than the rule
    assert learned.verdict is Verdict.NO_EVIDENCE, learned.reason
    recalled = run("existence", MemorizerOracle([VALLEYS]))
    assert recalled.rate == 1.0
    assert recalled.verdict is Verdict.EVIDENCE, recalled.reason
