"""Train the lab's own small Llama on the Python standard library.

    python -m labkit.train --name default            # skip-robust recipe (self-distilled draft path)
    python -m labkit.train --name plain --recipe plain

Recipe ``skip_robust`` (the shipped ``default``): every step runs the full model *and* a
randomly skipped copy of itself (the same weights with some attention/MLP blocks removed,
as :mod:`labkit.skip` does while drafting). The loss is

    CE(full model, data)  +  distill_weight * KL(full model (no grad) || skipped model)

so the weights learn to make every sub-network agree with the whole network: the draft
path is trained directly (a cousin of LayerSkip's stochastic depth, Elhoushi et al. 2024).
Skipped blocks are drawn per step: a skip ratio r ~ U(min, max), then round(r * 2L)
blocks without replacement, later layers more likely (weight l + 1), never layer 0's
attention. With ``draft_skip`` set, a share ``draft_skip_prob`` of the steps draft with that one
fixed set instead (LayerSkip-style training of a single draft path, e.g. in a second stage that
extends the token budget of a finished run). With ``greedy_tail`` = N, the KL term's windows end
in N tokens of the full model's own greedy continuation instead of corpus text: on-policy
positions, the text a draft actually meets while decoding (DistillSpec, Zhou et al. 2023).
With ``top1_weight`` > 0 the draft is also trained with cross-entropy against the full model's
top-1 token, the only thing greedy verification checks.
Recipe ``plain`` is the same loop with the first term only.

Everything is seeded; a checkpoint is written every ``checkpoint_every`` steps and a rerun
with the same output folder resumes from it (batches are a pure function of the step).
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .corpus import corpus_stats, read_split
from .skip import SkipSet, skipping

__all__ = ["TrainConfig", "train", "train_tokenizer", "DATA_DIR", "MODELS_DIR"]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
MODELS_DIR = DATA_DIR / "models"
EOS_TOKEN = "<|endoftext|>"
#: TrainConfig settings that only the skip-robust recipe reads (a plain run ignores them).
SKIP_ROBUST_SETTINGS = frozenset({"distill_weight", "skip_ratio_min", "skip_ratio_max", "draft_skip", "draft_skip_prob",
                                  "greedy_tail", "top1_weight"})


@dataclass
class TrainConfig:
    name: str = "default"               # folder under data/models/
    recipe: str = "skip_robust"         # 'skip_robust' or 'plain'
    # model (LlamaForCausalLM)
    n_layers: int = 8
    hidden_size: int = 256
    n_heads: int = 4                    # head dim 64
    intermediate_size: int = 688
    vocab_size: int = 4096              # byte-level BPE
    context: int = 512                  # training window and max_position_embeddings
    # optimisation
    token_budget: int = 4_000_000       # tokens of data seen by the full model
    batch_size: int = 4                 # sequences per step (4 x 512 = 2048 tokens)
    lr: float = 2e-3
    min_lr_ratio: float = 0.1           # cosine floor
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    # skip-robust recipe
    distill_weight: float = 1.0
    skip_ratio_min: float = 0.3
    skip_ratio_max: float = 0.65
    draft_skip: str = ""                # a fixed draft path, e.g. "attention=1,4;mlp=3,5" ("" = none)
    draft_skip_prob: float = 0.0        # share of steps whose KL term drafts with draft_skip
    greedy_tail: int = 0                # KL window's last N tokens = the full model's own greedy continuation
    top1_weight: float = 0.0            # + this * CE(draft, full model's top-1 token): the greedy acceptance test
    fresh_optimizer_at: int = 0         # resuming a checkpoint of exactly this step: keep the weights, zero AdamW's
                                        # moments (a new stage with a new loss); 0 = never, so reruns resume as usual
    # bookkeeping
    seed: int = 0
    threads: int = 1
    eval_every: int = 200
    checkpoint_every: int = 50
    eval_windows: int = 32              # validation windows per periodic eval
    out_dir: str = ""                   # default: data/models/<name>
    work_dir: str = ""                  # checkpoints; default: data/checkpoints/<name>
    tokenizer_dir: str = ""             # default: data/tokenizer (trained once, shared)
    corpus_root: str = ""               # default: the running interpreter's stdlib

    @property
    def steps(self) -> int:
        return max(1, self.token_budget // (self.batch_size * self.context))


# ---------------------------------------------------------------------------------------
# tokenizer and data
# ---------------------------------------------------------------------------------------
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

    tok_dir = Path(cfg.tokenizer_dir) if cfg.tokenizer_dir else DATA_DIR / "tokenizer"
    if (tok_dir / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(tok_dir)
    return train_tokenizer(read_split("train", corpus_root), cfg.vocab_size, tok_dir)


def encode_split(tokenizer, split: str, corpus_root) -> torch.Tensor:
    """All files of a split as one stream of token ids, files separated by EOS."""
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    for text in read_split(split, corpus_root):
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.int32)


def batch_at(stream: torch.Tensor, step: int, cfg: TrainConfig) -> torch.Tensor:
    """Random windows for ``step``: a pure function of (seed, step), so resuming is exact."""
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    starts = torch.randint(0, len(stream) - cfg.context - 1, (cfg.batch_size,), generator=g)
    return torch.stack([stream[s: s + cfg.context + 1] for s in starts.tolist()]).long()  # (B, T+1)


def parse_skip_set(text: str) -> SkipSet:
    """``"attention=1,4;mlp=3,5"`` -> SkipSet(attention=[1, 4], mlp=[3, 5]); ``""`` -> nothing skipped."""
    fields = {"attention": [], "mlp": []}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, values = part.partition("=")
        if not sep or key.strip() not in fields:
            raise ValueError(f"draft_skip: expected 'attention=i,j;mlp=k,l', got {text!r}")
        fields[key.strip()] = [int(v) for v in values.split(",") if v.strip()]
    return SkipSet(**fields)


def format_skip_set(skip: SkipSet) -> str:
    """Inverse of :func:`parse_skip_set`."""
    return f"attention={','.join(map(str, skip.attention))};mlp={','.join(map(str, skip.mlp))}"


def draft_skip_set(n_layers: int, cfg: TrainConfig, g: torch.Generator) -> SkipSet:
    """This step's draft path: the fixed ``draft_skip`` with probability ``draft_skip_prob``, else random."""
    if cfg.draft_skip and torch.rand((), generator=g).item() < cfg.draft_skip_prob:
        return parse_skip_set(cfg.draft_skip).validate(n_layers)
    return random_skip_set(n_layers, cfg, g)


def random_skip_set(n_layers: int, cfg: TrainConfig, g: torch.Generator) -> SkipSet:
    """Blocks to skip this step: later layers more likely, never layer 0's attention."""
    r = cfg.skip_ratio_min + (cfg.skip_ratio_max - cfg.skip_ratio_min) * torch.rand((), generator=g).item()
    weights = torch.tensor([float(l + 1) for l in range(n_layers)] * 2)  # attention blocks, then MLP blocks
    weights[0] = 0.0
    k = min(int(round(r * 2 * n_layers)), 2 * n_layers - 1)
    chosen = torch.multinomial(weights, k, replacement=False, generator=g).tolist()
    mask = [False] * (2 * n_layers)
    for c in chosen:
        mask[c] = True
    return SkipSet.from_mask(mask)


# ---------------------------------------------------------------------------------------
# model and loop
# ---------------------------------------------------------------------------------------
def build_model(cfg: TrainConfig, tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_heads,
        max_position_embeddings=cfg.context, rms_norm_eps=1e-5, tie_word_embeddings=True,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(cfg.seed)
    return LlamaForCausalLM(config)


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


@torch.no_grad()
def greedy_continuation(model, prefix: torch.Tensor, n_new: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The full model's greedy continuation of every row of ``prefix`` (B, P), with a KV cache.

    Returns (tokens (B, n_new), logits (B, n_new, V)); ``logits[:, i]`` is the full model's
    next-token distribution *after* reading new token i, i.e. its target at that position.
    """
    from .cache import new_cache

    was_training = model.training
    model.eval()
    cache = new_cache(model)
    batch, length = prefix.shape
    next_token = model(input_ids=prefix, past_key_values=cache, use_cache=True).logits[:, -1].argmax(-1)  # (B,)
    tokens, logits = [], []
    for i in range(n_new):
        tokens.append(next_token)
        position = torch.full((batch, 1), length + i, dtype=torch.long)
        step = model(input_ids=next_token[:, None], position_ids=position, past_key_values=cache,
                     use_cache=True).logits[:, -1]                          # (B, V)
        logits.append(step)
        next_token = step.argmax(-1)
    model.train(was_training)
    return torch.stack(tokens, 1), torch.stack(logits, 1)


def training_loss(model, batch: torch.Tensor, cfg: TrainConfig, g: torch.Generator) -> tuple[torch.Tensor, float]:
    """Loss to minimise and the full model's cross-entropy (for logging)."""
    inputs, targets = batch[:, :-1], batch[:, 1:]                          # (B, T)
    logits = model(input_ids=inputs, use_cache=False).logits               # (B, T, V)
    ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    if cfg.recipe == "plain":
        return ce, ce.item()
    skip = draft_skip_set(model.config.num_hidden_layers, cfg, g)
    kl_inputs, target_logits = inputs, logits.detach()                     # (B, T), (B, T, V)
    if cfg.greedy_tail:
        # On-policy positions (DistillSpec, Zhou et al. 2023): while decoding, the draft predicts
        # on the full model's own greedy text, so train it there too. A causal model's logits on
        # the prefix are the same whatever follows, so only the tail needs new targets.
        n = cfg.greedy_tail
        tail, tail_logits = greedy_continuation(model, inputs[:, :-n], n)
        kl_inputs = torch.cat([inputs[:, :-n], tail], dim=1)
        target_logits = torch.cat([target_logits[:, :-n], tail_logits], dim=1)
    with skipping(model, skip):
        draft_logits = model(input_ids=kl_inputs, use_cache=False).logits  # (B, T, V)
    target_logp = F.log_softmax(target_logits, dim=-1)
    draft_logp = F.log_softmax(draft_logits, dim=-1)
    kl = F.kl_div(draft_logp.flatten(0, 1), target_logp.flatten(0, 1), log_target=True, reduction="batchmean")
    loss = ce + cfg.distill_weight * kl
    if cfg.top1_weight:
        # Greedy verification accepts a draft token iff it is the full model's top-1: train that directly.
        loss = loss + cfg.top1_weight * F.cross_entropy(draft_logits.flatten(0, 1), target_logits.argmax(-1).flatten())
    return loss, ce.item()


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


def train(cfg: TrainConfig) -> Path:
    """Train (or resume) and write a Hugging Face folder; returns its path."""
    if cfg.recipe not in ("skip_robust", "plain"):
        raise ValueError(f"recipe must be 'skip_robust' or 'plain', got {cfg.recipe!r}")
    if not 0.0 <= cfg.draft_skip_prob <= 1.0:
        raise ValueError(f"draft_skip_prob must be in [0, 1], got {cfg.draft_skip_prob}")
    if cfg.draft_skip:
        parse_skip_set(cfg.draft_skip).validate(cfg.n_layers)            # fail before any work
    if not 0 <= cfg.greedy_tail < cfg.context:
        raise ValueError(f"greedy_tail must be in [0, context={cfg.context}), got {cfg.greedy_tail}")
    torch.set_num_threads(cfg.threads)
    corpus_root = Path(cfg.corpus_root) if cfg.corpus_root else None
    out_dir = Path(cfg.out_dir) if cfg.out_dir else MODELS_DIR / cfg.name
    work_dir = Path(cfg.work_dir) if cfg.work_dir else DATA_DIR / "checkpoints" / cfg.name
    work_dir.mkdir(parents=True, exist_ok=True)

    tokenizer = load_or_train_tokenizer(cfg, corpus_root)
    streams_path = work_dir / "tokens.pt"
    if streams_path.exists():
        streams = torch.load(streams_path)
    else:
        streams = {s: encode_split(tokenizer, s, corpus_root) for s in ("train", "validation")}
        torch.save(streams, streams_path)
    train_stream, val_stream = streams["train"], streams["validation"]

    model = build_model(cfg, tokenizer)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    ckpt_path = work_dir / "checkpoint.pt"
    start_step, history, elapsed_before = 0, [], 0.0
    if ckpt_path.exists():
        state = torch.load(ckpt_path, weights_only=False)
        model.load_state_dict(state["model"])
        if state["step"] != cfg.fresh_optimizer_at:
            opt.load_state_dict(state["opt"])
        start_step, history, elapsed_before = state["step"], state["history"], state["elapsed"]

    t0 = time.perf_counter()
    bar = tqdm(range(start_step, cfg.steps), initial=start_step, total=cfg.steps, desc=f"train {cfg.name}")
    tokens_per_step = cfg.batch_size * cfg.context
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        g = torch.Generator().manual_seed(cfg.seed * 7_919 + step)
        loss, ce = training_loss(model, batch_at(train_stream, step, cfg), cfg, g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        done = step + 1
        rate = (done - start_step) * tokens_per_step / (time.perf_counter() - t0)
        bar.set_postfix(loss=f"{loss.item():.3f}", ce=f"{ce:.3f}", tok_s=f"{rate:.0f}")
        if done % cfg.eval_every == 0 or done == cfg.steps:
            history.append({"step": done, "tokens": done * tokens_per_step, "train_ce": ce,
                            "val_loss": evaluate(model, val_stream, cfg.context, cfg.eval_windows)})
            model.train()
        if done % cfg.checkpoint_every == 0 or done == cfg.steps:
            _save_checkpoint(ckpt_path, model, opt, done, history, elapsed_before + time.perf_counter() - t0)
    wall = elapsed_before + time.perf_counter() - t0

    model.eval()
    val_loss = evaluate(model, val_stream, cfg.context)
    _export(model, tokenizer, cfg, out_dir, {
        "recipe": asdict(cfg), "tokens_seen": cfg.steps * tokens_per_step, "steps": cfg.steps,
        "wall_time_s": round(wall, 1), "validation_loss": round(val_loss, 4), "history": history,
        "corpus": corpus_stats(corpus_root),
        "train_tokens_in_corpus": int(len(train_stream)), "validation_tokens": int(len(val_stream)),
        "hardware": f"{platform.processor() or platform.machine()}, {cfg.threads} thread(s), torch {torch.__version__}",
        "python": platform.python_version(),
    })
    return out_dir


def _export(model, tokenizer, cfg: TrainConfig, out_dir: Path, record: dict) -> None:
    from transformers import GenerationConfig

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
    from .modelcard import write_model_card
    write_model_card(out_dir)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in TrainConfig.__dataclass_fields__.values():
        kind = type(f.default) if f.default is not None else str
        parser.add_argument("--" + f.name.replace("_", "-"), type=kind, default=f.default)
    args = parser.parse_args(argv)
    out = train(TrainConfig(**vars(args)))
    print(f"model written to {out}")


if __name__ == "__main__":
    main()
