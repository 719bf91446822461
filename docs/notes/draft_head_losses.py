"""Why the draft head's loss has a top-1 term: a head fitted on KL(p || q) alone against one fitted on KL + the
top-1 cross-entropy (the shipped recipe), both for `default`'s trained draft path, on the same data and seed.

Teacher-forced agreement on the held-out windows, and decoding (int8 drafts, greedy, one thread, interleaved with
the plain loop) on the 12 first *choosing* prompts of each source at the lab's static thresholds 0.5 and 0.4:
speed over the plain loop, acceptance and drafted tokens per step. Reuses the continuations that
`python -m labkit.train_draft_head` keeps in data/checkpoints (generates them first when they are missing).

    python docs/notes/draft_head_losses.py
"""
import sys
from pathlib import Path

import torch

import labkit
from labkit.artifacts.results import trained_draft_path
from labkit.core.decoding import speculative_generate
from labkit.core.draft_head import DraftHead
from labkit.core.policies import StaticThreshold
from labkit.training.draft_head import (
    HeadConfig,
    agreement,
    continuations,
    continuations_file,
    fit_draft_head,
    hidden_pairs,
    training_windows,
)

sys.path.insert(0, str(Path(__file__).parent))
from draft_head_threshold import measure  # noqa: E402


def fitted_heads(model, tokenizer, skip) -> dict:
    """{label: DraftHead} for KL alone and KL + top-1, fitted as `python -m labkit.train_draft_head` does."""
    cfg = HeadConfig()
    sequences = continuations(model, training_windows(tokenizer, cfg), cfg, continuations_file("default"))
    n_held = int(len(sequences) * cfg.holdout)
    h_draft, h_full = hidden_pairs(model, skip, sequences[n_held:], cfg.prompt_tokens - 1)
    held = hidden_pairs(model, skip, sequences[:n_held], cfg.prompt_tokens - 1)
    print(f"held-out agreement without a head: {agreement(model, None, *held):.3f}")
    heads = {}
    for label, weight in (("KL only", 0.0), ("KL + top-1", 1.0)):
        cfg.top1_weight = weight
        head = DraftHead(model.config.hidden_size, skip)
        fit_draft_head(model, head, h_draft, h_full, cfg)
        heads[label] = head.eval().requires_grad_(False)
        print(f"held-out agreement, {label}: {agreement(model, head, *held):.3f}", flush=True)
    return heads


def decoding_runs(model, skip, heads: dict) -> dict:
    runs = {"no head, 0.5": lambda x: speculative_generate(model, x, skip=skip, policy=StaticThreshold(0.5, 12),
                                                          max_new_tokens=128, draft_weights="int8")}
    for label, head in heads.items():
        for threshold in (0.5, 0.4):
            runs[f"{label}, {threshold}"] = lambda x, h=head, t=threshold: speculative_generate(
                model, x, skip=skip, policy=StaticThreshold(t, 12), max_new_tokens=128, draft_weights="int8",
                draft_head=h)
    return runs


if __name__ == "__main__":
    torch.manual_seed(0)
    model, tokenizer = labkit.load_model("default")
    skip = trained_draft_path("default")["trained draft path"]
    heads = fitted_heads(model, tokenizer, skip)
    torch.set_num_threads(1)
    for source in ("stdlib", "packages"):
        ids = [tokenizer(p.text, return_tensors="pt")["input_ids"] for p in labkit.prompts(12, source=source)]
        for name, (speedup, alpha, per_step) in measure(model, ids, decoding_runs(model, skip, heads)).items():
            print(f"{source:>8}  {name:<16} {speedup:.3f}x  acceptance {alpha:.3f}  drafted/step {per_step:.2f}",
                  flush=True)
