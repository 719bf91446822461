"""Lookahead decoding (Fu et al. 2024, "Break the Sequential Dependency of LLM Inference Using Lookahead Decoding"):
Jacobi iterations over a 2-D window make n-grams, a pool keeps them, and the pool's n-grams that start with the
pending token are verified in the same forward as the next Jacobi iteration, under one combined attention mask.

The symbols are the paper's: a window of W columns and N - 1 levels (the last N - 1 Jacobi iterates), n-grams of
N tokens, at most G candidate n-grams verified per step.

The lookahead branch. Level l (0 the oldest) holds W guesses; the guess at (l, c) stands for position
s + 1 + l + c (s: the pending token t_0's position) and sees the cached prefix, t_0, level 0 up to column c and
the levels 1..l of column c: the n-gram trajectory (level0[c], level1[c], .., level_l[c]) as a sequence. Its
output is therefore a Jacobi update for the next position. One forward over the window gives a new level (the
top level's outputs); once N - 1 levels are held, every column also yields an N-gram
(level0[c], .., level_{N-2}[c], output[c]), stored in the pool under its first token, and level 0 is dropped.
The first level is filled from the prompt (the paper fills it with random prompt tokens; here evenly spaced
ones, so a rerun reproduces it).

The verification branch. Up to G pooled continuations of t_0 (the most recent first), merged into a trie, are a
tree draft (:mod:`labkit.core.tree`) of at most N - 1 levels. One forward reads [t_0, trie nodes, window] with the
tree's ancestry mask on the trie, the rule above on the window, and no attention between the two branches; the
trie's rows go to verification, the window's rows make the next level, and :func:`~labkit.core.tree.keep_path`
then keeps only the accepted path in the cache (the window's columns come after the trie's, so they are dropped).

Verification rule. Greedy: the lab's tree rule (follow the target's argmax through the trie), token-identical to
plain decoding. Sampling: the pooled n-grams are point masses (q(d) = 1 on the n-gram's token), and the trie's
children of a node are distinct tokens. The lab's tree rule (SpecInfer's, Miao et al. 2024,
:func:`~labkit.core.tree.verify_tree_sampling`) with a point-mass q per child is then the lookahead paper's
sampling verification of several candidate n-grams (Fu et al. 2024, appendix: accept candidate x with probability
p(x), else set p(x) to 0 and renormalise, try the next, draw from what is left of p when all fail). It is exact:
each try is speculative sampling of a draw from a q fixed before the step against what is left of p, so the
emitted token is an exact sample of p whatever the number of candidates. The window's updates are argmaxes in
both modes; they only decide what is drafted, never what is emitted.
"""
from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass

import torch

from .cache import crop_to
from .checks import check_int
from .devices import model_device
from .draft import Draft
from .drafters import Drafter
from .policies import DraftPolicy
from .state import DecodingState
from .tree import ancestry, depths, tree_forward
from .verify import Verdict

__all__ = ["NGramPool", "Origin", "LookaheadDrafter", "lookahead", "combined_mask", "window_mask", "trie"]


@dataclass(frozen=True)
class Origin:
    """Where a pooled n-gram came from: the lookahead step (0 the first) and window column that produced it."""

    step: int
    column: int

    def __str__(self) -> str:
        return f"window step {self.step} column {self.column}"


class NGramPool:
    """n-grams by first token: up to ``G`` continuations (N - 1 tokens) per key, the most recently produced kept,
    each with its :class:`Origin`. Inspect with :meth:`candidates`, ``len`` and :meth:`items`."""

    def __init__(self, G: int):
        self.G = check_int("G", G, 1)
        self._by_key: dict[int, OrderedDict] = {}

    def add(self, key: int, continuation: tuple[int, ...], origin: Origin) -> None:
        entries = self._by_key.setdefault(key, OrderedDict())
        entries.pop(continuation, None)                  # seen again: it moves to the most recent place
        entries[continuation] = origin
        while len(entries) > self.G:
            entries.popitem(last=False)

    def candidates(self, key: int) -> list[tuple[tuple[int, ...], Origin]]:
        """The continuations of ``key``, the most recent first."""
        return list(reversed(self._by_key.get(key, {}).items()))

    def items(self):
        """(key, continuation, origin) for every pooled n-gram."""
        return [(k, c, o) for k, entries in self._by_key.items() for c, o in entries.items()]

    def __len__(self) -> int:
        return sum(map(len, self._by_key.values()))


def trie(candidates: list[tuple[int, ...]], eos: frozenset[int]) -> tuple[list[int], list[int], list[int]]:
    """Merge candidate continuations of the pending token into a tree: (tokens, parents, the candidate each node
    first came from). Nothing follows an EOS node."""
    tokens, parents, source, node_of = [], [], [], {}
    for index, continuation in enumerate(candidates):
        parent = -1
        for token in continuation:
            key = (parent, token)
            if key not in node_of:
                node_of[key] = len(tokens)
                tokens.append(token)
                parents.append(parent)
                source.append(index)
            parent = node_of[key]
            if token in eos:
                break
    return tokens, parents, source


def combined_mask(parents: list[int], n_levels: int, W: int) -> tuple[torch.Tensor, list[int]]:
    """One step's attention over [t_0, the trie's nodes, the window's n_levels x W guesses]: (R, R) bool (the trie's
    ancestry, the window's rule, t_0 seen by all, no row of one branch seeing the other) and each row's position
    after t_0's (0 for t_0, a node's depth, 1 + l + c for guess (l, c))."""
    n_tree = len(parents) + 1
    visible = torch.zeros(n_tree + n_levels * W, n_tree + n_levels * W, dtype=torch.bool)
    visible[:n_tree, :n_tree] = ancestry(parents)
    visible[n_tree:, 0] = True
    visible[n_tree:, n_tree:] = window_mask(n_levels, W)
    offsets = [0] + depths(parents) + [1 + lv + c for lv in range(n_levels) for c in range(W)]
    return visible, offsets


def window_mask(n_levels: int, W: int) -> torch.Tensor:
    """(n_levels * W, n_levels * W) bool: window guess (l, c) (row l * W + c) sees level 0 up to column c and
    levels 1..l of column c (the module docstring's rule)."""
    level = torch.arange(n_levels).repeat_interleave(W)
    column = torch.arange(W).repeat(n_levels)
    first = (level[None, :] == 0) & (column[None, :] <= column[:, None])
    own_column = (column[None, :] == column[:, None]) & (level[None, :] <= level[:, None])
    return first | own_column


class LookaheadDrafter(Drafter):
    """Lookahead decoding as a drafter: window ``W``, n-gram size ``N``, at most ``G`` candidates per step (module
    docstring). The pool (:attr:`pool`) and what each step proposed and kept (:attr:`history`) are inspectable.
    ``fallback``: a drafter asked instead when the pool holds nothing for the pending token (the window then
    waits for the next lookahead step). The defaults are small because verify width costs on a CPU: W 3, N 4, G 2
    did best among W 2-8, N 3-5, G 2-6 in a small contended sweep on the shipped model (the paper's 7B GPU setting
    is W 15, N 5, G 15)."""

    def __init__(self, W: int = 3, N: int = 4, G: int = 2, fallback: Drafter | None = None):
        self.W, self.N, self.G = check_int("W", W, 1), check_int("N", N, 2), check_int("G", G, 1)
        if fallback is not None and not isinstance(fallback, Drafter):
            raise TypeError(f"fallback must be a labkit drafter, got {type(fallback).__name__}")
        self.fallback = fallback
        self.pool, self.levels, self.history, self.steps, self.owner = NGramPool(G), [], [], 0, None
        self._outputs: list[int] | None = None
        self._width = 0

    def prepare(self, state: DecodingState, prompt_ids: torch.Tensor) -> None:
        self._start(state)
        if self.fallback is not None:
            self.fallback.prepare(state, prompt_ids)

    def _start(self, state: DecodingState) -> None:
        """A fresh pool and window for ``state``; level 0 is W evenly spaced prompt tokens."""
        prompt = state.tokens[:state.prompt_length]
        self.pool, self.history, self.steps, self.owner = NGramPool(self.G), [], 0, weakref.ref(state)
        self.levels = [[prompt[(i * len(prompt)) // self.W] for i in range(self.W)]]

    def draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        if self.owner is None or self.owner() is not state:          # a one-token prompt skips prepare
            self._start(state)
        pooled = self.pool.candidates(state.tokens[-1])[: self.G]
        if not pooled and self.fallback is not None:
            return self._fallback_draft(state, budget, policy)
        tokens, parents, source = trie([c[:budget] for c, _ in pooled], state.eos)
        draft = Draft(source="lookahead", drafter=self, tree=parents, forward=self._forward)
        draft.add_copied(tokens, state.vocab_size, model_device(state.model), state.warp.do_sample)
        draft.origins = [str(pooled[i][1]) for i in source]
        return draft

    def _fallback_draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        """The fallback's draft, verified as a one-branch tree beside the window (so the window keeps moving),
        unless the fallback verifies its drafts its own way."""
        draft = self.fallback.draft(state, budget, policy)
        if draft.forward is None:
            draft.tree, draft.forward = draft.parents, self._forward
        return draft

    def _forward(self, state: DecodingState, draft: Draft) -> tuple[torch.Tensor, None]:
        """One forward over [t_0, the trie, the window]; returns the trie's logits (N + 1, V) for verification and
        keeps the window's argmaxes for :meth:`commit`."""
        start = state.position - 1
        crop_to(state.cache, start)
        visible, offsets = combined_mask(draft.parents, len(self.levels), self.W)
        window = [t for level in self.levels for t in level]
        logits = tree_forward(state.model, state.cache, [state.tokens[-1]] + draft.tokens + window,
                              [start + o for o in offsets], visible, start)
        self._outputs = logits[len(offsets) - self.W:].argmax(dim=-1).tolist()     # the top level's guesses
        self._width = len(offsets)                                   # tokens this forward read
        return logits[:len(draft.tokens) + 1], None

    def commit(self, state: DecodingState, draft: Draft, verdict: Verdict) -> None:
        ours = draft.drafter is self
        if not ours and self.fallback is not None and draft.drafter is not None:       # the fallback's draft
            self.fallback.commit(state, draft, verdict)
        if self._outputs is None:                                    # the window was not in this step's forward
            return
        path = verdict.path or []
        self.history.append({"position": verdict.start, "proposed": len(draft.tokens),
                             "candidates": len(set(draft.origins)) if ours else 0,
                             "accepted": [draft.tokens[i] for i in path],
                             "from": (draft.origins[path[-1]] if ours else "fallback") if path else None,
                             "width": self._width})
        self._advance()
        self.history[-1]["pool"] = len(self.pool)                   # n-grams held after this step

    def _advance(self) -> None:
        """The window's new level; with N - 1 levels held, pool every column's N-gram and drop level 0."""
        outputs, self._outputs = self._outputs, None
        if len(self.levels) == self.N - 1:
            for c in range(self.W):
                ngram = [level[c] for level in self.levels] + [outputs[c]]
                self.pool.add(ngram[0], tuple(ngram[1:]), Origin(self.steps, c))
            self.levels = self.levels[1:]
        self.levels.append(outputs)
        self.steps += 1


def lookahead(W: int = 3, N: int = 4, G: int = 2, fallback: Drafter | None = None) -> LookaheadDrafter:
    """Lookahead decoding for ``speculative_generate(model, ids, drafter=labkit.lookahead(W=3, N=4, G=2))``: a window
    of ``W`` columns, ``N``-grams, at most ``G`` candidates per step; ``fallback`` drafts when the pool has nothing
    for the pending token (e.g. the shipped self-draft, ``labkit.core.drafters.make_drafter(model, skip=...)``)."""
    return LookaheadDrafter(W, N, G, fallback)
