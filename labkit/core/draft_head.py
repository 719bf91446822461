"""Draft head: a small learnt correction of the self-draft's last hidden state, used only while drafting.

Why: the draft (the target with the blocks of one skip set removed) ends its forward in a hidden state h_d that is
off from the full model's h_f in a consistent way, because the same blocks are always missing. A residual linear map
h_d ↦ h_d + W h_d + b, fitted in minutes on a CPU to make the draft's distribution q match the target's p
(KL(p || q) + cross-entropy against p's top-1 token, on the model's own greedy continuations;
``python -m labkit train-draft-head``), raises the draft's teacher-forced agreement with the target at the cost of
one small matrix product per drafted token (the measured gain is in the model card and docs/decisions.md).
Kangaroo (Liu et al. 2024) trains such an adapter on an early exit; here it sits on a skip set.

Lossless as every draft: the head changes q only. The target p is the model's own forward, which never runs the
head, and the usual rule verifies every drafted token, so greedy output stays token-identical to plain decoding and
sampled output exact. A head belongs to the skip set it was fitted on (``skip``) and to a draft stop threshold
chosen with it (``threshold``): fitting q to p also changes how confident the draft is, so the threshold that
stops a draft best moves with it (docs/decisions.md).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from .skip import SkipSet

__all__ = ["DraftHead", "final_norm"]

WEIGHTS_FILE, INFO_FILE = "draft_head.safetensors", "draft_head.json"


def final_norm(model: nn.Module) -> nn.Module:
    """The norm between the last decoder layer and the LM head (Llama, Mistral, Qwen2, Gemma2: ``model.model.norm``)."""
    norm = getattr(model.get_decoder(), "norm", None)
    if not isinstance(norm, nn.Module):
        raise ValueError(f"draft_head: no final norm found on {type(model).__name__} (expected model.model.norm)")
    return norm


class DraftHead(nn.Module):
    """h ↦ h + W h + b on the final norm's output, for drafts that skip ``skip``; a new head is the identity."""

    def __init__(self, hidden_size: int, skip: SkipSet, threshold: float = 0.5, info: dict | None = None):
        super().__init__()
        if not isinstance(skip, SkipSet):
            raise TypeError(f"skip must be a labkit.SkipSet, got {type(skip).__name__}")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.proj = nn.Linear(hidden_size, hidden_size)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)
        self.skip, self.threshold, self.info = skip, float(threshold), dict(info or {})

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden + self.proj(hidden)                                       # (B, T, H)

    def check(self, model: nn.Module, skip) -> None:
        """ValueError naming ``draft_head`` unless the model has this hidden size and ``skip`` is this head's set."""
        if self.proj.in_features != model.config.hidden_size:
            raise ValueError(f"draft_head has hidden size {self.proj.in_features}, the model "
                             f"{model.config.hidden_size}")
        if skip != self.skip:
            raise ValueError(f"draft_head was fitted for the skip set {self.skip}; it cannot draft with {skip}")
        final_norm(model)

    @contextmanager
    def applied(self, model: nn.Module) -> Iterator[None]:
        """The head on the model's final-norm output for the duration of a draft; removed afterwards, also on errors."""
        weight = self.proj.weight

        def correct(module, inputs, output):              # in the head's dtype, handed back in the model's
            return self(output.to(weight.device, weight.dtype)).to(output.device, output.dtype)

        handle = final_norm(model).register_forward_hook(correct)
        try:
            yield
        finally:
            handle.remove()

    def save(self, folder: str | Path) -> Path:
        """Write ``draft_head.safetensors`` (W, b) and ``draft_head.json`` (skip set, threshold, info) to ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}, folder / WEIGHTS_FILE)
        record = {"hidden_size": self.proj.in_features, "skip": self.skip.to_dict(), "threshold": self.threshold,
                  "info": self.info}
        (folder / INFO_FILE).write_text(json.dumps(record, indent=1) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> DraftHead:
        """A head saved by :meth:`save`; FileNotFoundError naming the folder when it holds none."""
        folder = Path(folder)
        if not (folder / INFO_FILE).exists() or not (folder / WEIGHTS_FILE).exists():
            raise FileNotFoundError(f"no draft head in {folder} (expected {INFO_FILE} and {WEIGHTS_FILE})")
        record = json.loads((folder / INFO_FILE).read_text())
        head = cls(record["hidden_size"], SkipSet.from_dict(record["skip"]), record["threshold"], record["info"])
        head.load_state_dict(load_file(folder / WEIGHTS_FILE))
        return head.eval().requires_grad_(False)
