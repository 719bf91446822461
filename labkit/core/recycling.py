"""Token recycling (Luo et al. 2024, "Turning Trash into Treasure: Accelerating Inference of Large Language Models
with Token Recycling"): the target's top-k at every position it reads is kept, and drafts are read from it.

The adjacency table maps a token to the ``k`` tokens the target found likeliest after it (ranks 0..k-1), the last
time it read that token: every verify forward (the pending token and every tree node, accepted or not) and the
prefill's every position write their row. A draft is a breadth-first walk of a static tree ``template`` (paths of
ranks, Medusa's notation, :data:`~labkit.core.tree_shapes.MEDUSA_CHOICES`): the node of path (r_1, .., r_L) is
rank r_L of the table's row for its parent's token, the root being the pending token t_0. No draft forward at
all: a step costs one verify forward of the tree's width (c_v), and the table is refreshed from that same forward.

Where the template comes from. The paper's is a hand-tuned 80-node tree for a 7B model on an A100, where verifying
80 tokens costs about as much as one. On this CPU verify width is not free (notebook 10: about 2.7 plain steps at
32 nodes), so the default template is built here by :func:`rank_template`: the ``nodes`` paths whose product of
rank weights w(r) = ``alpha`` * ``beta`` ** r is highest, the static cousin of EAGLE-2's cumulative score (an
ancestor always outscores its child, so the set is closed under prefixes). Any paths of ranks may be given instead.

Lossless as every tree draft (:mod:`labkit.core.tree`): greedy follows the target's argmax through the tree,
token-identical to plain decoding. Sampling: the drafted tokens are point masses (q(d) = 1), and a node's children
are distinct tokens (distinct ranks of one row), so the lab's tree rule (SpecInfer's) tries each child x with
probability p(x) against what the earlier rejections left of p: an exact sample of p, as for lookahead's
candidates (:mod:`labkit.core.lookahead`).
"""
from __future__ import annotations

import heapq
import weakref

import torch

from .checks import check_int
from .devices import model_device
from .draft import Draft
from .drafters import Drafter
from .policies import DraftPolicy
from .state import DecodingState
from .tree import tree_verify_forward
from .verify import Verdict

__all__ = ["rank_template", "TokenRecyclingDrafter", "token_recycling"]


def rank_template(nodes: int = 12, k: int = 3, depth: int = 6, alpha: float = 0.7, beta: float = 0.4
                  ) -> tuple[tuple[int, ...], ...]:
    """The ``nodes`` paths of ranks (each rank < ``k``, at most ``depth`` long) with the highest product of
    w(r) = alpha * beta ** r, shortest first (a static tree template, Medusa's notation)."""
    check_int("nodes", nodes, 1)
    check_int("k", k, 1)
    check_int("depth", depth, 1)
    if not (0 < alpha <= 1 and 0 < beta <= 1):
        raise ValueError(f"alpha and beta must be in (0, 1], got {alpha!r} and {beta!r}")
    heap, chosen = [(-alpha, (0,))], []
    while heap and len(chosen) < nodes:
        score, path = heapq.heappop(heap)
        chosen.append(path)
        if path[-1] + 1 < k:                                          # its next sibling
            heapq.heappush(heap, (score * beta, path[:-1] + (path[-1] + 1,)))
        if len(path) < depth:                                         # its first child
            heapq.heappush(heap, (score * alpha, path + (0,)))
    return tuple(sorted(chosen, key=lambda p: (len(p), p)))


class TokenRecyclingDrafter(Drafter):
    """Token recycling as a drafter (module docstring): a table of the target's top-``k`` successors of each token,
    a static tree ``template`` (paths of ranks; None: :func:`rank_template` for this ``k``, 12 nodes: the
    defaults did best among 4-40 nodes and k 2-6 in a small contended sweep on the shipped model). The table
    (:attr:`table`: token -> its k successors; :attr:`written`: the step that wrote each row, -1 the prompt) is
    inspectable; it starts empty on every call."""

    reads_prompt_logits = True

    def __init__(self, k: int = 3, template: tuple | None = None):
        self.k = check_int("k", k, 1)
        template = rank_template(k=k) if template is None else template
        try:
            template = tuple(tuple(check_int("a template rank", r, 0, k - 1) for r in path) for path in template)
        except TypeError as error:
            raise TypeError(f"template must be paths of ranks, e.g. ((0,), (1,), (0, 0)): {error}") from None
        if not template or any(not p or (len(p) > 1 and p[:-1] not in template) for p in template):
            raise ValueError("template must be non-empty paths of ranks whose prefixes are paths too")
        self.template = tuple(sorted(set(template), key=lambda p: (len(p), p)))
        self.table, self.written, self.steps, self.owner, self._seen = {}, {}, 0, None, None

    def prepare(self, state: DecodingState, prompt_ids: torch.Tensor) -> None:
        self._start(state)

    def _start(self, state: DecodingState) -> None:
        self.table, self.written, self.steps, self.owner = {}, {}, 0, weakref.ref(state)

    def read_prompt_logits(self, state: DecodingState, logits: torch.Tensor) -> None:
        self._write(state.tokens[: logits.shape[0]], logits, -1)

    def _write(self, tokens: list[int], logits: torch.Tensor, step: int) -> None:
        """Each token's row: the top-k of the logits (R, V) the target gave after it (later rows win)."""
        top = torch.topk(logits, min(self.k, logits.shape[-1]), dim=-1).indices.tolist()
        for token, row in zip(tokens, top):
            self.table[token], self.written[token] = row, step

    def draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        if self.owner is None or self.owner() is not state:          # a one-token prompt skips prepare
            self._start(state)
        draft = Draft(source="recycling", drafter=self, tree=[], forward=self._forward, origins=[])
        node_of, tokens = {(): -1}, []
        for path in self.template:
            parent = node_of.get(path[:-1])
            if len(path) > budget or parent is None:
                continue
            before = tokens[parent] if parent >= 0 else state.tokens[-1]
            row = self.table.get(before)
            if (parent >= 0 and before in state.eos) or row is None or path[-1] >= len(row):
                continue
            node_of[path] = len(tokens)
            tokens.append(row[path[-1]])
            draft.tree.append(parent)
            draft.origins.append(f"table[{before}] rank {path[-1]} (step {self.written[before]})")
        draft.add_copied(tokens, state.vocab_size, model_device(state.model), state.warp.do_sample)
        return draft

    def _forward(self, state: DecodingState, draft: Draft) -> tuple[torch.Tensor, None]:
        """The tree's verify forward; its logits at every row are kept to refresh the table in :meth:`commit`."""
        logits, _ = tree_verify_forward(state, draft)
        self._seen = ([state.tokens[-1]] + draft.tokens, logits)
        return logits, None

    def commit(self, state: DecodingState, draft: Draft, verdict: Verdict) -> None:
        if draft.drafter is not self or self._seen is None:          # a step with no draft (the budget was 0)
            return
        tokens, logits = self._seen
        self._seen = None
        self._write(tokens, logits, self.steps)
        self.steps += 1


def token_recycling(k: int = 3, template: tuple | None = None) -> TokenRecyclingDrafter:
    """Token recycling for ``speculative_generate(model, ids, drafter=labkit.token_recycling(k=3))``: the target's
    top-``k`` successors of every token it read, drafted along ``template`` (paths of ranks; None:
    :func:`rank_template`)."""
    return TokenRecyclingDrafter(k, template)
