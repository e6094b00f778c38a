"""The Python API's parts: cheap import, override syntax, DataFrames as canonical CSV text,
and Python objects as backends."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tabmem.api import compose_config, dataset_overrides, model_overrides, override_value
from tabmem.data.frames import frame_csv_text
from tabmem.errors import ConfigError, DatasetError, ProviderError
from tabmem.llm.base import GenerationParams, Request
from tabmem.llm.client import LanguageModel
from tabmem.llm.python_backend import PythonBackend, prompt_form_of, register

ROOT = Path(__file__).resolve().parents[2]


def test_import_tabmem_loads_neither_hydra_nor_pandas_nor_mlflow() -> None:
    code = "import sys, tabmem; print(sorted({'hydra', 'pandas', 'mlflow'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("file", ["iris.csv", "titanic-train.csv", "adult-train.csv"])
def test_a_frame_read_from_a_shipped_file_is_written_back_as_that_file(file: str) -> None:
    path = ROOT / "data" / file
    assert frame_csv_text(pd.read_csv(path)) == path.read_text(encoding="utf-8")


def test_whole_floats_lose_their_point_and_missing_values_are_empty() -> None:
    frame = pd.DataFrame({"a": [5.0, 0.42, None], "b": ["x, y", "z", "w"]})
    assert frame_csv_text(frame) == 'a,b\n5,"x, y"\n0.42,z\n,w\n'


@pytest.mark.parametrize(
    "value", ["it's", "back\\slash\\", "a 'quoted' \\' mix", "1", "true", "null", "x=y,z"]
)
def test_string_overrides_reach_the_config_unchanged(value: str) -> None:
    cfg = compose_config([f"dataset.description={override_value(value)}"])
    assert cfg.dataset.description == value


def test_other_values_keep_their_type() -> None:
    cfg = compose_config(
        [
            "test=row_completion",
            f"test.n_queries={override_value(3)}",
            f"test.alpha={override_value(0.05)}",
            f"test.few_shot_pool={override_value(['iris', 'wine'])}",
            f"tracking.uri={override_value(None)}",
            f"progress={override_value(False)}",
        ]
    )
    assert cfg.test.n_queries == 3 and cfg.test.alpha == 0.05
    assert list(cfg.test.few_shot_pool) == ["iris", "wine"]
    assert cfg.tracking.uri is None and cfg.progress is False


def test_the_same_frame_is_the_same_dataset_and_an_edited_one_is_not(tmp_path: Path) -> None:
    frame = pd.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    first = dataset_overrides(frame, "mine", tmp_path)
    assert first == dataset_overrides(frame.copy(), "mine", tmp_path)
    edited = frame.assign(y=["a", "b", "d"])
    assert dataset_overrides(edited, "mine", tmp_path) != first
    assert len(list((tmp_path / "datasets").glob("mine-*.csv"))) == 2
    cfg = compose_config(first)
    assert (cfg.dataset.name, cfg.dataset.kind) == ("mine", "tabular")
    assert Path(cfg.dataset.path).read_text() == "x,y\n1,a\n2,b\n3,c\n"


def test_a_csv_path_is_named_by_its_stem_and_hashed(tmp_path: Path) -> None:
    path = tmp_path / "my data.csv"
    path.write_text("a,b\n1,2\n", encoding="utf-8")
    cfg = compose_config(dataset_overrides(str(path), None, tmp_path))
    assert (cfg.dataset.name, cfg.dataset.path) == ("my-data", str(path))
    assert cfg.dataset.sha256 == hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    with pytest.raises(DatasetError, match="neither a config"):
        dataset_overrides(str(tmp_path / "absent.csv"), None, tmp_path)
    with pytest.raises(ConfigError, match="needs a name"):
        dataset_overrides(pd.DataFrame({"a": [1]}), None, tmp_path)


def test_a_lambda_needs_a_name_and_a_config_takes_none() -> None:
    with pytest.raises(ConfigError, match="lambda"):
        model_overrides(lambda prompt: "", None)
    with pytest.raises(ConfigError, match="model_name"):
        model_overrides("oracle-null", "renamed")
    assert model_overrides("oracle-null", None) == ["model=oracle-null"]


class ChatOnly:
    def chat(self, messages, **params):
        return messages[-1]["content"].upper()


class Both(ChatOnly):
    def complete(self, prompt):
        return prompt


def echo_params(prompt: str, max_tokens: int, stop=()) -> str:
    return f"{prompt}|{max_tokens}|{list(stop)}"


def test_prompt_form_follows_the_methods_an_object_has() -> None:
    assert prompt_form_of(ChatOnly()) == "chat"
    assert prompt_form_of(Both()) == "completion"
    assert prompt_form_of(echo_params) == "completion"
    with pytest.raises(ConfigError, match="not a model"):
        prompt_form_of(object())


def test_a_callable_gets_only_the_parameters_it_takes_and_its_answer_is_cut_at_stop() -> None:
    backend = PythonBackend(echo_params, "echo", "m.echo_params")
    params = GenerationParams(max_tokens=7, stop=("]",), seed=3)
    assert backend.complete("p", params) == "p|7|['"
    assert backend.identity == {"provider": "python", "model": "echo", "callable": "m.echo_params"}
    chat = PythonBackend(ChatOnly(), "c", "m.ChatOnly")
    assert chat.chat([{"role": "user", "content": "hi"}], GenerationParams(max_tokens=1)) == "HI"
    with pytest.raises(ProviderError, match="no complete"):
        chat.complete("hi", GenerationParams(max_tokens=1))


def test_a_registered_object_is_built_from_its_config_and_cached_by_identity(tmp_path) -> None:
    from tabmem.llm.cache import ResponseCache
    from tabmem.llm.registry import build_model

    calls = []

    def counting(prompt: str) -> str:
        calls.append(prompt)
        return prompt[::-1]

    callable_name = register(counting, "rev")
    cfg = {"name": "rev", "backend": "python", "callable": callable_name, "prompt_form": "x"}
    cache = ResponseCache(tmp_path / "cache.sqlite")
    requests = [Request(GenerationParams(max_tokens=5), prompt=p) for p in ("ab", "cd", "ab")]
    first = build_model(cfg, cache, tmp_path, show_progress=False).run(requests)
    again = build_model(cfg, cache, tmp_path, show_progress=False).run(requests)
    assert [r.text for r in first] == [r.text for r in again] == ["ba", "dc", "ba"]
    assert calls == ["ab", "cd"]
    assert all(r.cached for r in again)
    with pytest.raises(ConfigError, match="does not hold"):
        build_model({**cfg, "name": "other"}, None, tmp_path)


def test_a_non_string_answer_stops_the_model_and_an_exception_fails_one_query() -> None:
    def numbers(prompt: str) -> int:
        return 4

    def flaky(prompt: str) -> str:
        if prompt == "bad":
            raise ValueError("no")
        return "ok"

    params = GenerationParams(max_tokens=2)
    model = LanguageModel(PythonBackend(numbers, "n", "m.numbers"), "n", show_progress=False)
    answers = model.run([Request(params, prompt=p) for p in ("a", "b")])
    assert all("returned a int" in (r.error or "") for r in answers)
    assert model.stats.model_calls == 1  # the first refusal holds back the rest
    model = LanguageModel(PythonBackend(flaky, "f", "m.flaky"), "f", show_progress=False)
    answers = model.run([Request(params, prompt=p) for p in ("bad", "good")])
    assert "ValueError: no" in answers[0].error and answers[1].text == "ok"


def test_a_frames_missing_values_are_said_once_with_their_columns(tmp_path: Path, capsys) -> None:
    """Issue 56: pandas reads ``n/a`` as missing, and a missing value is written as an empty
    field in the file the model is shown; the run says so, once per frame."""
    import io

    text = "name,age,city\nann,31,Oslo\nbob,n/a,Bergen\ncid,n/a,n/a\n"
    frame = pd.read_csv(io.StringIO(text))
    dataset_overrides(frame, "people", tmp_path)
    dataset_overrides(frame, "people", tmp_path)
    [sentence] = capsys.readouterr().err.strip().splitlines()
    assert sentence.startswith("DataFrame 'people': 3 missing values (age 2, city 1) are written")
    assert "keep_default_na=False" in sentence
    dataset_overrides(frame.fillna("n/a"), "people", tmp_path)
    dataset_overrides(frame.dropna(), "complete", tmp_path, quiet=False)
    assert capsys.readouterr().err == ""
