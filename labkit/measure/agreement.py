"""How often the skipped model's top-1 token equals the full model's greedy token: α, teacher-forced.

The full model greedily continues each held-out prompt once; then a *single* forward of the skipped
model over [prompt + continuation] gives its top-1 prediction at every continuation position at once
(SWIFT's cheap "matchness" signal). Sequences are batched with right padding, which a causal model never
attends to from earlier positions. :func:`one_pass_check` is the same single forward with nothing
skipped: the full model reproduces its own greedy tokens, which is why one verify pass can check a whole
draft. :func:`token_comparison` puts one completion of the draft beside the full model's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..core.decoding import autoregressive_generate
from ..core.devices import clock, model_device
from ..core.skip import SkipSet, skipping

__all__ = ["AgreementProbe", "reference_batch", "one_pass_check", "TokenComparison", "token_comparison"]


def reference_batch(model, tokenizer, prompt_texts: list[str], n_tokens: int):
    """Greedy continuations of the full model: (input_ids (B, T), targets (B, T), scored (B, T) bool)."""
    sequences, prompt_lengths = [], []
    for text in prompt_texts:
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        if ids.shape[1] == 0:
            raise ValueError("empty prompt")
        out = autoregressive_generate(model, ids, n_tokens)
        sequences.append(out.sequences[0].cpu())                 # the batch is built on the CPU
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
    def from_prompts(cls, model, tokenizer, prompt_texts: list[str], n_tokens: int = 64) -> AgreementProbe:
        return cls(model, *reference_batch(model, tokenizer, prompt_texts, n_tokens))

    @property
    def n_positions(self) -> int:
        return int(self.scored.sum())

    @torch.inference_mode()
    def top1(self, skip: SkipSet | None) -> torch.Tensor:
        """(B, T) top-1 tokens of the model with ``skip`` removed."""
        with skipping(self.model, skip):
            logits = self.model(input_ids=self.input_ids.to(model_device(self.model)), use_cache=False).logits
        return logits.argmax(dim=-1).cpu()                                          # (B, T), beside the targets

    def agreement(self, skip: SkipSet | None) -> float:
        """Fraction of scored positions where the skipped model's top-1 equals the full model's greedy token."""
        key = skip or SkipSet()
        if key not in self._cache:
            hits = (self.top1(key) == self.targets) & self.scored
            self._cache[key] = float(hits.sum()) / self.n_positions
        return self._cache[key]

    def single_block_agreement(self) -> dict[str, list[float]]:
        """Agreement when skipping exactly one block: {'attention': [per layer], 'mlp': [per layer]}."""
        n = self.model.config.num_hidden_layers
        return {
            "attention": [self.agreement(SkipSet(attention=[i])) for i in range(n)],
            "mlp": [self.agreement(SkipSet(mlp=[i])) for i in range(n)],
        }


@torch.inference_mode()
def one_pass_check(model, sequence, prompt_length: int = 1, tokenizer=None) -> dict:
    """Feed ``sequence`` to the full model in ONE forward; compare its argmax at every position with
    the sequence's next token (for the model's own greedy output they all agree).

    Returns ``{"table": DataFrame (one row per checked position), "all_match": bool, "n_checked": int,
    "n_match": int, "forward_ms": float}``. Positions ``prompt_length - 1 .. T - 2`` are checked:
    those whose next token was generated.
    """
    import pandas as pd

    ids = sequence.sequences if hasattr(sequence, "sequences") else sequence
    ids = torch.as_tensor(ids, dtype=torch.long)
    if ids.dim() == 1:
        ids = ids[None]
    if ids.shape[0] != 1 or ids.shape[1] < 2:
        raise ValueError(f"sequence must have shape (1, T) with T >= 2, got {tuple(ids.shape)}")
    if not 1 <= prompt_length < ids.shape[1]:
        raise ValueError(f"prompt_length must be in [1, {ids.shape[1] - 1}], got {prompt_length}")
    t0 = clock()
    logits = model(input_ids=ids.to(model_device(model)), use_cache=False).logits[0].float().cpu()   # (T, V): one pass
    forward_ms = 1e3 * (clock() - t0)
    probs = torch.softmax(logits, dim=-1)
    argmax = logits.argmax(dim=-1)
    seq = ids[0]
    rows = []
    labels = {t: tokenizer.decode([t]) for t in set(seq.tolist() + argmax.tolist())} if tokenizer else None
    for t in range(prompt_length - 1, seq.shape[0] - 1):
        nxt, am = int(seq[t + 1]), int(argmax[t])
        row = {"position": t, "input_token": int(seq[t]), "next_token": nxt, "argmax": am, "match": nxt == am,
               "p_argmax": float(probs[t, am])}
        if labels is not None:
            row.update(input_text=labels[int(seq[t])], next_text=labels[nxt], argmax_text=labels[am])
        rows.append(row)
    table = pd.DataFrame(rows)
    n_match = int(table["match"].sum())
    return {"table": table, "all_match": n_match == len(table), "n_checked": len(table), "n_match": n_match,
            "forward_ms": forward_ms}


@dataclass
class TokenComparison:
    """A prompt's greedy continuation by the full model and by the draft (the model minus ``skip``)."""

    prompt_ids: list[int]
    full: list[int]              # the full model's greedy tokens
    draft_forced: list[int]      # the draft's top-1 at each position, given the full model's prefix
    draft_free: list[int]        # the draft's own greedy continuation (fed its own tokens)
    skip: SkipSet

    @property
    def agree(self) -> list[bool]:
        return [a == b for a, b in zip(self.draft_forced, self.full)]

    @property
    def agreement(self) -> float:
        return sum(self.agree) / len(self.full) if self.full else float("nan")

    @property
    def first_divergence(self) -> int | None:
        """First position where the draft's own continuation leaves the full model's (None: never)."""
        return next((i for i, (a, b) in enumerate(zip(self.draft_free, self.full)) if a != b), None)

    @property
    def verify_steps(self) -> int:
        """Steps (verify forwards) greedy self-speculative decoding takes for these tokens if the draft
        never stops early: each disagreement ends a step (the full model puts its own token there), and a
        last step ends the run, whose final token the full model emits whatever the draft said."""
        return sum(not a for a in self.agree[:-1]) + 1 if self.full else 0

    def accepted_runs(self) -> list[int]:
        """Lengths of the runs of agreeing tokens between disagreements."""
        runs, current = [], 0
        for a in self.agree:
            if a:
                current += 1
            else:
                runs.append(current)
                current = 0
        runs.append(current)
        return runs


@torch.inference_mode()
def token_comparison(model, tokenizer, prompt_text: str, skip: SkipSet, n_tokens: int = 32) -> TokenComparison:
    """The full model's greedy continuation of ``prompt_text``, and the draft's guesses for it.

    ``draft_forced``: one forward of the skipped model over prompt + full continuation (teacher
    forcing: at every position the draft sees the full model's tokens, as after each verification);
    ``draft_free``: the skipped model continuing the prompt on its own (greedy, with a KV cache, as it
    drafts). EOS is not special here: both run for ``n_tokens``.
    """
    if not isinstance(skip, SkipSet):
        raise TypeError(f"skip must be a labkit.SkipSet, got {type(skip).__name__}")
    skip.validate(model.config.num_hidden_layers)
    ids = tokenizer(prompt_text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    if ids.shape[1] == 0:
        raise ValueError("empty prompt")
    n_prompt = ids.shape[1]
    full = autoregressive_generate(model, ids, n_tokens, eos_token_id=[]).new_tokens
    sequence = torch.tensor([ids[0].tolist() + full[:-1]]) if full else ids
    with skipping(model, skip):
        logits = model(input_ids=sequence.to(model_device(model)), use_cache=False).logits[0]    # (T, V)
        forced = logits[n_prompt - 1:].argmax(dim=-1).tolist()[: len(full)]
        free = autoregressive_generate(model, ids, n_tokens, eos_token_id=[]).new_tokens
    return TokenComparison(prompt_ids=ids[0].tolist(), full=full, draft_forced=forced, draft_free=free, skip=skip)
