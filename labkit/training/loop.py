"""Train the lab's own small Llama on the Python standard library (the loss: :mod:`labkit.training.objective`).

    python -m labkit train --name default            # skip-robust recipe (self-distilled draft path)
    python -m labkit train --name plain --recipe plain

Everything is seeded; a checkpoint is written every ``checkpoint_every`` steps and a rerun with the same
output folder resumes from it (batches are a pure function of the step).
"""
from __future__ import annotations

import importlib.metadata
import json
import math
import platform
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from ..artifacts import arguments
from ..artifacts.arguments import add_config_options, checked, command_parser
from ..artifacts.corpus import corpus_stats
from ..artifacts.paths import CHECKPOINTS_DIR, MODELS_DIR
from ..core.skip import parse_skip_set
from .config import TrainConfig, check_numbers
from .data import batch_at, check_packages, encode_split, load_or_train_tokenizer
from .modelcard import write_model_card
from .objective import training_loss

__all__ = ["train", "build_model", "lr_at", "evaluate", "main"]


def build_model(cfg: TrainConfig, tokenizer) -> LlamaForCausalLM:
    """A freshly initialised Llama of ``cfg``'s shape; the weights depend on ``cfg.seed`` only (the global RNG is
    left as it was)."""
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_heads,
        max_position_embeddings=cfg.context, rms_norm_eps=1e-5, tie_word_embeddings=True,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    config._attn_implementation = "sdpa"
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)
        return LlamaForCausalLM(config)


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


@torch.no_grad()
def evaluate(model, stream: torch.Tensor, context: int, max_windows: int | None = None) -> float:
    """Mean next-token cross-entropy (nats) over consecutive validation windows."""
    was_training = model.training
    model.eval()
    n = (len(stream) - 1) // context
    if max_windows:
        n = min(n, max_windows)
    total, count = 0.0, 0
    for i in range(n):
        chunk = stream[i * context: (i + 1) * context + 1].long()[None]    # (1, T+1)
        logits = model(input_ids=chunk[:, :-1], use_cache=False).logits
        total += F.cross_entropy(logits[0], chunk[0, 1:], reduction="sum").item()
        count += context
    model.train(was_training)
    return total / max(1, count)


def _save_checkpoint(path: Path, model, opt, step: int, history: list, elapsed: float) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "history": history, "elapsed": elapsed}, tmp)
    tmp.replace(path)  # atomic: an interrupted save never corrupts the last checkpoint


def _check(cfg: TrainConfig) -> None:
    """Fail before any work."""
    check_numbers(cfg)
    if cfg.recipe not in ("skip_robust", "plain"):
        raise ValueError(f"recipe must be 'skip_robust' or 'plain', got {cfg.recipe!r}")
    if not 0.0 <= cfg.draft_skip_prob <= 1.0:
        raise ValueError(f"draft_skip_prob must be in [0, 1], got {cfg.draft_skip_prob}")
    if cfg.draft_skip:
        parse_skip_set(cfg.draft_skip).validate(cfg.n_layers)
    if not 0 <= cfg.greedy_tail < cfg.context:
        raise ValueError(f"greedy_tail must be in [0, context={cfg.context}), got {cfg.greedy_tail}")
    check_packages(cfg.packages)
    if cfg.init_from and not (Path(cfg.init_from) / "config.json").exists():
        raise FileNotFoundError(f"init_from: no model folder (config.json) at {cfg.init_from}")
    if cfg.corpus_root and not Path(cfg.corpus_root).is_dir():
        raise FileNotFoundError(f"corpus_root: no folder at {cfg.corpus_root}")


def _token_streams(tokenizer, cfg: TrainConfig, work_dir: Path, corpus_root) -> dict[str, torch.Tensor]:
    """{'train': ids, 'validation': ids (the stdlib's), and 'validation_packages' when the corpus names packages},
    encoded once and kept beside the checkpoints (encoded again if the corpus settings changed)."""
    path = work_dir / "tokens.pt"
    corpus = {"packages": list(cfg.packages), "package_bytes": cfg.package_bytes}
    if path.exists():
        saved = torch.load(path)
        saved_corpus = saved.pop("corpus", {"packages": []})             # files from before packages: stdlib only
        if saved_corpus["packages"] == corpus["packages"] and (not cfg.packages or saved_corpus == corpus):
            return saved
    splits = ("train", "validation") + (("validation_packages",) if cfg.packages else ())
    streams = {s: encode_split(tokenizer, s, corpus_root, cfg.packages, cfg.package_bytes)
               for s in tqdm(splits, desc="encode corpus")}
    torch.save({**streams, "corpus": corpus}, path)
    return streams


def _init_weights(model, cfg: TrainConfig) -> None:
    """Start from ``cfg.init_from``'s weights (a model folder of the same shape and tokenizer)."""
    from_model = LlamaForCausalLM.from_pretrained(cfg.init_from, dtype=torch.float32)
    model.load_state_dict(from_model.state_dict())             # strict: a shape mismatch names the tensor


def _optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))


def _resume(path: Path, model, opt, cfg: TrainConfig) -> tuple[int, list, float]:
    """Load the checkpoint if there is one: (step, history, seconds spent before). At ``fresh_optimizer_at``
    the weights are kept and AdamW's moments start from zero (a new stage with a new loss)."""
    if not path.exists():
        return 0, [], 0.0
    state = torch.load(path, weights_only=False)
    model.load_state_dict(state["model"])
    if state["step"] != cfg.fresh_optimizer_at:
        opt.load_state_dict(state["opt"])
    return state["step"], state["history"], state["elapsed"]


def _run_steps(model, opt, cfg: TrainConfig, streams: dict, ckpt_path: Path, start: int, history: list,
               elapsed_before: float) -> float:
    """The loop from ``start`` to ``cfg.steps``: evaluations and checkpoints on schedule; returns wall seconds."""
    t0 = time.perf_counter()
    bar = tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, desc=f"train {cfg.name}")
    tokens_per_step = cfg.batch_size * cfg.context
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        g = torch.Generator().manual_seed(cfg.seed * 7_919 + step)
        loss, ce = training_loss(model, batch_at(streams["train"], step, cfg), cfg, g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        done = step + 1
        rate = (done - start) * tokens_per_step / (time.perf_counter() - t0)
        bar.set_postfix(loss=f"{loss.item():.3f}", ce=f"{ce:.3f}", tok_s=f"{rate:.0f}")
        if done % cfg.eval_every == 0 or done == cfg.steps:
            history.append({"step": done, "tokens": done * tokens_per_step, "train_ce": ce,
                            "val_loss": evaluate(model, streams["validation"], cfg.context, cfg.eval_windows)})
            model.train()
        if done % cfg.checkpoint_every == 0 or done == cfg.steps:
            _save_checkpoint(ckpt_path, model, opt, done, history, elapsed_before + time.perf_counter() - t0)
    return elapsed_before + time.perf_counter() - t0


def train(cfg: TrainConfig) -> Path:
    """Train (or resume) and write a Hugging Face folder; returns its path. The caller sets torch's threads."""
    _check(cfg)
    corpus_root = Path(cfg.corpus_root) if cfg.corpus_root else None
    out_dir = Path(cfg.out_dir) if cfg.out_dir else MODELS_DIR / cfg.name
    work_dir = Path(cfg.work_dir) if cfg.work_dir else CHECKPOINTS_DIR / cfg.name
    work_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = load_or_train_tokenizer(cfg, corpus_root)
    streams = _token_streams(tokenizer, cfg, work_dir, corpus_root)
    model = build_model(cfg, tokenizer)
    if cfg.init_from:
        _init_weights(model, cfg)                               # a checkpoint, if there is one, overrides it
    model.train()
    opt = _optimizer(model, cfg)
    ckpt_path = work_dir / "checkpoint.pt"
    start, history, elapsed = _resume(ckpt_path, model, opt, cfg)
    wall = _run_steps(model, opt, cfg, streams, ckpt_path, start, history, elapsed)
    model.eval()
    _export(model, tokenizer, cfg, out_dir, {
        "recipe": asdict(cfg), "tokens_seen": cfg.steps * cfg.batch_size * cfg.context, "steps": cfg.steps,
        "wall_time_s": round(wall, 1), "validation_loss": round(evaluate(model, streams["validation"], cfg.context), 4),
        "history": history, "corpus": corpus_stats(corpus_root), "corpus_packages": _package_versions(cfg),
        **({"validation_loss_packages": round(evaluate(model, streams["validation_packages"], cfg.context,
                                                                 max_windows=256), 4)}
           if "validation_packages" in streams else {}),
        "train_tokens_in_corpus": int(len(streams["train"])), "validation_tokens": int(len(streams["validation"])),
        "hardware": f"{platform.processor() or platform.machine()}, {cfg.threads} thread(s), torch {torch.__version__}",
        "python": platform.python_version(),
    })
    return out_dir


def _package_versions(cfg: TrainConfig) -> dict[str, str]:
    """The version of every package whose source the run trained on (import name -> version or '?')."""
    distributions = importlib.metadata.packages_distributions()
    out = {}
    for name in cfg.packages:
        try:
            out[name] = importlib.metadata.version(distributions.get(name, [name])[0])
        except importlib.metadata.PackageNotFoundError:
            out[name] = "?"
    return out


def _export(model, tokenizer, cfg: TrainConfig, out_dir: Path, record: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    half = model.to(torch.float16)
    half.generation_config = GenerationConfig(
        do_sample=False, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    half.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    model.to(torch.float32)
    (out_dir / "training.json").write_text(json.dumps(record, indent=2))
    write_model_card(out_dir)


def main(argv: list[str] | None = None) -> None:
    parser = command_parser(__doc__, raw=True)
    add_config_options(parser, asdict(TrainConfig()), {
        "name": arguments.new_model_name, "corpus_root": arguments.existing_folder,
        **dict.fromkeys(("out_dir", "work_dir", "tokenizer_dir"), arguments.output_folder)})
    cfg = TrainConfig(**vars(parser.parse_args(argv)))
    checked(parser, _check, cfg)
    torch.set_num_threads(cfg.threads)
    out = train(cfg)
    print(f"model written to {out}")


if __name__ == "__main__":
    main()
