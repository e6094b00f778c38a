"""The likelihood suite on real cells in this process: a tiny random Llama run by the
transformers backend against another as its reference (no download), and a model without
log-probabilities, whose cells say why they cannot decide."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import tabmem

pytest.importorskip("torch")
pytest.importorskip("transformers")

from unit.tiny_model import save_tiny_model

QUIET = {"progress": False, "show_queries": False, "quiet": True}
TESTS = ("min_k_prob", "reference_ratio", "zlib_ratio", "min_k_plus_plus", "likelihood_inference")
SMALL = {f"test.{t}.n_rows": 20 for t in TESTS}


def tiny_config(folder: Path, name: str) -> dict:
    return {
        "name": name,
        "backend": "transformers",
        "weights": {"path": str(folder)},
        "device": "cpu",
        "dtype": "float32",
        "batch_size": 8,
        "prompt_form": "completion",
        "context_window": 512,
        "max_concurrency": 8,
    }


def by_test(results) -> dict:
    return {r.test: r for r in results}


def test_the_suite_scores_a_real_model_against_a_reference_and_joins_the_dataset_verdict(
    tmp_path,
):
    tested = tiny_config(save_tiny_model(tmp_path / "tested", seed=0), "tiny-tested")
    reference = tiny_config(save_tiny_model(tmp_path / "reference", seed=1), "tiny-reference")
    reference_yaml = tmp_path / "tiny-reference.yaml"
    reference_yaml.write_text(yaml.safe_dump(reference))
    model = {f"model.{k}": v for k, v in tested.items() if k != "weights"}
    results = tabmem.run(
        "smollm2-135m-hf",
        "iris",
        "likelihood",
        outputs_dir=str(tmp_path / "out"),
        **{"+model.weights.path": tested["weights"]["path"], **model, **SMALL},
        **{
            f"test.{t}.reference_models": [str(reference_yaml)]
            for t in ("reference_ratio", "likelihood_inference")
        },
        **QUIET,
    )
    found = by_test(results)
    assert set(found) == {*TESTS, "dataset"}
    for name in ("reference_ratio", "zlib_ratio", "min_k_plus_plus"):
        result = found[name]
        assert result.status == "finished", result.message
        # random weights read no file: whatever they prefer, it is not iris's rows
        assert result.verdict in {"no_evidence", "ambiguous"}, result.reason
        assert result.n_queries == 20 and result.metrics["pairs_scored"] == 20
        assert 0 < result.p_value <= 1
        # the blind check: the best data-only rule's rate on the same pairs, a coin flip at least
        assert result.baseline == pytest.approx(max(0.5, result.metrics["data_only_rate"]))
        assert "baseline_nearest_neighbours" in result.metrics
    learned = found["likelihood_inference"]
    assert learned.status == "finished", learned.message
    assert learned.verdict in {"no_evidence", "ambiguous"}, learned.reason
    assert learned.metrics["pairs_scored"] == 20 and 0 < learned.p_value <= 1
    assert "weight_reference_ratio" in learned.metrics  # the reference's ratio: a feature
    ratio = found["reference_ratio"]
    assert ratio.metrics["mean_ratio_real"] != 0  # two different models: ratios are not 0
    queries = ratio.queries  # each pair's figures, as queries.json holds them
    assert len(queries) == 20
    assert list(queries["ratio_real"]) == pytest.approx(
        list(queries["loglik_real"] - queries["reference_loglik_real"])
    )
    # the dataset verdict combines every test of rows seen that ran, the new ones with them
    verdict = found["dataset"]
    assert verdict.scope == "dataset"
    assert verdict.verdict in {"no_evidence", "ambiguous"}, verdict.reason
    assert verdict.n_queries == 5  # the tests it combined
    for name in ("reference_ratio", "zlib_ratio", "min_k_plus_plus", "likelihood_inference"):
        assert verdict.metrics[f"p_value.{name}"] == pytest.approx(found[name].p_value)


def test_a_model_without_logprobs_gets_the_reason_in_every_cell(tmp_path):
    results = tabmem.run(
        "oracle-memorizer", "iris", "likelihood", outputs_dir=str(tmp_path), **QUIET
    )
    found = by_test(results)
    for name in TESTS:
        assert found[name].verdict == "not_applicable"
        assert "gives no log-probabilities" in found[name].reason
    assert found["dataset"].verdict == "not_applicable"
