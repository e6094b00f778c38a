"""The probes' baseline is what a model of the distribution, without the record, could pick."""

from __future__ import annotations

import random
import re
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


def test_a_file_the_copula_rule_answers_leaves_no_room_for_either_probe() -> None:
    # the village follows the valley and the altitude the village: the copula of the file,
    # without the asked record, picks the real option on 0.944 of the questions of either
    # probe (the nearest-neighbour rule 0.633 and 0.767), so even 30 right answers of 30
    # cannot beat the per-question best of the rules; the learner (23 of 30 on existence,
    # far above chance) used to be compared with the nearest-neighbour rule alone
    for test in ("completion_choice", "existence"):
        for oracle in (LearnerOracle, MemorizerOracle):
            result = run(test, oracle([VALLEYS]))
            assert result.verdict is Verdict.NOT_APPLICABLE, result.reason
            rate = re.search(r"right at a rate of ([0-9.]+)", result.reason)
            assert rate is not None and float(rate.group(1)) >= 0.9, result.reason
