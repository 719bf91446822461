"""What a training run is: every setting in one dataclass (the command line has one flag per field)."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.checks import check_folder_name, check_int, check_number, check_probability

__all__ = ["TrainConfig", "SKIP_ROBUST_SETTINGS", "EOS_TOKEN", "check_numbers"]

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
    corpus_packages: str = ""           # + these installed packages' source, comma-separated import names
                                        # (never an outside-prompt package); "" = the stdlib alone
    package_bytes: int = 4_000_000      # at most this much source per package and split (files in hash order)
    init_from: str = ""                 # a model folder (same shape and tokenizer) whose weights start the run

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.corpus_packages.split(",") if p.strip())

    @property
    def steps(self) -> int:
        return max(1, self.token_budget // (self.batch_size * self.context))


#: TrainConfig's integers that count something (>= 1); its other integers only need to be >= 0
_COUNTS = ("n_layers", "hidden_size", "n_heads", "intermediate_size", "vocab_size", "context", "token_budget",
           "batch_size", "threads", "eval_every", "checkpoint_every", "eval_windows", "package_bytes")
_NATURALS = ("warmup_steps", "greedy_tail", "fresh_optimizer_at", "seed")
_SHARES = ("min_lr_ratio", "skip_ratio_min", "skip_ratio_max", "draft_skip_prob")
_WEIGHTS = ("weight_decay", "distill_weight", "top1_weight")
_RATES = ("lr", "grad_clip")


def check_numbers(cfg: TrainConfig) -> None:
    """The run's name and every number in its range (ValueError/TypeError naming the setting): a run that would
    fail later, or write a model into ``data/models/`` itself (an empty name), fails before any work."""
    check_folder_name("name", cfg.name)
    for field in _COUNTS:
        check_int(field, getattr(cfg, field), 1)
    for field in _NATURALS:
        check_int(field, getattr(cfg, field), 0)
    for field in _SHARES:
        check_probability(field, getattr(cfg, field))
    for field in _WEIGHTS:
        check_number(field, getattr(cfg, field), 0.0)
    for field in _RATES:
        check_number(field, getattr(cfg, field), 0.0, strict_low=True)
    if cfg.skip_ratio_min > cfg.skip_ratio_max:
        raise ValueError(f"skip_ratio_min must be <= skip_ratio_max, got {cfg.skip_ratio_min} > {cfg.skip_ratio_max}")
    if cfg.hidden_size % cfg.n_heads:
        raise ValueError(f"hidden_size must be a multiple of n_heads, got {cfg.hidden_size} and {cfg.n_heads}")
