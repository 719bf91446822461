"""How often the skipped model's top-1 token equals the full model's greedy token.

Teacher-forced (SWIFT's cheap signal): the full model greedily continues each held-out
prompt once; then a *single* forward of the skipped model over [prompt + continuation]
gives its top-1 prediction at every continuation position at once. Sequences are batched
with right padding, which a causal model never attends to from earlier positions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .decoding import autoregressive_generate
from .skip import SkipSet, skipping

__all__ = ["AgreementProbe", "reference_batch"]


def reference_batch(model, tokenizer, prompt_texts: list[str], n_tokens: int):
    """Greedy continuations of the full model: (input_ids (B, T), targets (B, T), scored (B, T) bool)."""
    sequences, prompt_lengths = [], []
    for text in prompt_texts:
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        if ids.shape[1] == 0:
            raise ValueError("empty prompt")
        out = autoregressive_generate(model, ids, n_tokens)
        sequences.append(out.sequences[0])
        prompt_lengths.append(ids.shape[1])
    width = max(len(s) for s in sequences) - 1
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    targets = torch.full((len(sequences), width), -1, dtype=torch.long)
    scored = torch.zeros((len(sequences), width), dtype=torch.bool)
    for i, (seq, n_prompt) in enumerate(zip(sequences, prompt_lengths)):
        input_ids[i, : len(seq) - 1] = seq[:-1]
        targets[i, : len(seq) - 1] = seq[1:]
        scored[i, n_prompt - 1: len(seq) - 1] = True     # positions whose next token is a generated one
    return input_ids, targets, scored


@dataclass
class AgreementProbe:
    """Agreement of any skip set with the full model on a fixed reference batch (cached per SkipSet)."""

    model: torch.nn.Module
    input_ids: torch.Tensor        # (B, T)
    targets: torch.Tensor          # (B, T) full model's greedy next tokens
    scored: torch.Tensor           # (B, T) which positions count
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_prompts(cls, model, tokenizer, prompt_texts: list[str], n_tokens: int = 64) -> "AgreementProbe":
        return cls(model, *reference_batch(model, tokenizer, prompt_texts, n_tokens))

    @property
    def n_positions(self) -> int:
        return int(self.scored.sum())

    @torch.inference_mode()
    def top1(self, skip: SkipSet | None) -> torch.Tensor:
        """(B, T) top-1 tokens of the model with ``skip`` removed."""
        with skipping(self.model, skip):
            logits = self.model(input_ids=self.input_ids, use_cache=False).logits     # (B, T, V)
        return logits.argmax(dim=-1)

    def agreement(self, skip: SkipSet | None) -> float:
        """Fraction of scored positions where the skipped model's top-1 equals the full model's greedy token."""
        key = skip or SkipSet()
        if key not in self._cache:
            hits = (self.top1(key) == self.targets) & self.scored
            self._cache[key] = float(hits.sum()) / self.n_positions
        return self._cache[key]

    def per_position(self, skip: SkipSet | None) -> torch.Tensor:
        """(n_positions,) bool: agreement at each scored position, prompt by prompt."""
        return (self.top1(skip) == self.targets)[self.scored]

    def single_block_agreement(self) -> dict[str, list[float]]:
        """Agreement when skipping exactly one block: {'attention': [per layer], 'mlp': [per layer]}."""
        n = self.model.config.num_hidden_layers
        return {
            "attention": [self.agreement(SkipSet(attention=[i])) for i in range(n)],
            "mlp": [self.agreement(SkipSet(mlp=[i])) for i in range(n)],
        }
