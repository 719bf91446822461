"""What parallel decoding did at every iteration (:mod:`labkit.core.jacobi`), and the numbers that summarise it.

One :class:`JacobiIteration` per iteration in a :class:`JacobiTrace`: the block of guesses that went in, what the
target computed for it, and how many of its leading slots were proven exact (the chain's record is
:mod:`labkit.core.trace`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["JacobiIteration", "JacobiTrace"]


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
