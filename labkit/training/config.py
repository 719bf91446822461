"""What a training run is: every setting in one dataclass (the command line has one flag per field)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TrainConfig", "SKIP_ROBUST_SETTINGS", "EOS_TOKEN"]

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
