"""Tiny random causal LMs of every supported family, built in the tests (no downloads)."""
from __future__ import annotations

import torch

ARCHITECTURES = ("llama", "mistral", "qwen2", "gemma2")


class ToyTokenizer:
    """One token per character (ids 1..90), decodable."""

    pad_token_id = 0

    def __call__(self, text, return_tensors="pt", add_special_tokens=False):
        return {"input_ids": torch.tensor([[1 + (ord(c) % 90) for c in text]])}

    def decode(self, ids):
        return "".join(chr(32 + int(i) % 90) for i in ids)


def tiny_model(arch: str = "llama", *, n_layers: int = 4, vocab_size: int = 97, hidden_size: int = 32,
               seed: int = 0, max_positions: int = 256):
    import transformers as tf

    from labkit.artifacts.models import family_config

    config = family_config(arch, n_layers=n_layers, vocab_size=vocab_size, hidden_size=hidden_size,
                           max_positions=max_positions)
    cls = {"llama": tf.LlamaForCausalLM, "mistral": tf.MistralForCausalLM, "qwen2": tf.Qwen2ForCausalLM,
           "gemma2": tf.Gemma2ForCausalLM}[arch]
    torch.manual_seed(seed)
    model = cls(config).eval()
    # Sharpen the random model a little so greedy paths are not ties and drafts are sometimes right.
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(4.0)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def eos_met_part_way(rng, model, prompt, max_new_tokens: int) -> list[int]:
    """An EOS that plain greedy decoding of ``prompt`` meets part way (so a speculative step can end on it), or none
    (with probability 0.4): the EOS case of the lossless tests."""
    from labkit import autoregressive_generate

    plain = autoregressive_generate(model, prompt, max_new_tokens).new_tokens
    return [plain[rng.randrange(len(plain))]] if rng.random() < 0.6 else []


def save_tiny_model_folder(path, n_layers: int = 4, *, tokenizer_from=None):
    """A tiny random Llama with a one-token-per-character tokenizer, saved as a Hugging Face folder.
    ``tokenizer_from``: a model folder whose tokenizer it gets instead (e.g. the shipped byte-level BPE, which
    decodes every text back exactly; its vocabulary sets the model's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if tokenizer_from is not None:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
        vocab_size = len(tokenizer)
    else:
        chars = ["<unk>", "\n"] + [chr(c) for c in range(32, 127)]
        tok = Tokenizer(models.WordLevel(vocab={c: i for i, c in enumerate(chars)}, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")       # one token per character
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<unk>")
        vocab_size = len(chars)
    model = tiny_model("llama", n_layers=n_layers, vocab_size=vocab_size, max_positions=1024)
    if tokenizer_from is not None and tokenizer.eos_token_id is not None:
        model.generation_config.pad_token_id = tokenizer.eos_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def random_draft_head(model, skip, *, scale: float = 0.5, seed: int = 0):
    """A labkit DraftHead for ``model`` and ``skip`` with random weights: a draft visibly unlike the plain skip."""
    from labkit.measure.lossless import random_draft_head as make

    return make(model, skip, scale=scale, seed=seed)
