"""The training text: a byte-level BPE tokenizer trained on the stdlib's training split, the splits as token
streams (the stdlib, plus installed packages' source when a config names them), and the batch of any step as a
pure function of (seed, step), so a resumed run sees the same data."""
from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from ..artifacts.corpus import package_files, read_split
from ..artifacts.paths import TOKENIZER_DIR
from ..artifacts.prompts import STUB_PACKAGES
from .config import EOS_TOKEN, TrainConfig

__all__ = ["train_tokenizer", "load_or_train_tokenizer", "encode_split", "package_texts", "check_packages",
           "batch_at"]


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


def check_packages(packages: tuple[str, ...]) -> None:
    """Fail before any work: every name installed, none of them an outside-prompt or stub package (held out whole:
    :data:`~labkit.artifacts.prompts.STUB_PACKAGES` holds the outside packages and the stubs' extra ones)."""
    outside = {name for _, name in STUB_PACKAGES}
    for name in packages:
        if name in outside:
            raise ValueError(f"corpus_packages: {name!r} is an outside-prompt package (labkit.artifacts.prompts."
                             f"STUB_PACKAGES); it stays out of training so its prompts stay outside")
        package_files(name)                                    # ModuleNotFoundError naming it if absent


def package_texts(name: str, split: str, max_bytes: int) -> list[str]:
    """A package's files of ``split`` in the order of a hash of their paths (so a cap takes a spread of the
    package, not its alphabetically first folders), added while they fit in ``max_bytes``."""
    files = sorted(package_files(name, split), key=lambda p: hashlib.sha1(p.as_posix().encode()).hexdigest())
    texts, used = [], 0
    for path in files:
        size = path.stat().st_size
        if used + size <= max_bytes:
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
            used += size
    return texts


def encode_split(tokenizer, split: str, corpus_root, packages: tuple[str, ...] = (),
                 max_bytes: int = 4_000_000) -> torch.Tensor:
    """All files of a split as one stream of token ids, files separated by EOS. 'train': the stdlib's, then each
    package's (at most ``max_bytes`` of source per package); 'validation': the stdlib's alone (the figure every
    model card compares); 'validation_packages': the packages' validation files (a twentieth of ``max_bytes`` each)."""
    eos = tokenizer.eos_token_id
    if split == "validation_packages":
        texts = [t for name in packages for t in package_texts(name, "validation", max_bytes // 20)]
    else:
        texts = read_split(split, corpus_root)
        if split == "train":
            texts += [t for name in packages for t in package_texts(name, "train", max_bytes)]
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.int32)


def batch_at(stream: torch.Tensor, step: int, cfg: TrainConfig) -> torch.Tensor:
    """Random windows for ``step``: a pure function of (seed, step), so resuming is exact."""
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    starts = torch.randint(0, len(stream) - cfg.context - 1, (cfg.batch_size,), generator=g)
    return torch.stack([stream[s: s + cfg.context + 1] for s in starts.tolist()]).long()  # (B, T+1)
