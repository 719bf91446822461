"""What happened at every draft/verify step, and the numbers that summarise it.

One :class:`StepRecord` per step. A step drafts tokens d_1..d_k (k may be 0), verifies
them in one forward of the full model, accepts the first n of them, and appends one more
token from the target: a *replacement* for d_{n+1} if a draft token was rejected, else a
*bonus* token. Each step therefore emits n + 1 tokens.

Parallel decoding (:mod:`labkit.core.jacobi`) records one :class:`JacobiIteration` per iteration in a
:class:`JacobiTrace`: the block of guesses that went in, what the target computed for it, and how many of its
leading slots were proven exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["StepRecord", "Trace", "JacobiIteration", "JacobiTrace"]


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


@dataclass
class JacobiIteration:
    """One application of F to the block (one forward of the target)."""

    position: int                 # tokens committed (prompt included) before it: slot 1 sits at this position
    guess: list[int]              # the block going in: y^(k)_1..w
    output: list[int]             # F of it: the target's argmax at every slot, y^(k+1)_1..w
    n_fixed: int                  # leading slots proven exact (matched prefix + 1)
    n_emitted: int                # of those, committed (fewer when EOS or the budget ends the output)
    n_initialised: int            # slots at the block's end that entered this iteration with an initial guess
    block: int = 0                # gauss-seidel: which block is being solved; jacobi: always 0 (one window)
    forward_s: float = 0.0        # wall time of the forward and the bookkeeping
    init_s: float = 0.0           # wall time spent making the initial guesses (self-draft forwards)

    @property
    def width(self) -> int:
        return len(self.guess)

    @property
    def changed(self) -> list[bool]:
        """Slot by slot: did this iteration change the token?"""
        return [g != y for g, y in zip(self.guess, self.output)]

    @property
    def n_matched(self) -> int:
        """Guesses the target confirmed (the 'accepted drafts' of this iteration)."""
        return self.n_fixed - 1


@dataclass
class JacobiTrace:
    prompt_length: int
    method: str
    init: str
    block_size: int
    iterations: list[JacobiIteration] = field(default_factory=list)
    prefill_s: float = 0.0
    total_s: float = 0.0          # whole call, prefill included

    @property
    def n_emitted(self) -> int:
        return sum(it.n_emitted for it in self.iterations)

    def summary(self) -> dict:
        """Iterations, tokens, iterations per token (1.0 = no better than plain decoding) and where the time went."""
        n, tokens = len(self.iterations), self.n_emitted
        forward_s = sum(it.forward_s for it in self.iterations)
        init_s = sum(it.init_s for it in self.iterations)
        guessed = sum(it.width - 1 for it in self.iterations)       # guesses fed in (slot w's guess is never read)
        matched = sum(it.n_matched for it in self.iterations)
        return {
            "iterations": n,
            "tokens": tokens,
            "iterations_per_token": n / tokens if tokens else float("nan"),
            "tokens_per_iteration": tokens / n if n else float("nan"),
            "guessed": guessed,
            "matched": matched,
            "match_rate": matched / guessed if guessed else float("nan"),
            "changed_per_iteration": sum(sum(it.changed) for it in self.iterations) / n if n else float("nan"),
            "forward_ms_per_iteration": 1e3 * forward_s / n if n else float("nan"),
            "init_ms_per_iteration": 1e3 * init_s / n if n else float("nan"),
            "ms_per_token": 1e3 * (forward_s + init_s) / tokens if tokens else float("nan"),
            "ms_per_token_with_prefill": 1e3 * self.total_s / tokens if tokens else float("nan"),
            "forward_s": forward_s,
            "init_s": init_s,
            "prefill_s": self.prefill_s,
        }

    def to_frame(self):
        """One row per (iteration, slot): position, guess, output, changed, and whether the slot was fixed."""
        import pandas as pd

        rows = []
        for k, it in enumerate(self.iterations):
            for j, (g, y) in enumerate(zip(it.guess, it.output)):
                rows.append({"iteration": k, "block": it.block, "slot": j, "position": it.position + j, "guess": g,
                             "output": y, "changed": g != y, "fixed": j < it.n_fixed,
                             "initialised": j >= it.width - it.n_initialised})
        return pd.DataFrame(rows, columns=["iteration", "block", "slot", "position", "guess", "output", "changed",
                                           "fixed", "initialised"])
