"""The training text: a byte-level BPE tokenizer trained on the stdlib's training split, the splits as token
streams, and the batch of any step as a pure function of (seed, step), so a resumed run sees the same data."""
from __future__ import annotations

from pathlib import Path

import torch

from ..artifacts.corpus import read_split
from ..artifacts.paths import TOKENIZER_DIR
from .config import EOS_TOKEN, TrainConfig

__all__ = ["train_tokenizer", "load_or_train_tokenizer", "encode_split", "batch_at"]


def train_tokenizer(texts: list[str], vocab_size: int, out_dir: Path):
    """Byte-level BPE with the `tokenizers` library, saved as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TOKEN, bos_token=EOS_TOKEN,
                                   unk_token=None, pad_token=EOS_TOKEN)
    fast.model_max_length = 1_000_000
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return fast


def load_or_train_tokenizer(cfg: TrainConfig, corpus_root):
    from transformers import PreTrainedTokenizerFast

    tok_dir = Path(cfg.tokenizer_dir) if cfg.tokenizer_dir else TOKENIZER_DIR
    if (tok_dir / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(tok_dir)
    return train_tokenizer(read_split("train", corpus_root), cfg.vocab_size, tok_dir)


def encode_split(tokenizer, split: str, corpus_root) -> torch.Tensor:
    """All files of a split as one stream of token ids, files separated by EOS."""
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    for text in read_split(split, corpus_root):
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.int32)


def batch_at(stream: torch.Tensor, step: int, cfg: TrainConfig) -> torch.Tensor:
    """Random windows for ``step``: a pure function of (seed, step), so resuming is exact."""
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    starts = torch.randint(0, len(stream) - cfg.context - 1, (cfg.batch_size,), generator=g)
    return torch.stack([stream[s: s + cfg.context + 1] for s in starts.tolist()]).long()  # (B, T+1)
