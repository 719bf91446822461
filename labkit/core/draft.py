"""What a drafter proposes for one step: d_1..d_γ with their q, who made them, and how the target verifies them.

A :class:`Draft` is a chain (node i follows node i - 1, the first node the pending token t_0) or, with ``tree``,
a tree whose nodes name their parents (:mod:`labkit.core.tree`). ``forward`` says how the target verifies it
(None: one full forward over [t_0, d_1..d_γ]); ``select_s`` is the time its drafter spent choosing how to draft.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .sampling import point_mass
from .skip import SkipSet

__all__ = ["Draft"]


@dataclass
class Draft:
    tokens: list[int] = field(default_factory=list)         # d_1..d_γ
    q: list[float] = field(default_factory=list)            # q(d_i)
    confidence: list[float] = field(default_factory=list)   # max q at each position (what policies read)
    q_dists: list[torch.Tensor] = field(default_factory=list)   # sampling only: q at each position, (V,) each
    source: str = "model"                                    # 'model' or 'lookup'
    skip: SkipSet | None = None                              # the set a self-draft skipped
    width: object = None                                     # a width draft's WidthSet (labkit.core.width)
    drafter: object | None = None                            # who made it (wrappers pass their inner drafts on)
    select_s: float = 0.0                                    # seconds spent choosing how to draft, inside draft()
    forward: Callable | None = None                          # (state, draft) -> (logits (γ+1, V), hidden states
                                                             # or None); None: one full forward of the target
    tree: list[int] | None = None                            # a tree draft: each node's parent (-1: the pending
                                                             # token); None: a chain (:mod:`labkit.core.tree`)
    levels: list[dict] | None = None                         # a cascade: each level's part, cheapest first
                                                             # (:func:`labkit.core.cascade.level_counts`)
    origins: list[str] | None = None                         # where each node came from, when its drafter says
                                                             # (lookahead's pool, token recycling's table)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def parents(self) -> list[int]:
        """Each node's parent (-1: the pending token). A chain: node i follows node i - 1."""
        return list(self.tree) if self.tree is not None else list(range(-1, len(self.tokens) - 1))

    @property
    def depth(self) -> int:
        """Tokens on the longest path: what a step can accept at most."""
        if self.tree is None:
            return len(self.tokens)
        depth: list[int] = []
        for parent in self.tree:
            depth.append(1 if parent < 0 else depth[parent] + 1)
        return max(depth, default=0)

    def add(self, token: int, q: torch.Tensor, keep_dist: bool) -> None:
        self.tokens.append(token)
        self.q.append(float(q[token]))
        self.confidence.append(float(q.max()))
        if keep_dist:
            self.q_dists.append(q)

    def add_copied(self, tokens: list[int], vocab_size: int, device, keep_dist: bool) -> None:
        """Tokens copied from somewhere (a pool, a table, the context): q is a point mass on each, q(d) = 1; the
        (V,) distributions are built only when ``keep_dist`` (sampling) needs them."""
        if keep_dist:
            for token in tokens:
                self.add(token, point_mass(token, vocab_size, device), keep_dist=True)
            return
        self.tokens.extend(tokens)
        self.q.extend([1.0] * len(tokens))
        self.confidence.extend([1.0] * len(tokens))
