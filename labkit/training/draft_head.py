"""Fit a draft head (:mod:`labkit.core.draft_head`) for one skip set of a model: the model itself never changes.

    python -m labkit train-draft-head --model default    # about 8 minutes on 2 cores, 3 once the continuations exist

Data: the model's own greedy continuations (``new_tokens`` each) of windows of the training split (``prompt_tokens``
taken every ``stride`` tokens of every file): the positions a draft meets while decoding (on-policy, as in the
model's own recipe). Features, teacher-forced in one forward each: the final-norm output h_d of the draft (the set
skipped) and h_f of the full model at every continuation position. Loss, with p = softmax(lm_head(h_f)) the target
and q = softmax(lm_head(head(h_d))) the draft: KL(p || q) + ``top1_weight`` x cross-entropy of q against p's top-1
token (what greedy verification checks; it also keeps the draft's confidence sharp enough for the stop rule).
A share of the windows (``holdout``) is kept out; agreement there before and after is recorded in the head's info.
The continuations are kept in data/checkpoints/, so an interrupted run starts again from them.
"""
from __future__ import annotations

import platform
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..artifacts import arguments
from ..artifacts.arguments import add_config_options, checked, command_parser
from ..artifacts.corpus import corpus_files
from ..artifacts.models import draft_head_folder, fingerprint, load_model, model_key
from ..artifacts.paths import CHECKPOINTS_DIR
from ..artifacts.results import trained_draft_path
from ..core.draft_head import DraftHead, final_norm
from ..core.skip import SkipSet, parse_skip_set, skipping
from .modelcard import write_model_card
from .objective import greedy_continuation

__all__ = ["HeadConfig", "training_windows", "continuations", "hidden_pairs", "fit_draft_head", "agreement",
           "continuations_file",
           "main"]


@dataclass
class HeadConfig:
    model: str = "default"
    skip: str = ""                 # "" = the draft path the model was trained with (its training.json)
    prompt_tokens: int = 128
    new_tokens: int = 128
    stride: int = 1500             # one window every `stride` tokens of each training file
    max_windows: int = 0           # 0 = every window
    batch: int = 32
    epochs: int = 3
    lr: float = 1e-3
    top1_weight: float = 1.0
    threshold: float = 0.4         # the stop threshold recorded with the head (docs/notes/draft_head_threshold.py)
    holdout: float = 0.05
    seed: int = 0
    corpus_root: str = ""          # "" = this Python's standard library


def training_windows(tokenizer, cfg: HeadConfig) -> torch.Tensor:
    """(N, prompt_tokens) token windows of the training split, every ``stride`` tokens of every file."""
    windows = []
    for path in corpus_files("train", Path(cfg.corpus_root) if cfg.corpus_root else None):
        text = path.read_text(encoding="utf-8", errors="replace")
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"][0].tolist()
        windows += [ids[s:s + cfg.prompt_tokens] for s in range(0, len(ids) - cfg.prompt_tokens - 2, cfg.stride)]
    random.Random(cfg.seed).shuffle(windows)
    windows = windows[:cfg.max_windows] if cfg.max_windows else windows
    if not windows:
        raise ValueError("no training windows: the training split has no file longer than prompt_tokens")
    return torch.tensor(windows)


@torch.inference_mode()
def continuations(model, windows: torch.Tensor, cfg: HeadConfig, work_file: Path | None = None) -> torch.Tensor:
    """(N, prompt_tokens + new_tokens): each window followed by the model's greedy continuation. With ``work_file``,
    finished batches are saved as they come and reused by a rerun with the same windows."""
    done = torch.load(work_file) if work_file is not None and work_file.exists() else {}
    if done and not torch.equal(done["windows"], windows):
        done = {}
    parts = done.get("parts", [])
    starts = range(len(parts) * cfg.batch, len(windows), cfg.batch)
    for start in tqdm(starts, desc="greedy continuations", initial=len(parts), total=len(parts) + len(starts)):
        tokens, _ = greedy_continuation(model, windows[start:start + cfg.batch], cfg.new_tokens)
        parts.append(torch.cat([windows[start:start + cfg.batch], tokens], 1))
        if work_file is not None:
            work_file.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"windows": windows, "parts": parts}, work_file)
    return torch.cat(parts)


@torch.inference_mode()
def hidden_pairs(model, skip: SkipSet, sequences: torch.Tensor, start: int,
                 batch: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Final-norm outputs (h_d of the draft, h_f of the full model), (M, H) each, at positions start.. of every
    sequence, teacher-forced."""
    captured = {}
    handle = final_norm(model).register_forward_hook(lambda module, inputs, output: captured.update(h=output))
    drafts, fulls = [], []
    try:
        for b in tqdm(range(0, len(sequences), batch), desc="hidden states"):
            ids = sequences[b:b + batch]
            model(input_ids=ids, use_cache=False)
            fulls.append(captured["h"][:, start:].reshape(-1, captured["h"].shape[-1]).float())
            with skipping(model, skip):
                model(input_ids=ids, use_cache=False)
            drafts.append(captured["h"][:, start:].reshape(-1, captured["h"].shape[-1]).float())
    finally:
        handle.remove()
    return torch.cat(drafts), torch.cat(fulls)


def continuations_file(model_name: str) -> Path:
    """Where a model's continuations are kept between runs: per model and weights (a retrained model starts afresh)."""
    return CHECKPOINTS_DIR / f"draft_head-{model_key(model_name)}-{fingerprint(model_name)}" / "continuations.pt"


def _logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The model's LM head on final-norm outputs (with Gemma2's soft cap where the model has one)."""
    lm_head = model.get_output_embeddings()          # read, never trained: detached, so the model gets no grads
    bias = lm_head.bias.detach() if getattr(lm_head, "bias", None) is not None else None
    logits = F.linear(hidden, lm_head.weight.detach(), bias)                    # (M, V)
    cap = getattr(model.config, "final_logit_softcapping", None)
    return cap * torch.tanh(logits / cap) if cap else logits


def agreement(model, head: DraftHead | None, h_draft: torch.Tensor, h_full: torch.Tensor) -> float:
    """Share of positions where the draft's top-1 (through ``head``, or without one) is the full model's."""
    with torch.no_grad():
        draft = _logits(model, head(h_draft) if head is not None else h_draft).argmax(-1)
        return float((draft == _logits(model, h_full).argmax(-1)).float().mean())


def fit_draft_head(model, head: DraftHead, h_draft: torch.Tensor, h_full: torch.Tensor, cfg: HeadConfig) -> list[float]:
    """AdamW on KL(p || q) + top1_weight x CE(q, argmax p), mini-batches of 1024 positions; the mean loss per epoch."""
    generator = torch.Generator().manual_seed(cfg.seed)
    optimizer = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=0.0)
    history = []
    for _ in tqdm(range(cfg.epochs), desc="fitting the draft head"):
        order, total = torch.randperm(len(h_draft), generator=generator), 0.0
        for b in range(0, len(order), 1024):
            rows = order[b:b + 1024]
            with torch.no_grad():
                log_p = F.log_softmax(_logits(model, h_full[rows]), -1)                 # (b, V)
            log_q = F.log_softmax(_logits(model, head(h_draft[rows])), -1)               # (b, V)
            loss = F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")
            loss = loss + cfg.top1_weight * F.nll_loss(log_q, log_p.argmax(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(rows)
        history.append(total / len(order))
    return history


def _parse(argv: list[str] | None) -> HeadConfig:
    parser = command_parser(__doc__.split("\n")[0])   # prog: how it was called (labkit.cli)
    add_config_options(parser, asdict(HeadConfig()), {
        "model": arguments.model, "prompt_tokens": arguments.count, "new_tokens": arguments.count,
        "stride": arguments.count, "max_windows": arguments.natural, "batch": arguments.count,
        "epochs": arguments.count, "lr": arguments.positive, "top1_weight": arguments.nonnegative,
        "threshold": arguments.fraction, "holdout": arguments.open_fraction, "seed": arguments.natural,
        "corpus_root": arguments.existing_folder})
    cfg = HeadConfig(**vars(parser.parse_args(argv)))
    if cfg.skip:
        checked(parser, parse_skip_set, cfg.skip)
    elif trained_draft_path(cfg.model).get("trained draft path") is None:
        parser.error(f"--skip is needed: model {cfg.model!r} was not trained with a fixed draft path")
    return cfg


def main(argv: list[str] | None = None) -> None:
    cfg = _parse(argv)
    torch.manual_seed(cfg.seed)
    skip = parse_skip_set(cfg.skip) if cfg.skip else trained_draft_path(cfg.model).get("trained draft path")
    model, tokenizer = load_model(cfg.model)
    t0 = time.perf_counter()
    windows = training_windows(tokenizer, cfg)
    work_file = continuations_file(cfg.model)
    sequences = continuations(model, windows, cfg, work_file)
    n_held = max(1, int(len(sequences) * cfg.holdout))
    h_draft, h_full = hidden_pairs(model, skip, sequences[n_held:], cfg.prompt_tokens - 1)
    held_draft, held_full = hidden_pairs(model, skip, sequences[:n_held], cfg.prompt_tokens - 1)
    head = DraftHead(model.config.hidden_size, skip, cfg.threshold)
    before = agreement(model, None, held_draft, held_full)
    history = fit_draft_head(model, head, h_draft, h_full, cfg)
    args = sys.argv[1:] if argv is None else argv
    head.info = {
        "config": asdict(cfg), "command": " ".join(["python -m labkit train-draft-head", *args]),
        "windows": len(sequences), "held_out_windows": n_held, "positions": len(h_draft), "loss_per_epoch": history,
        "held_out_agreement": {"without_head": before, "with_head": agreement(model, head, held_draft, held_full)},
        "seconds": round(time.perf_counter() - t0, 1), "torch": torch.__version__, "machine": platform.machine(),
    }
    folder = head.save(draft_head_folder(cfg.model))
    if (folder.parent / "training.json").exists():                  # a lab model: its card describes the head
        write_model_card(folder.parent)
    print(f"draft head for {skip} written to {folder}: held-out agreement "
          f"{before:.3f} -> {head.info['held_out_agreement']['with_head']:.3f} in {head.info['seconds']:.0f} s")
