"""The lab's ground truth on the real SmolLM2-135M base weights and iris (slow: CPU seconds)."""

from __future__ import annotations

import math
import time

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("transformers")

from tabmem.data import dataset_specs, load_dataset  # noqa: E402
from tabmem.lab.ground_truth import measure_checkpoint  # noqa: E402
from tabmem.lab.models import base_model_config, base_weights  # noqa: E402


def test_smollm2_base_on_iris_has_a_sane_loss_and_writes_few_rows_back(tmp_path):
    weights = base_weights(base_model_config("smollm2-135m-hf"), tmp_path / "weights")
    iris = load_dataset(dataset_specs()["iris"])
    started = time.monotonic()
    truth = measure_checkpoint(weights, {"iris": iris.text}, block_size=256, device="cpu")
    seconds = time.monotonic() - started
    found = truth["iris"]
    print(f"iris on the base model: {found}, share {found.share:.2f}, {seconds:.0f} s")
    assert math.isfinite(found.loss) and 0.1 < found.loss < 5.0  # nats per token
    assert found.blocks == math.ceil((found.tokens + found.blocks) / 256)  # every block scored
    assert found.rows == 20
    assert 0.0 <= found.share <= 1.0
    assert seconds < 1200  # about 85 s on 2 idle cores; 499 s beside other jobs
