"""What a change to a lab setting makes the lab do again: retrain, re-measure or re-evaluate."""

from __future__ import annotations

from tabmem.lab.plan import load_lab_config
from tabmem.lab.run import ASKING, MEASURING, fingerprint


def stamps(*overrides: str) -> tuple[str, str, str]:
    """The checkpoints', the ground truth's and the cells' fingerprints of the standard lab."""
    cfg = load_lab_config("standard", overrides)
    return (
        fingerprint(cfg, (*ASKING, *MEASURING)),
        fingerprint(cfg, ASKING),
        fingerprint(cfg),
    )


def test_a_changed_evaluation_keeps_the_checkpoints_and_their_ground_truth():
    trained, measured, cells = stamps()
    asked = stamps("evaluation.overrides=[test.row_completion.n_queries=50]")
    assert asked[:2] == (trained, measured)
    assert asked[2] != cells


def test_a_changed_ground_truth_is_measured_again_on_the_same_checkpoints():
    trained, measured, cells = stamps()
    remeasured = stamps("ground_truth.rows=30")
    assert remeasured[0] == trained
    assert remeasured[1] != measured and remeasured[2] != cells


def test_a_changed_training_or_plan_retrains():
    base = stamps()
    for override in ("training.learning_rate=1e-4", "seed=7", "repetitions=[24,12,6,3]"):
        changed = stamps(override)
        assert all(new != old for new, old in zip(changed, base, strict=True)), override


def test_the_fingerprint_is_the_same_for_the_same_setting():
    assert stamps() == stamps()
    assert len(stamps()[0]) == 16
