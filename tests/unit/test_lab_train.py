"""The lab's fine-tuning on a tiny random Llama: checkpoints, losses, LoRA merged away."""

from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_model import save_tiny_model

from tabmem.data import Dataset, DatasetSpec
from tabmem.lab.plan import LabPlan
from tabmem.lab.stream import load_stream
from tabmem.lab.train import _step, file_blocks, fine_tune
from tabmem.llm.transformers_backend import TransformersBackend, weights_fingerprint

TEXT = "a,b\n" + "".join(f"{i},{i * 7 % 10}\n" for i in range(12))


def toy():
    return Dataset(spec=DatasetSpec(name="toy", family="toy"), path=Path("toy.csv"), text=TEXT)


def train(tmp_path, method):
    plan = LabPlan("t", {"toy": 3}, ["other"], [0, 1, 3])
    messages = []
    settings = {"method": method, "learning_rate": 3e-3, "block_size": 24, "batch_size": 2}
    saved = fine_tune(
        plan,
        {"toy": plan.planted_text(toy())},
        save_tiny_model(tmp_path / "base"),
        {**settings, "device": "cpu", "lora_r": 4, "lora_alpha": 8},
        tmp_path / "checkpoints",
        seed=0,
        log=messages.append,
    )
    return saved, messages


def mean_losses(messages):
    return [float(m.split("mean loss ")[1].split(",")[0]) for m in messages]


def test_full_fine_tuning_saves_each_checkpoint_and_learns(tmp_path):
    saved, messages = train(tmp_path, "full")
    assert sorted(saved) == [0, 1, 3]
    assert all((saved[p] / "config.json").is_file() for p in saved)
    assert len(messages) == 3  # one line per pass
    losses = mean_losses(messages)
    assert losses[-1] < losses[0]
    prints = {p: weights_fingerprint(saved[p]) for p in saved}
    assert len(set(prints.values())) == 3  # every checkpoint is a different model
    base = weights_fingerprint(tmp_path / "base" / "model.safetensors")
    assert weights_fingerprint(saved[0] / "model.safetensors") == base  # pass 0: untouched


def test_lora_checkpoints_are_plain_models_the_backend_loads(tmp_path):
    saved, messages = train(tmp_path, "lora")
    assert not list(saved[3].glob("adapter_*"))  # merged into the weights
    backend = TransformersBackend(saved[3], "lab-t-p3", device="cpu")
    assert len(backend.logprobs("1,7\n", "a,b\n")) == 4
    assert mean_losses(messages)[-1] < mean_losses(messages)[0]


class NormRecorder:
    """An optimizer that only records the gradients' norm it is asked to step with."""

    def __init__(self, model):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.norms = []

    def step(self):
        import torch

        self.norms.append(
            float(
                torch.linalg.vector_norm(
                    torch.stack(
                        [
                            torch.linalg.vector_norm(p.grad)
                            for p in self.params
                            if p.grad is not None
                        ]
                    )
                )
            )
        )

    def zero_grad(self):
        for p in self.params:
            p.grad = None


def test_a_clip_runs_before_the_step_and_none_leaves_the_gradients(tmp_path):
    from torch.nn.utils import clip_grad_norm_
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(save_tiny_model(tmp_path / "m")).train()
    recorder = NormRecorder(model)
    block = [[1, *range(5, 25)]]
    _step(model, recorder, block, 0, "cpu")
    _step(model, recorder, block, 0, "cpu", partial(clip_grad_norm_, recorder.params, 1e-3))
    unclipped, clipped = recorder.norms
    assert unclipped > 1e-2
    assert clipped == pytest.approx(1e-3, rel=1e-3)


def test_a_stream_reads_other_text_between_the_planted_files(tmp_path):
    stream = load_stream({"ratio": 2.0, "sources": ["code", "prose"]}, ["toy"])
    plan = LabPlan("t", {"toy": 2}, ["other"], [2], stream=stream)
    messages = []
    settings = {"learning_rate": 1e-3, "block_size": 64, "device": "cpu"}
    fine_tune(
        plan,
        {"toy": TEXT},
        save_tiny_model(tmp_path / "base"),
        settings,
        tmp_path / "c",
        seed=0,
        log=messages.append,
    )
    planted_blocks = 1  # TEXT is shorter than a block
    for line in messages:
        blocks = int(line.split(": ")[1].split(" blocks")[0])
        other = int(line.split("(")[1].split(" of other text")[0])
        assert blocks == planted_blocks + other and other >= 2


def test_a_last_block_of_one_token_is_left_out_it_has_nothing_to_predict(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(save_tiny_model(tmp_path / "m"))
    ids = tokenizer(TEXT, add_special_tokens=True)["input_ids"]
    size = len(ids) - 1  # one token left for a second block
    assert [len(b) for b in file_blocks(tokenizer, TEXT, size)] == [size]
    assert [len(b) for b in file_blocks(tokenizer, TEXT, size - 1)] == [size - 1, 2]
