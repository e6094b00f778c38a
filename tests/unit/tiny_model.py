"""A tiny random Llama with a one-character-per-token tokenizer, saved like any checkpoint:
the transformers backend and the lab's training are tested on it without any download."""

import string

import torch

CHARS = list(string.ascii_letters + string.digits + ",.-_ \n:=")


def save_tiny_model(folder, seed=0):
    """A 2-layer Llama with a one-character-per-token tokenizer, saved like any checkpoint."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(["<pad>", "<s>", "</s>", "<unk>", *CHARS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
