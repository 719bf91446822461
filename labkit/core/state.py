"""What one decoding call carries from step to step.

Cache invariant between steps: the KV cache holds every token in ``tokens`` but the last, which is
*pending* (its keys/values are computed by the next forward, draft or verify).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .sampling import Warp

__all__ = ["DecodingState"]


@dataclass
class DecodingState:
    model: torch.nn.Module          # the target: p comes from it
    cache: object                   # its KV cache (a transformers DynamicCache)
    tokens: list[int]               # prompt + emitted so far; the last one is pending
    prompt_length: int
    warp: Warp                      # greedy or how logits become p and q
    eos: frozenset[int]
    generator: torch.Generator | None = None

    @property
    def position(self) -> int:
        """Sequence length before this step; the pending token sits at position - 1."""
        return len(self.tokens)

    @property
    def n_emitted(self) -> int:
        return len(self.tokens) - self.prompt_length

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)
