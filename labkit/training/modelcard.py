"""MODEL_CARD.md for a trained lab model, written from the facts recorded beside it.

Facts come from ``training.json`` (written by :mod:`labkit.training.loop`) and, when present,
``robustness.json`` (written by :mod:`labkit.measure.comparisons.robustness`); nothing is typed in by hand.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from ..artifacts.paths import SEARCH_DIR
from ..artifacts.results import search_hint
from .config import SKIP_ROBUST_SETTINGS, TrainConfig

__all__ = ["write_model_card", "train_command"]


def _robustness_section(rob: dict | None) -> str:
    if not rob:
        return "Not measured yet: run `python -m labkit robustness --model <name>`.\n"
    lines = [
        f"Measured by `{rob['command']}` on {rob['n_prompts']} held-out prompts "
        f"({rob['n_positions']} teacher-forced positions of the full model's greedy continuation), "
        f"{rob['hardware']}.",
        "",
        "Agreement = how often the skipped model's top-1 token equals the full model's greedy token.",
        "",
        "| sub-layers skipped | agreement (fresh prompts) | on the prompts that chose it | skip set |",
        "|---|---|---|---|",
    ]
    for row in rob["by_ratio"]:
        lines.append(f"| {row['skipped']}/{rob['n_blocks']} ({row['ratio']:.1%}) | **{row['agreement']:.3f}** | "
                     f"{row['agreement_on_selection_prompts']:.3f} | `{row['skip']}` |")
    lines.append("")
    lines.append(rob.get("method", ""))
    return "\n".join(lines) + "\n"


def train_command(cfg: dict) -> str:
    """The command that retrains this model: every setting that differs from TrainConfig's defaults."""
    defaults = TrainConfig().__dict__
    skip = {"name", "out_dir", "work_dir", "tokenizer_dir", "corpus_root", "eval_every", "checkpoint_every", "threads"}
    if cfg.get("recipe") == "plain":  # the skip-robust settings have no effect on a plain run
        skip |= SKIP_ROBUST_SETTINGS
    args = [f"--{k.replace('_', '-')} {shlex.quote(str(v))}" for k, v in cfg.items()
            if k not in skip and k in defaults and defaults[k] != v]
    return " ".join(["python -m labkit train --name", cfg["name"], *args])


def _recipe_text(cfg: dict) -> str:
    """The recipe in words, from the recorded settings."""
    if cfg["recipe"] == "plain":
        return "**Plain.** Cross-entropy of the full model only: no skipping during training."
    return ("**Skip-robust (self-distilled draft path).** Each step runs the full model and a copy "
            "with a random set of attention/MLP blocks skipped (ratio drawn from "
            f"U({cfg['skip_ratio_min']}, {cfg['skip_ratio_max']}), later layers more likely, layer 0's "
            "attention never); loss = cross-entropy of the full model + "
            f"{cfg['distill_weight']} x KL(full || skipped), the full model's distribution held fixed."
            + (f" On {cfg['draft_skip_prob']:.0%} of the steps the skipped copy is instead one fixed draft "
               f"path, `{cfg['draft_skip']}`." if cfg.get("draft_skip") and cfg.get("draft_skip_prob") else "")
            + (f" The KL term's windows end in {cfg['greedy_tail']} tokens of the full model's own greedy "
               "continuation of the text before them (on-policy positions, as the draft meets them while "
               "decoding)." if cfg.get("greedy_tail") else "")
            + (f" Plus {cfg['top1_weight']} x cross-entropy of the skipped copy against the full model's top-1 "
               "token (what greedy verification checks)." if cfg.get("top1_weight") else ""))


def _draft_head_section(model_dir: Path) -> str:
    """A section on the draft head fitted for this model (``python -m labkit train-draft-head``), when it has one."""
    path = model_dir / "draft_head" / "draft_head.json"
    if not path.exists():
        return ""
    head = json.loads(path.read_text())
    info, skip = head["info"], head["skip"]
    held = info["held_out_agreement"]
    return f"""

## Draft head
`draft_head/` holds a residual linear map (h -> h + W h + b, {head['hidden_size']} x {head['hidden_size']}) that the \
self-draft applies to its last hidden state when it skips attention {skip['attention']} and MLP {skip['mlp']}; the \
target never runs it, so decoding stays lossless (`labkit.load_draft_head`, `speculative_generate(draft_head=...)`). \
Fitted with `{info['command']}` on {info['machine']} (torch {info['torch']}; {info['seconds']:.0f} s when the model's \
greedy continuations are already in data/checkpoints, about 5 minutes more on 2 cores to generate them): KL(full || \
draft) + cross-entropy against the full model's top-1 token on {info['positions']:,} positions of the model's own \
greedy continuations ({info['config']['new_tokens']} tokens) of {info['windows'] - info['held_out_windows']:,} windows \
of the training split, {info['config']['epochs']} epochs. On the {info['held_out_windows']} held-out windows the \
draft's top-1 agrees with the full model's on {held['without_head']:.3f} of positions without the head and \
{held['with_head']:.3f} with it. Stop threshold recorded with it: {head['threshold']} (chosen on the choosing prompts, \
`docs/notes/draft_head_threshold.py`)."""


def _search_section(model_dir: Path) -> str:
    """The draft configuration the lab's search ships for this model (``data/search/<name>/best.json``), if any."""
    path = SEARCH_DIR / model_dir.name / "best.json"
    if not path.exists():
        return ""
    best = json.loads(path.read_text())
    overall = best["overall"]
    config = overall.get("config") or {"skip": overall["skip"]}
    skip = config["skip"]
    how = (f"the fastest of its five best configurations on the wall clock (final check: "
           f"{overall['final_geomean_speedup']:.2f}x the plain loop over the choosing prompts)"
           if overall.get("chosen_by", "").startswith("wall clock") else "its lowest objective value")
    draft = (f"{config.get('draft_weights') or 'fp32'} draft weights, {config.get('policy', 'static')} stop rule "
             f"(threshold {config.get('threshold', 0.5)}, at most {config.get('max_draft', 12)} drafted)"
             if "draft_weights" in config else "the lab's default stop rule")
    return f"""

## Shipped draft configuration
`labkit.best_config("{model_dir.name}")`: skip attention {skip['attention']} and MLP {skip['mlp']}, {draft}. Chosen by \
the lab's Bayesian search ({best['objective']} objective, {best['n_trials']} trials over {len(best['studies'])} \
studies; {search_hint(model_dir.name)}) as {how}. Why and how it compares: the README's "Search" section and \
`docs/decisions.md`."""


def write_model_card(model_dir: Path) -> Path:
    """Write MODEL_CARD.md from the folder's training.json (and robustness.json when present); returns its path."""
    model_dir = Path(model_dir)
    rec = json.loads((model_dir / "training.json").read_text())
    rob_path = model_dir / "robustness.json"
    rob = json.loads(rob_path.read_text()) if rob_path.exists() else None
    cfg = rec["recipe"]
    corpus = rec["corpus"]
    recipe_text = _recipe_text(cfg)
    hist = "\n".join(f"| {h['step']} | {h['tokens']:,} | {h['train_ce']:.3f} | {h['val_loss']:.3f} |"
                     for h in rec["history"])
    notes = "".join(f"- {n}\n" for n in rec.get("notes", []))
    command = train_command(cfg)
    text = f"""# Model card: `{cfg['name']}`

A small `LlamaForCausalLM` trained by this lab (`{command}`)
on the Python standard library's own source, so that it can be rebuilt on any machine without downloads.

## Recipe
{recipe_text}

- Architecture: {cfg['n_layers']} layers x {cfg['hidden_size']} hidden, {cfg['n_heads']} heads, MLP \
{cfg['intermediate_size']}, tied embeddings, context {cfg['context']}.
- Tokenizer: byte-level BPE, {cfg['vocab_size']} tokens, trained on the training split (`tokenizers`).
- Optimiser{' (the last stage; earlier stages in the notes below)' if rec.get('notes') else ''}: AdamW (beta 0.9/0.95, \
weight decay {cfg['weight_decay']}), peak lr {cfg['lr']}, {cfg['warmup_steps']} warm-up steps, cosine to \
{cfg['min_lr_ratio']} x peak; batch {cfg['batch_size']} x {cfg['context']} tokens; seed {cfg['seed']}.
- Tokens seen: {rec['tokens_seen']:,} ({rec['steps']} steps); wall time {rec['wall_time_s'] / 60:.1f} min on \
{rec['hardware']}.
- Weights stored in fp16 (safetensors); the lab loads them as fp32.
{notes}
## Data
Standard library of Python {rec['python']} (`{corpus['stdlib_root']}`), `*.py` without test folders, split by a hash \
of each file's path:
train {corpus['train']['files']} files / {corpus['train']['bytes']:,} bytes ({rec['train_tokens_in_corpus']:,} tokens),
validation {corpus['validation']['files']} files / {corpus['validation']['bytes']:,} bytes \
({rec['validation_tokens']:,} tokens).

## Quality
Validation loss (full validation split, nats/token): **{rec['validation_loss']:.3f}**.

| step | tokens | train CE | val loss (first windows) |
|---|---|---|---|
{hist}

## Skip robustness
{_robustness_section(rob)}{_draft_head_section(model_dir)}{_search_section(model_dir)}"""
    path = model_dir / "MODEL_CARD.md"
    path.write_text(text)
    return path
