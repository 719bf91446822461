"""What happened at every draft/verify step, and the numbers that summarise it.

One :class:`StepRecord` per step. A step drafts tokens d_1..d_k (k may be 0), verifies
them in one forward of the full model, accepts the first n of them, and appends one more
token from the target: a *replacement* for d_{n+1} if a draft token was rejected, else a
*bonus* token. Each step therefore emits n + 1 tokens.

Parallel decoding keeps its own record (:mod:`labkit.core.jacobi_trace`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["StepRecord", "Trace"]


@dataclass
class StepRecord:
    position: int                 # sequence length before the step (prompt + emitted so far)
    drafted: list[int]            # d_1..d_k
    q: list[float]                # draft probability of each drafted token
    confidence: list[float]       # draft top-1 probability at each drafted position
    p: list[float]                # target probability of each drafted token
    n_accepted: int
    next_token: int               # the target's replacement or bonus token
    next_kind: str                # 'replacement', 'bonus', or 'none' (an accepted EOS ended the step)
    threshold: float | None       # threshold in force while drafting (None: count-only policy)
    draft_s: float                # wall time of the draft phase (perf_counter)
    verify_s: float               # wall time of the verify phase
    policy_state: dict = field(default_factory=dict)   # after this step's update
    n_emitted: int = 0            # tokens appended (n + 1, fewer if EOS or the budget cut it)
    draft_source: str = "model"   # 'model' (skipped self / draft model) or 'lookup' (copied from the context)
    target_confidence: float = float("nan")   # the target's probability of the token it emitted itself
    skip: object = None           # the SkipSet a self-draft skipped (None: lookup, a separate model, or no draft)
    select_s: float = 0.0         # wall time a skip strategy spent choosing/learning (not in draft_s or verify_s)
    parents: list[int] | None = None   # a tree draft: each drafted node's parent (-1: the pending token)
    path: list[int] | None = None      # a tree draft: the accepted nodes, root to leaf
    levels: list[dict] | None = None   # a cascade: each level's proposed / accepted / own tokens, forwards, seconds
    origins: list[str] | None = None   # where each drafted node came from (lookahead's pool, recycling's table)
    width: object = None          # a width draft's WidthSet: the MLP neurons' kept fraction per layer, and its kind

    @property
    def n_drafted(self) -> int:
        return len(self.drafted)


@dataclass
class Trace:
    prompt_length: int
    sampling: bool
    steps: list[StepRecord] = field(default_factory=list)
    prefill_s: float = 0.0
    total_s: float = 0.0          # whole call, prefill included

    # -- aggregates --------------------------------------------------------------------------
    @property
    def n_drafted(self) -> int:
        return sum(s.n_drafted for s in self.steps)

    @property
    def n_accepted(self) -> int:
        return sum(s.n_accepted for s in self.steps)

    @property
    def n_emitted(self) -> int:
        return sum(s.n_emitted for s in self.steps)

    def summary(self) -> dict:
        """Acceptance ("matchness"), tokens per step, and where the time went."""
        n_steps = len(self.steps)
        drafted, accepted, emitted = self.n_drafted, self.n_accepted, self.n_emitted
        draft_s = sum(s.draft_s for s in self.steps)
        verify_s = sum(s.verify_s for s in self.steps)
        select_s = sum(s.select_s for s in self.steps)
        return {
            "steps": n_steps,
            "drafted": drafted,
            "accepted": accepted,
            "emitted": emitted,
            "acceptance_rate": accepted / drafted if drafted else float("nan"),
            "mean_accepted_per_step": accepted / n_steps if n_steps else float("nan"),
            "tokens_per_step": emitted / n_steps if n_steps else float("nan"),
            "drafted_per_step": drafted / n_steps if n_steps else float("nan"),
            "draft_ms_per_drafted_token": 1e3 * draft_s / drafted if drafted else float("nan"),
            "verify_ms_per_step": 1e3 * verify_s / n_steps if n_steps else float("nan"),
            "ms_per_token": 1e3 * (draft_s + verify_s + select_s) / emitted if emitted else float("nan"),
            "ms_per_token_with_prefill": 1e3 * self.total_s / emitted if emitted else float("nan"),
            "draft_s": draft_s,
            "verify_s": verify_s,
            "select_s": select_s,
            "select_share": select_s / (draft_s + verify_s) if draft_s + verify_s else float("nan"),
            "prefill_s": self.prefill_s,
        }

    def to_frame(self):
        """One row per token event: 'accepted', 'rejected', 'discarded' (drafted after a rejection),
        'replacement' or 'bonus'."""
        import pandas as pd

        rows = []
        for i, s in enumerate(self.steps):
            common = {"step": i, "threshold": s.threshold, "draft_ms": 1e3 * s.draft_s, "verify_ms": 1e3 * s.verify_s,
                      "n_drafted": s.n_drafted, "n_accepted": s.n_accepted}
            for j, tok in enumerate(s.drafted):
                kind = "accepted" if j < s.n_accepted else ("rejected" if j == s.n_accepted else "discarded")
                q, p = s.q[j], s.p[j]
                rows.append({**common, "slot": j, "position": s.position + j, "token_id": tok, "kind": kind,
                             "q": q, "p": p, "confidence": s.confidence[j],
                             "accept_prob": min(1.0, p / q) if q > 0 else float("nan")})
            if s.next_kind == "none":  # the step ended on an accepted EOS: nothing more was emitted
                continue
            rows.append({**common, "slot": s.n_accepted if s.next_kind == "replacement" else s.n_drafted,
                         "position": s.position + s.n_accepted, "token_id": s.next_token, "kind": s.next_kind,
                         "q": float("nan"), "p": float("nan"), "confidence": float("nan"), "accept_prob": float("nan")})
        return pd.DataFrame(rows)
