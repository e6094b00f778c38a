"""The oracle server answers over real HTTP, to urllib and to litellm, once per request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tabmem.data import Dataset, DatasetSpec
from tabmem.data.csvtext import raw_fields
from tabmem.llm.oracle import OracleServer

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
litellm = pytest.importorskip("litellm")

# litellm's response types make pydantic warn about a TypedDict it cannot protect; not ours.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic")

SRC = Path(__file__).resolve().parents[2] / "src"
TEXT = (
    "id,name,city,score\n"
    '101,"Lee, Ann", Oslo,3.25\n'
    '102,"Ng, Bo", Rome,7.5\n'
    '103,"Smith, Cy", Lima,1.125\n'
    '104,"Lee, Bo", Oslo,9.75\n'
    '105,"Ng, Cy", Rome,4.0\n'
)
CUT = TEXT.index("Rome") + 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OracleServer]:
    path = tmp_path_factory.mktemp("data") / "people.csv"
    path.write_text(TEXT)
    dataset = Dataset(spec=DatasetSpec(name="people", file=path.name), path=path, text=TEXT)
    with OracleServer([dataset]) as running:
        yield running


def call(
    server: OracleServer, path: str, body: bytes | dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of a GET (no body) or POST to the server."""
    data = body if isinstance(body, bytes | None) else json.dumps(body).encode()
    request = urllib.request.Request(
        server.base_url + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def chat_body(prompt: str, **params: Any) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": "You continue text files exactly."},
        {"role": "user", "content": "sepal_length,sepal_width\n5.1,3"},
        {"role": "assistant", "content": ".5\n4.9,3.0\n"},
        {"role": "user", "content": prompt},
    ]
    return {"model": "oracle-memorizer", "messages": messages, **params}


def test_models_lists_the_ten_oracles(server: OracleServer) -> None:
    status, body = call(server, "/models")
    assert status == 200
    assert [m["id"] for m in body["data"]] == [
        "oracle-memorizer",
        "oracle-marginal",
        "oracle-null",
        "oracle-learner",
        "oracle-copula",
        "oracle-forest",
        "oracle-moments",
        "oracle-mixture",
        "oracle-boosted",
        "oracle-scorer",
    ]


def test_a_panel_family_answers_at_the_spread_its_name_gives(server: OracleServer) -> None:
    body = {"model": "oracle-moments-t0", "prompt": TEXT[:CUT], "max_tokens": 20, "seed": 1}
    status, reply = call(server, "/completions", body)
    assert status == 200 and reply["model"] == "oracle-moments-t0"
    assert reply["choices"][0]["text"]
    assert call(server, "/completions", {**body, "model": "oracle-moments-tx"})[0] == 404


def test_the_copula_learner_answers_over_http(server: OracleServer) -> None:
    """A CSV continuation in the file's format: the row cut mid-field finished, new rows with
    the file's field count and quoting, the counter counting on."""
    body = {"model": "oracle-copula", "prompt": TEXT[:CUT], "max_tokens": 20, "temperature": 0}
    status, reply = call(server, "/completions", body)
    assert status == 200
    finished, *rows = reply["choices"][0]["text"].split("\n")
    assert len(raw_fields(TEXT[:CUT].rsplit("\n", 1)[-1] + finished)) == 4
    assert len(raw_fields(rows[0])) == 4 and rows[0].startswith("103,")
    assert rows[0].split(",")[1].startswith('"')


def test_chat_completion_over_http(server: OracleServer) -> None:
    before = server.request_count
    status, body = call(server, "/chat/completions", chat_body(TEXT[:CUT], max_tokens=10, seed=3))
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["model"] == "oracle-memorizer"
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": TEXT[CUT : CUT + 40]}
    assert choice["finish_reason"] == "length"
    usage = body["usage"]
    assert usage["completion_tokens"] == 10
    assert usage["total_tokens"] == usage["prompt_tokens"] + 10
    assert server.request_count == before + 1


def test_text_completion_over_http_honours_stop(server: OracleServer) -> None:
    body = {"model": "oracle-memorizer", "prompt": TEXT[:CUT], "max_tokens": 50, "stop": "\n"}
    status, reply = call(server, "/completions", body)
    assert status == 200
    assert reply["object"] == "text_completion"
    assert reply["choices"][0]["text"] == TEXT[CUT:].split("\n")[0]
    assert reply["choices"][0]["finish_reason"] == "stop"


def test_litellm_chat_completion(server: OracleServer) -> None:
    before = server.request_count
    response = litellm.completion(
        model="openai/oracle-memorizer",
        api_base=server.base_url,
        api_key="unused",
        messages=chat_body(TEXT[:CUT])["messages"],
        max_tokens=25,
        stop=["\n105"],
        seed=0,
        temperature=0,
        num_retries=0,
    )
    expected = TEXT[CUT:].split("\n105")[0]
    assert response.choices[0].message.content == expected
    assert server.request_count == before + 1


def test_litellm_text_completion(server: OracleServer) -> None:
    before = server.request_count
    response = litellm.text_completion(
        model="text-completion-openai/oracle-memorizer",
        api_base=server.base_url,
        api_key="unused",
        prompt=TEXT[:CUT],
        max_tokens=100,
        seed=0,
        temperature=0,
        num_retries=0,
    )
    assert response.choices[0].text == TEXT[CUT:]
    assert server.request_count == before + 1


def test_litellm_marginal_and_null_answer_with_rows(server: OracleServer) -> None:
    for model in ("oracle-marginal", "oracle-null"):
        response = litellm.completion(
            model=f"openai/{model}",
            api_base=server.base_url,
            api_key="unused",
            messages=[{"role": "user", "content": TEXT[:60]}],
            max_tokens=40,
            num_retries=0,
        )
        lines = response.choices[0].message.content.split("\n")
        assert len(lines) > 2


def test_unknown_model_is_a_404_in_openai_shape(server: OracleServer) -> None:
    status, body = call(server, "/chat/completions", {**chat_body("x"), "model": "gpt-9"})
    assert status == 404
    assert body["error"]["code"] == "model_not_found"
    assert "oracle-memorizer" in body["error"]["message"]


def test_litellm_does_not_retry_an_unknown_model(server: OracleServer) -> None:
    before = server.request_count
    with pytest.raises(litellm.NotFoundError):
        litellm.completion(
            model="openai/gpt-9",
            api_base=server.base_url,
            api_key="unused",
            messages=[{"role": "user", "content": "hello"}],
            num_retries=0,
        )
    assert server.request_count == before + 1


def test_malformed_json_is_a_400(server: OracleServer) -> None:
    status, body = call(server, "/chat/completions", b'{"model": "oracle-memorizer",')
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("params", [{"n": 2}, {"stop": 5}, {"max_tokens": -1}, {"messages": "hi"}])
def test_unsupported_parameters_are_a_400(server: OracleServer, params: dict[str, Any]) -> None:
    status, body = call(server, "/chat/completions", {**chat_body(TEXT[:CUT]), **params})
    assert status == 400
    assert body["error"]["message"]


def test_unknown_endpoint_is_a_404(server: OracleServer) -> None:
    status, _ = call(server, "/embeddings", {"model": "oracle-null", "input": "x"})
    assert status == 404


def test_concurrent_requests_are_each_served_and_counted_once(server: OracleServer) -> None:
    before = server.request_count
    cuts = list(range(30, 30 + 16))

    def ask(cut: int) -> str:
        body = {"model": "oracle-memorizer", "prompt": TEXT[:cut], "max_tokens": 5}
        return call(server, "/completions", body)[1]["choices"][0]["text"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(ask, cuts))
    assert answers == [TEXT[cut : cut + 20] for cut in cuts]
    assert server.request_count == before + len(cuts)


def test_stop_releases_the_port() -> None:
    server = OracleServer([]).start()
    url = server.base_url
    server.stop()
    with pytest.raises(RuntimeError):
        _ = server.base_url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/models", timeout=2)


def test_module_entry_point_serves_until_stopped() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "tabmem.llm.oracle.server", "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().decode().strip()
        with urllib.request.urlopen(base_url + "/models", timeout=10) as response:
            ids = [m["id"] for m in json.loads(response.read())["data"]]
        assert "oracle-memorizer" in ids
    finally:
        process.terminate()
        process.wait(timeout=10)


def raw_events(server: OracleServer, body: dict[str, Any]) -> list[Any]:
    """The ``data:`` payloads of a streamed reply, read to its end with urllib."""
    request = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        lines = response.read().decode().split("\n\n")
    return [
        line[len("data: ") :] if line.endswith("[DONE]") else json.loads(line[len("data: ") :])
        for line in lines
        if line.startswith("data: ")
    ]


def test_a_streamed_reply_is_the_same_answer_in_token_sized_events(server: OracleServer) -> None:
    body = chat_body(TEXT[:CUT])
    _, whole = call(server, "/chat/completions", body)
    events = raw_events(server, {**body, "stream": True, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    pieces = [e["choices"][0]["delta"]["content"] for e in events[:-1] if e["choices"]]
    assert "".join(pieces) == whole["choices"][0]["message"]["content"]
    assert max(len(p) for p in pieces) == 4 and len(pieces) > 5
    assert events[-2]["usage"] == whole["usage"]


def test_the_client_closes_the_stream_once_the_answer_has_gone_wrong(
    server: OracleServer,
) -> None:
    from tabmem.llm.openai_http import OpenAICompatibleClient
    from tabmem.llm.stopping import StopRule

    client = OpenAICompatibleClient(server.base_url, None, 10, "oracle", lambda headers: None)
    body = {**chat_body(TEXT[:CUT]), "max_tokens": 200}
    whole, _ = client.chat("oracle-memorizer", body["messages"], {"max_tokens": 200})
    assert whole.count("\n") >= 2
    first_line = whole[: whole.index("\n") + 1]
    wrong = StopRule.verbatim(first_line + "999,nobody\n")
    text, _ = client.stream("chat/completions", body, wrong)
    client.close()
    assert text.startswith(first_line) and len(text) < len(whole)
    assert wrong.cut(text) == wrong.cut(whole)


def test_a_stream_read_to_its_end_reports_its_token_usage(server: OracleServer) -> None:
    """Issue 56: streams never asked for their usage, so every streamed answer counted no
    tokens and the spend line disagreed with the calls column."""
    from tabmem.llm.openai_http import OpenAICompatibleClient
    from tabmem.llm.stopping import StopRule

    client = OpenAICompatibleClient(server.base_url, None, 10, "oracle", lambda headers: None)
    body = {**chat_body(TEXT[:CUT]), "max_tokens": 200}
    whole, usage = client.chat("oracle-memorizer", body["messages"], {"max_tokens": 200})
    unsettled = StopRule.verbatim(whole + "and a row more\n")  # settles only at the end
    text, streamed = client.stream("chat/completions", body, unsettled)
    client.close()
    assert text == whole and usage["prompt_tokens"] > 0
    counts = ("prompt_tokens", "completion_tokens")
    assert {k: streamed.get(k) for k in counts} == {k: usage[k] for k in counts}
