"""Fit Medusa heads (:mod:`labkit.core.medusa`) for a model on its own greedy continuations: the model never changes.

    python -m labkit train-heads --model default    # a few minutes on 2 cores

Data: windows of the training split (``prompt_tokens`` every ``stride`` tokens of every file, at most
``max_windows``), each followed by the model's greedy continuation (``new_tokens``): the text a decoding call
meets (self-distillation, as Medusa-2's recipe and this lab's draft head). Features, teacher-forced in one
forward per batch: the final-norm output h_t at every continuation position t. Labels: the continuation itself,
x_{t+1+k} for head k, i.e. the model's argmax k tokens after its next one, so head k learns what the target
would say there. Loss: the mean over heads of the cross-entropy of q_k against that label; AdamW for ``steps``
mini-batches of ``batch_positions`` positions, seeded. A share of the windows (``holdout``) is kept out; each
head's top-1 agreement with its label there, before (every head the LM head itself) and after, is recorded in
the heads' JSON with the losses and the time. The continuations are kept in data/checkpoints/.
"""
from __future__ import annotations

import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..artifacts import arguments
from ..artifacts.arguments import add_config_options, command_parser
from ..artifacts.models import fingerprint, load_model, medusa_heads_folder, model_key
from ..artifacts.paths import CHECKPOINTS_DIR
from ..core.medusa import MedusaHeads, model_signature
from .draft_head import continuations, training_windows

__all__ = ["MedusaConfig", "hidden_and_labels", "head_agreement", "fit_heads", "main"]


@dataclass
class MedusaConfig:
    model: str = "default"
    n_heads: int = 4
    prompt_tokens: int = 128
    new_tokens: int = 64
    stride: int = 1500             # one window every `stride` tokens of each training file
    max_windows: int = 256         # 0 = every window
    batch: int = 64                # sequences per greedy-continuation batch
    steps: int = 600
    batch_positions: int = 256
    lr: float = 1e-3
    holdout: float = 0.05
    seed: int = 0
    corpus_root: str = ""          # "" = this Python's standard library


@torch.no_grad()
def hidden_and_labels(model, sequences: torch.Tensor, start: int, n_heads: int,
                      batch: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """h_t (M, H) at positions t = start.. of every sequence that have all ``n_heads`` labels, and the labels
    (M, K): x_{t+1+k} for k = 1..K."""
    length = sequences.shape[1]
    stop = length - n_heads - 1                                       # the last t with x_{t+1+K} in the sequence
    if stop <= start:
        raise ValueError(f"sequences of {length} tokens hold no position after {start} with {n_heads} labels")
    offsets = torch.arange(start, stop)[:, None] + torch.arange(2, n_heads + 2)[None]          # (T', K)
    hidden, labels = [], []
    for b in tqdm(range(0, len(sequences), batch), desc="hidden states"):
        ids = sequences[b:b + batch]
        out = model(input_ids=ids, use_cache=False, output_hidden_states=True)
        hidden.append(out.hidden_states[-1][:, start:stop].reshape(-1, out.hidden_states[-1].shape[-1]).float())
        labels.append(ids[:, offsets].reshape(-1, n_heads))
    return torch.cat(hidden), torch.cat(labels)


def head_agreement(model, heads: MedusaHeads, hidden: torch.Tensor, labels: torch.Tensor,
                   chunk: int = 2048) -> list[float]:
    """Each head's top-1 agreement with its label (the model's own greedy token k + 1 ahead)."""
    hits = torch.zeros(heads.n_heads)
    with torch.no_grad():
        for b in range(0, len(hidden), chunk):
            guess = heads.logits(model, hidden[b:b + chunk]).argmax(-1)                  # (b, K)
            hits += (guess == labels[b:b + chunk]).float().sum(0)
    return (hits / max(1, len(hidden))).tolist()


def fit_heads(model, heads: MedusaHeads, hidden: torch.Tensor, labels: torch.Tensor,
              cfg: MedusaConfig) -> list[float]:
    """AdamW on the heads' mean cross-entropy, ``cfg.steps`` seeded mini-batches; the loss of every step."""
    generator = torch.Generator().manual_seed(cfg.seed)
    heads.train().requires_grad_(True)
    optimizer = torch.optim.AdamW(heads.parameters(), lr=cfg.lr, weight_decay=0.0)
    history = []
    for _ in tqdm(range(cfg.steps), desc="fitting the heads"):
        rows = torch.randint(len(hidden), (min(cfg.batch_positions, len(hidden)),), generator=generator)
        logits = heads.logits(model, hidden[rows])                                        # (b, K, V)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels[rows].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(float(loss.detach()))
    heads.eval().requires_grad_(False)
    return history


def _parse(argv: list[str] | None) -> MedusaConfig:
    parser = command_parser(__doc__.split("\n")[0])   # prog: how it was called (labkit.cli)
    counts = ("n_heads", "prompt_tokens", "new_tokens", "stride", "batch", "steps", "batch_positions")
    add_config_options(parser, asdict(MedusaConfig()), {
        **dict.fromkeys(counts, arguments.count), "model": arguments.model, "max_windows": arguments.natural,
        "lr": arguments.positive, "holdout": arguments.open_fraction, "seed": arguments.natural,
        "corpus_root": arguments.existing_folder})
    cfg = MedusaConfig(**vars(parser.parse_args(argv)))
    if cfg.new_tokens <= cfg.n_heads:
        parser.error("--new-tokens must be larger than --n-heads (each position needs n_heads labels)")
    return cfg


def train_heads(model, sequences: torch.Tensor, cfg: MedusaConfig) -> tuple[MedusaHeads, dict]:
    """Heads fitted on ``sequences`` (windows and their greedy continuations), and what the fit recorded."""
    n_held = max(1, int(len(sequences) * cfg.holdout))
    start = cfg.prompt_tokens - 1                                     # h at the window's last token onwards
    hidden, labels = hidden_and_labels(model, sequences[n_held:], start, cfg.n_heads)
    held_hidden, held_labels = hidden_and_labels(model, sequences[:n_held], start, cfg.n_heads)
    heads = MedusaHeads(model.config.hidden_size, cfg.n_heads, model_signature(model))
    before = head_agreement(model, heads, held_hidden, held_labels)
    losses = fit_heads(model, heads, hidden, labels, cfg)
    record = {"windows": len(sequences), "held_out_windows": n_held, "positions": len(hidden),
              "loss_first_last": [losses[0], losses[-1]], "loss_every_10_steps": losses[::10],
              "held_out_agreement": {"untrained": before, "fitted": head_agreement(model, heads, held_hidden,
                                                                                   held_labels)}}
    return heads, record


def main(argv: list[str] | None = None) -> Path:
    cfg = _parse(argv)
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_model(cfg.model)
    t0 = time.perf_counter()
    windows = training_windows(tokenizer, cfg)
    work_file = CHECKPOINTS_DIR / f"medusa-{model_key(cfg.model)}-{fingerprint(cfg.model)}" / "continuations.pt"
    sequences = continuations(model, windows, cfg, work_file)
    heads, record = train_heads(model, sequences, cfg)
    args = sys.argv[1:] if argv is None else argv
    heads.info = {"config": asdict(cfg), "command": " ".join(["python -m labkit train-heads", *args]),
                  "model_fingerprint": fingerprint(cfg.model), **record,
                  "seconds": round(time.perf_counter() - t0, 1), "torch": torch.__version__,
                  "machine": platform.machine()}
    folder = heads.save(medusa_heads_folder(cfg.model))
    fitted = ", ".join(f"{a:.3f}" for a in record["held_out_agreement"]["fitted"])
    print(f"{cfg.n_heads} Medusa heads written to {folder}: held-out top-1 agreement per head {fitted}; "
          f"loss {record['loss_first_last'][0]:.3f} -> {record['loss_first_last'][1]:.3f} in "
          f"{heads.info['seconds']:.0f} s")
    return folder
