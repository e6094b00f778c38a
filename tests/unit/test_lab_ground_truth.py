"""The lab's ground truth on a tiny real model: token loss in training's blocks, rows written
back exactly (a random model writes none back; the same model taught the file writes all)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_model import save_tiny_model  # noqa: E402

from tabmem.lab.ground_truth import (  # noqa: E402
    GROUND_TRUTH_COLUMNS,
    first_line,
    ground_truth_table,
    mean_token_loss,
    measure,
    measure_checkpoint,
    row_prompts,
)
from tabmem.lab.plan import LabPlan  # noqa: E402
from tabmem.lab.train import file_blocks, load_base  # noqa: E402

# header and 8 rows: every row's prompt (header and up to ten rows before) is the file's start
SMALL = "a,b,c\n" + "".join(f"{i},{i * 7 % 10},x{i}\n" for i in range(1, 9))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = save_tiny_model(tmp_path_factory.mktemp("tiny") / "m", seed=0)
    tokenizer, model = load_base(folder, "cpu", "float32")
    return folder, tokenizer, model


def test_row_prompts_hold_the_header_and_the_ten_rows_before():
    text = "h1,h2\r\n" + "".join(f"{i},{i}\r\n" for i in range(1, 16))
    prompts = dict((row, prompt) for prompt, row in row_prompts(text, 15, seed=3))
    assert len(prompts) == 15
    assert prompts["1,1"] == "h1,h2\r\n"
    assert prompts["4,4"] == "h1,h2\r\n1,1\r\n2,2\r\n3,3\r\n"
    rows_before = "".join(f"{i},{i}\r\n" for i in range(3, 13))
    assert prompts["13,13"] == "h1,h2\r\n" + rows_before  # rows 3..12, not row 1 or 2
    sample = row_prompts(text, 4, seed=3)
    assert sample == row_prompts(text, 4, seed=3) and len(sample) == 4
    assert sample != row_prompts(text, 4, seed=4)


def test_a_line_counts_only_up_to_the_files_line_break():
    assert first_line("1,2,3\n4,5", "\n") == "1,2,3"
    assert first_line("1,2,3\n", "\r\n") == "1,2,3\n"  # a bare \n is not a \r\n file's break
    assert first_line("1,2,3", "\n") == "1,2,3"


def test_loss_is_the_mean_of_every_predicted_tokens_nll_over_trainings_blocks(tiny):
    _, tokenizer, model = tiny
    text = SMALL * 3
    blocks = file_blocks(tokenizer, text, 40)
    assert len(blocks) > 3 and len(blocks[-1]) < 40  # a short last block pads its batch
    loss, tokens, n = mean_token_loss(model, tokenizer, text, 40, max_blocks=100, batch=3)
    nlls = []
    for block in blocks:  # each block alone, as training reads it
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([block])).logits[0]
        logp = torch.log_softmax(logits, dim=-1)
        nlls += [-float(logp[i - 1, block[i]]) for i in range(1, len(block))]
    assert (tokens, n) == (len(nlls), len(blocks))
    assert loss == pytest.approx(sum(nlls) / len(nlls), rel=1e-5)
    assert loss == pytest.approx(math.log(len(tokenizer)), rel=0.2)  # random weights: near uniform
    first, tokens_first, _ = mean_token_loss(model, tokenizer, text, 40, max_blocks=1)
    assert tokens_first == len(blocks[0]) - 1
    with torch.no_grad():
        reference = model(input_ids=torch.tensor([blocks[0]]), labels=torch.tensor([blocks[0]]))
    assert first == pytest.approx(float(reference.loss), rel=1e-5)


def test_a_model_taught_the_file_writes_its_rows_back_and_a_random_one_does_not(tmp_path):
    folder = save_tiny_model(tmp_path / "m", seed=0)
    before = measure_checkpoint(folder, {"small": SMALL}, block_size=256, device="cpu", rows=8)
    assert before["small"].written_back == 0 and before["small"].rows == 8
    tokenizer, model = load_base(folder, "cpu", "float32")
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.tensor(file_blocks(tokenizer, SMALL, 256))
    model.train()
    for _ in range(150):
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    after = measure(model, tokenizer, SMALL, block_size=256, rows=8)
    assert after.share == 1.0
    assert after.loss < before["small"].loss / 10


def test_the_lab_table_sets_each_checkpoint_against_the_base_model(tmp_path):
    base = save_tiny_model(tmp_path / "p0", seed=0)
    other = save_tiny_model(tmp_path / "p4", seed=1)
    plan = LabPlan("t", {"small": 8}, ["held"], [0, 4], first_rows={"small": 8})
    texts = {"small": SMALL, "held": "x,y\n" + "".join(f"{i},{i}\n" for i in range(30))}
    lines = []
    unread = {"small": "x,y\n" + "".join(f"{i},{2 * i}\n" for i in range(20))}
    twin = {name: "x,y\n" + "".join(f"{i},{i % 3}\n" for i in range(20)) for name in texts}
    controls = {"unread": unread, "twin": twin}
    table = ground_truth_table(
        plan,
        {0: base, 4: other},
        base,
        texts,
        40,
        "cpu",
        rows=3,
        log=lines.append,
        controls=controls,
    )
    assert list(table.columns) == GROUND_TRUTH_COLUMNS
    assert table[["passes", "dataset"]].values.tolist() == [
        [0, "small"],
        [0, "held"],
        [4, "small"],
        [4, "held"],
    ]
    assert table["repetitions"].tolist() == [0, 0, 4, 0]
    assert table["group"].tolist() == ["planted", "held out"] * 2
    assert table["checkpoint"].tolist()[2] == "lab-t-p4"
    assert table["first_rows"].tolist() == [8, 0, 8, 0]
    assert (table.loc[table["passes"] == 0, "loss_drop"] == 0).all()
    later = table[table["passes"] == 4]
    assert (later["loss_drop"] == later["base_loss"] - later["loss"]).all()
    assert (later["loss"] != later["base_loss"]).all()  # other weights, other loss
    small = table[table["dataset"] == "small"].set_index("passes")
    assert small.loc[0, "learned_over_unread"] == 0  # the base model against itself
    gain = (small.loc[4, "unread_loss"] - small.loc[4, "loss"]) - (
        small.loc[0, "unread_loss"] - small.loc[0, "loss"]
    )
    assert small.loc[4, "learned_over_unread"] == pytest.approx(gain) and gain != 0
    assert table.loc[table["dataset"] == "held", "unread_loss"].isna().all()  # read whole
    for name, row in table[table["passes"] == 4].set_index("dataset").iterrows():
        base_row = table[(table["passes"] == 0) & (table["dataset"] == name)].iloc[0]
        assert row["twin_loss_drop"] == pytest.approx(base_row["twin_loss"] - row["twin_loss"])
        assert row["learned_over_twin"] == pytest.approx(row["loss_drop"] - row["twin_loss_drop"])
    assert (table.loc[table["passes"] == 0, "learned_over_twin"] == 0).all()
    assert table["rows_n"].tolist() == [3, 3, 3, 3]
    assert len(lines) == 2  # one line per checkpoint; the base model is checkpoint 0
