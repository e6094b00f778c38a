"""The oracle models give the answers their knowledge allows, deterministically."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from tabmem.data import Dataset, DatasetSpec
from tabmem.data.csvtext import raw_fields
from tabmem.llm.oracle import (
    MarginalOracle,
    MemorizerOracle,
    NullOracle,
    last_user_text,
    load_available_datasets,
    rng_for,
)


def make_dataset(directory: Path, name: str, text: str) -> Dataset:
    path = directory / f"{name}.csv"
    path.write_bytes(text.encode())
    return Dataset(spec=DatasetSpec(name=name, file=path.name), path=path, text=text)


def people_text(n_rows: int = 60) -> str:
    """A table whose id, code and score columns never repeat, with quoted and spaced fields."""
    rng = random.Random(7)
    ids = rng.sample(range(100_000, 1_000_000), n_rows)
    lines = ["id,code,name,city,score"]
    for i in range(n_rows):
        name = f'"{rng.choice(["Smith", "Lee", "Ng"])}, {rng.choice(["Ann", "Bo", "Cy"])}"'
        city = rng.choice([" Oslo", " Rome", " Lima"])
        lines.append(f"{ids[i]},{rng.getrandbits(32):08x},{name},{city},{i * 1.37 + 0.001:.3f}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def people(tmp_path: Path) -> Dataset:
    return make_dataset(tmp_path, "people", people_text())


@pytest.fixture
def plants(tmp_path: Path) -> Dataset:
    text = (
        "sepal_length,sepal_width,species\r\n5.1,3.5,setosa\r\n4.9,3.0,setosa\r\n"
        "6.3,2.9,virginica\r\n5.8,2.7,virginica\r\n"
    )
    return make_dataset(tmp_path, "plants", text)


@pytest.fixture
def datasets(people: Dataset, plants: Dataset) -> list[Dataset]:
    return [people, plants]


def parse_pairs(text: str, sep: str = " = ", joiner: str = ", ") -> dict[str, str]:
    names = "id|code|name|city|score|sepal_length|sepal_width|species"
    parts = re.split(rf"{re.escape(joiner)}(?=(?:{names}){re.escape(sep)})", text)
    return dict(part.split(sep, 1) for part in parts)


# The memorizer


@pytest.mark.parametrize("cut", [3, 24, 40, 47, 55, 80, 200, 531])
def test_memorizer_continues_a_prefix_verbatim(datasets: list[Dataset], cut: int) -> None:
    text = datasets[0].text
    out = MemorizerOracle(datasets).generate(text[:cut], 30, [], seed=0)
    assert out == text[cut : cut + 120]


def test_memorizer_continues_a_prefix_cut_inside_a_quoted_field(people: Dataset) -> None:
    cut = people.text.index('"', 200) + 3
    out = MemorizerOracle([people]).generate(people.text[:cut], 50, [], seed=0)
    assert out == people.text[cut : cut + 200]


def test_memorizer_continues_crlf_text(datasets: list[Dataset]) -> None:
    plants = datasets[1]
    out = MemorizerOracle(datasets).generate(plants.text[:40], 100, [], seed=0)
    assert out == plants.text[40:]


def test_memorizer_continues_rows_without_their_header(people: Dataset) -> None:
    prompt = "\n".join(people.rows[5:8]) + "\n"
    out = MemorizerOracle([people]).generate(prompt, 100, ["\n"], seed=0)
    assert out == people.rows[8]


@pytest.mark.parametrize("intro", ["Continue this file:\n", "Continue this file: "])
def test_memorizer_ignores_text_before_the_csv(people: Dataset, intro: str) -> None:
    cut = len(people.header) + len(people.rows[0]) + 10
    out = MemorizerOracle([people]).generate(intro + people.text[:cut], 40, [], seed=0)
    assert out == people.text[cut : cut + 160]


def test_memorizer_prefers_the_dataset_whose_header_is_in_the_prompt(
    tmp_path: Path, people: Dataset
) -> None:
    twin_rows = people.rows[:3] + people.rows[10:]
    twin = make_dataset(tmp_path, "twin", "\n".join(["a,b,c,d,e", *twin_rows]) + "\n")
    oracle = MemorizerOracle([people, twin])
    body = "\n" + "\n".join(people.rows[:2]) + "\n" + people.rows[2][:4]
    rest = people.rows[2][4:] + "\n"
    twin_prompt = f"The header is {twin.header} (rows follow)" + body
    people_prompt = f"The header is {people.header} (rows follow)" + body
    assert oracle.generate(twin_prompt, 200, [], seed=0).startswith(rest + twin.rows[3])
    assert oracle.generate(people_prompt, 200, [], seed=0).startswith(rest + people.rows[3])


def test_a_longest_match_kept_by_its_tail_equals_a_fresh_search(
    datasets: list[Dataset], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prompts that share their last lines (a sample test's) reuse one search, and every
    prompt still gets exactly what a search of its own finds."""
    rng = random.Random(3)
    texts = [d.text for d in datasets]
    endings = ["Write one more row:\n", "\n", texts[0][40:95], texts[1][30:60], "zz?"]
    prompts = []
    for _ in range(300):
        text = rng.choice(texts)
        start = rng.randrange(len(text))
        head = rng.choice(["", datasets[0].header + "\n", datasets[1].header + "\n", "Rows: "])
        middle = text[start : start + rng.randrange(1, 80)]
        prompts.append(head + middle + rng.choice(["", "\n"]) + rng.choice(endings))
    fresh = MemorizerOracle(datasets)
    expected = [
        fresh._search_longest_match(p, tuple(d.header in p for d in datasets)) for p in prompts
    ]
    kept = MemorizerOracle(datasets)
    searches = []
    search = kept._search_longest_match
    monkeypatch.setattr(
        kept, "_search_longest_match", lambda p, shown: searches.append(p) or search(p, shown)
    )
    got = [kept._longest_match(p) for p in prompts]
    assert [(m.prompt_start, m.text_end, m.table.header) if m else None for m in got] == [
        (m.prompt_start, m.text_end, m.table.header) if m else None for m in expected
    ]
    assert sum(m is not None for m in expected) > 100
    assert len(searches) < len(prompts) / 2


def test_the_longest_match_search_equals_trying_every_length(
    tmp_path: Path, datasets: list[Dataset]
) -> None:
    """The search leaves out files that cannot hold a longer suffix; it must still find the
    longest suffix held by any file, in the file a search of every file in order finds."""
    people = datasets[0]
    twin = make_dataset(tmp_path, "twin", "\n".join(["a,b,c,d,e", *people.rows[:20]]) + "\n")
    files = [*datasets, twin]
    oracle = MemorizerOracle(files)
    rng = random.Random(5)
    texts = [d.text for d in files]
    checked = 0
    for _ in range(200):
        text = rng.choice(texts)
        start = rng.randrange(len(text))
        head = rng.choice(["", twin.header + "\n", people.header + "\n", "Rows: "])
        prompt = head + text[start : start + rng.randrange(1, 120)] + rng.choice(["", "x", "\n"])
        shown = tuple(d.header in prompt for d in files)
        ordered = [d for d, s in zip(files, shown, strict=True) if s]
        ordered += [d for d in files if d not in ordered]
        expected = None
        for length in range(len(prompt), 0, -1):
            suffix = prompt[-length:]
            holder = next((d for d in ordered if suffix in d.text), None)
            if holder is not None:
                end = holder.text.find(suffix) + length
                expected = (len(prompt) - length, end, holder.header)
                break
        found = oracle._search_longest_match(prompt, shown)
        got = (found.prompt_start, found.text_end, found.table.header) if found else None
        assert got == expected
        checked += expected is not None and expected[2] == twin.header
    assert checked > 10


def test_memorizer_answers_a_feature_question_from_the_matching_row(people: Dataset) -> None:
    oracle = MemorizerOracle([people])
    for row in people.rows[::7]:
        ident, code, _, city, score = raw_fields(row, ",")
        lines = f"id = {ident}\nscore = {float(score):.4f}\ncity = {city.strip()}\ncode ="
        assert oracle.generate(lines, 10, [], seed=1) == f" {code}"
        commas = f"code: {code}, city: {city.strip()}, id:"
        assert oracle.generate(commas, 10, [], seed=1, chat=True) == ident


def test_memorizer_answers_an_observation_request_with_a_real_row(people: Dataset) -> None:
    oracle = MemorizerOracle([people])
    real = {tuple(f.strip().strip('"') for f in raw_fields(r, ",")) for r in people.rows}
    seen = set()
    for seed in range(10):
        out = oracle.generate("One observation of the People dataset, please.", 100, [], seed)
        pairs = parse_pairs(out)
        assert list(pairs) == people.feature_names
        assert tuple(pairs.values()) in real
        seen.add(out)
    assert len(seen) > 1


def test_memorizer_observation_follows_the_prompt_pair_style(people: Dataset) -> None:
    ident, code, name = raw_fields(people.rows[4], ",")[:3]
    out = MemorizerOracle([people]).generate(f"id: {ident}\ncode: {code}", 100, [], seed=0)
    pairs = parse_pairs(out, sep=": ", joiner="\n")
    assert (pairs["id"], pairs["name"]) == (ident, name.strip('"'))


def test_memorizer_says_nothing_about_what_it_does_not_know(people: Dataset) -> None:
    assert MemorizerOracle([people]).generate("What is the capital of France?", 50, [], 0) == ""


def test_memorizer_stops_at_the_end_of_the_file(people: Dataset) -> None:
    answer = MemorizerOracle([people]).answer(people.text[:-5], 100, [], seed=0)
    assert (answer.text, answer.finish_reason) == (people.text[-5:], "stop")


# The marginal oracle


def test_marginal_never_reproduces_a_real_row(people: Dataset) -> None:
    oracle = MarginalOracle([people])
    real = set(people.rows)
    columns = [set(c) for c in zip(*(raw_fields(r, ",") for r in people.rows), strict=True)]
    prompt = people.prefix_text(4)
    for seed in range(300):
        lines = oracle.generate(prompt, 100, [], seed).split("\n")[:-1]
        assert lines
        for line in lines:
            fields = raw_fields(line, ",")
            assert len(fields) == 5
            assert all(f in column for f, column in zip(fields, columns, strict=True))
            assert line not in real


def test_marginal_finishes_a_field_cut_short_with_a_value_of_its_column(people: Dataset) -> None:
    oracle = MarginalOracle([people])
    ids = {r.split(",")[0] for r in people.rows}
    prompt = people.prefix_text(3) + people.rows[2][:2]
    for seed in range(20):
        line = prompt.split("\n")[-1] + oracle.generate(prompt, 30, ["\n"], seed)
        assert line.split(",")[0] in ids
        assert len(raw_fields(line, ",")) == 5


def test_marginal_completes_a_header_cut_short(datasets: list[Dataset]) -> None:
    out = MarginalOracle(datasets).generate("sepal_le", 30, [], seed=0)
    assert out.startswith("ngth,sepal_width,species\r\n")


def test_marginal_recognises_a_dataset_by_its_rows(people: Dataset, plants: Dataset) -> None:
    prompt = "\n".join(people.rows[10:13]) + "\n"
    out = MarginalOracle([plants, people]).generate(prompt, 40, ["\n"], seed=0)
    assert len(raw_fields(out, ",")) == 5


def test_marginal_answers_questions_with_marginal_draws(people: Dataset) -> None:
    oracle = MarginalOracle([people])
    prompt = f"id = {people.rows[0].split(',')[0]}\ncity ="
    answers = {oracle.generate(prompt, 5, [], seed) for seed in range(30)}
    assert answers == {" Oslo", " Rome", " Lima"}


def test_marginal_observation_has_every_feature(people: Dataset) -> None:
    prompt = "Feature names: id, code, name, city, score"
    pairs = parse_pairs(MarginalOracle([people]).generate(prompt, 100, [], seed=3))
    assert list(pairs) == people.feature_names
    assert pairs["city"] in {"Oslo", "Rome", "Lima"}


# The null oracle


def test_null_writes_rows_with_the_prompt_field_count(people: Dataset) -> None:
    prompt = people.prefix_text(3) + ",".join(raw_fields(people.rows[2], ",")[:2]) + ","
    out = NullOracle().generate(prompt, 100, [], seed=0)
    lines = (prompt.split("\n")[-1] + out).split("\n")[:-1]
    assert len(lines) > 2
    assert all(len(raw_fields(line, ",")) == 5 for line in lines)
    assert not set(lines) & set(people.rows)


def test_null_keeps_the_prompt_line_ends(plants: Dataset) -> None:
    out = NullOracle().generate(plants.prefix_text(3), 30, [], seed=0)
    assert out.count("\r\n") == out.count("\n") > 2


def test_null_makes_up_values_and_words(people: Dataset) -> None:
    oracle = NullOracle([people])
    assert oracle.generate("id = 1\ncity =", 5, [], seed=0).strip()
    assert oracle.generate("Tell me about the people dataset.", 20, [], seed=0).strip()


# What all oracles share


@pytest.mark.parametrize("cls", [MemorizerOracle, MarginalOracle, NullOracle])
def test_stop_sequences_end_the_answer(cls: type, people: Dataset) -> None:
    prompt = people.prefix_text(2)
    full = cls([people]).generate(prompt, 200, [], seed=0)
    answer = cls([people]).answer(prompt, 200, ["\n", ","], seed=0)
    assert answer.text == full[: min(full.index("\n"), full.index(","))]
    assert answer.finish_reason == "stop"


@pytest.mark.parametrize("cls", [MemorizerOracle, MarginalOracle, NullOracle])
@pytest.mark.parametrize("max_tokens", [0, 1, 7])
def test_max_tokens_caps_the_answer_at_four_characters_a_token(
    cls: type, people: Dataset, max_tokens: int
) -> None:
    answer = cls([people]).answer(people.prefix_text(2), max_tokens, [], seed=0)
    assert len(answer.text) == 4 * max_tokens
    assert answer.finish_reason == "length"


@pytest.mark.parametrize("cls", [MemorizerOracle, MarginalOracle, NullOracle])
def test_answers_depend_on_prompt_and_seed_only(cls: type, datasets: list[Dataset]) -> None:
    prompt = datasets[0].prefix_text(3)
    first = cls(datasets).generate(prompt, 50, [], seed=5, temperature=0.0)
    assert cls(datasets).generate(prompt, 50, [], seed=5, temperature=1.3) == first
    if cls is not MemorizerOracle:
        assert cls(datasets).generate(prompt, 50, [], seed=6) != first


def test_rng_for_is_stable_and_seed_sensitive() -> None:
    assert rng_for("abc", 1).random() == rng_for("abc", 1).random()
    assert rng_for("abc", 1).random() != rng_for("abc", 2).random()


def test_last_user_text_reads_the_last_user_message() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "example"},
        {"role": "assistant", "content": "answer"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "a,"}, {"type": "text", "text": "b"}],
        },
    ]
    assert last_user_text(messages) == "a,b"
    assert last_user_text(messages[:2]) == "example"
    assert last_user_text(messages[:1]) is None


def test_memorizer_continues_a_shipped_dataset() -> None:
    datasets = load_available_datasets()
    if not datasets:
        pytest.skip("no dataset file is present under data/")
    dataset = datasets[0]
    cut = len(dataset.prefix_text(3)) + 5
    out = MemorizerOracle(datasets).generate(dataset.text[:cut], 64, [], seed=0)
    assert out == dataset.text[cut : cut + 256]


def test_a_tables_newlines_before_a_position_are_those_the_text_counts(tmp_path: Path):
    from tabmem.llm.oracle.models import _Table

    text = "a,b\n1,2\n\n3,4\r\n5,6"
    table = _Table(Dataset(DatasetSpec(name="t"), tmp_path / "t.csv", text))
    assert [table.lines_before(i) for i in range(len(text) + 2)] == [
        text.count("\n", 0, i) for i in range(len(text) + 2)
    ]
