"""Who proposes the draft: one small interface, one class per strategy, kept apart from the verify loop.

A :class:`Drafter` has three members (the seam transformers' candidate generators use, plus a prefill hook):

- ``prepare(state, prompt_ids)``: once, after the target has read the prompt;
- ``draft(state, budget, policy) -> Draft``: up to ``budget`` tokens d_1..d_γ with their draft probabilities q;
- ``commit(state, draft, verdict)``: what to keep, and what to learn, once the target has verified that draft.

Everything else travels with the :class:`Draft`: who made it, the time spent choosing how to draft
(``select_s``), and how the target should verify it (``forward``: None for one full forward; a drafter whose
draft already computed part of the target's forward, as an early-exit draft does, or that wants the target's
hidden states, as CLaSp does, puts its own function there). The :class:`~labkit.core.verify.Verdict` carries
what verification learned (the hidden states when asked for, the position the step began at).

Strategies: :class:`SelfDrafter` (the target with some blocks skipped, sharing the target's KV cache:
Draft & Verify; the blocks are chosen before every draft by a :class:`~labkit.core.strategies.SkipStrategy`,
:class:`~labkit.core.strategies.StaticStrategy` for a fixed :class:`~labkit.core.skip.SkipSet`),
:class:`ModelDrafter` (a separate small model with a cache of its own), and :class:`LookupDrafter` (tokens copied
from earlier in the context, a point-mass q, falling back to another drafter when nothing matches). Drafting
never decides what is emitted; verification does.

A draft is a chain (node i's parent is node i - 1, the first node's the pending token: ``Draft.parents``) or a
tree (tokens with parents and per-node q: ``SelfDrafter(tree=...)``, grown by :mod:`labkit.core.tree_shapes` and
verified in one forward by :mod:`labkit.core.tree`); a drafter that drafts with the help of another one is a
cascade (:mod:`labkit.core.cascade`). Both only need ``draft`` and ``commit``.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch

from .architectures import check_mask_free_drafting, check_supported
from .cache import crop_to, new_cache
from .checks import check_int
from .devices import clock, model_device
from .draft import Draft
from .draft_head import DraftHead
from .draft_weights import ModuleSwaps
from .draft_weights import draft_weights as build_draft_weights
from .forward import forward_tokens
from .policies import DraftPolicy
from .sampling import point_mass, sample
from .skip import SkipSet, skipping
from .state import DecodingState
from .strategies import SkipStrategy, StaticStrategy
from .tree import tree_forward, tree_verify_forward
from .tree_shapes import GrowingTree
from .verify import Verdict

__all__ = ["Draft", "Drafter", "SelfDrafter", "ModelDrafter", "LookupDrafter", "ngram_lookup",
           "stop_signal"]


class Drafter:
    """Interface: ``prepare`` once per call, then ``draft`` and ``commit`` every step. A drafter that learns from
    the target's logits at every prompt position (token recycling) sets ``reads_prompt_logits``: the prefill then
    keeps them all and hands them to :meth:`read_prompt_logits`."""

    reads_prompt_logits = False

    def prepare(self, state: DecodingState, prompt_ids: torch.Tensor) -> None:
        """Called once, after the target read ``prompt_ids`` (1, T-1) (all but the pending token) into its cache."""

    def read_prompt_logits(self, state: DecodingState, logits: torch.Tensor) -> None:
        """The target's logits (T-1, V) at every prompt position but the pending token's (after ``prepare``)."""

    def draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        raise NotImplementedError

    def commit(self, state: DecodingState, draft: Draft, verdict: Verdict) -> None:
        """Called after every verification of ``draft`` (the step began at ``verdict.start``); ``state.tokens``
        already holds what the step emitted, and the target's cache everything but the pending token."""


def stop_signal(draft: Draft, state: DecodingState, policy: DraftPolicy) -> float:
    """What the policy compares with its threshold after the last drafted token: the draft's top-1 probability,
    or while sampling, if the policy asks for it (``sampling_signal == "q"``), q(d) of the token it drew."""
    if policy.sampling_signal not in ("confidence", "q"):
        raise ValueError(f"sampling_signal must be 'confidence' or 'q', got {policy.sampling_signal!r}")
    if state.warp.do_sample and policy.sampling_signal == "q":
        return draft.q[-1]
    return draft.confidence[-1]


def draft_tokens(model, cache, feed: list[int], start: int, state: DecodingState, budget: int,
                 policy: DraftPolicy) -> tuple[Draft, int]:
    """Autoregressive drafting with ``model`` from ``feed`` at position ``start``: stops at EOS, at ``budget``
    tokens, or when ``policy`` says so after a token. Returns the draft and the next free cache position."""
    draft = Draft()
    while True:
        logits = forward_tokens(model, feed, start, cache, logits_to_keep=1)[-1]     # (V,)
        start += len(feed)
        q = state.warp.probs(logits)                                                # (V,)
        token = sample(q, state.generator) if state.warp.do_sample else int(logits.argmax())
        draft.add(token, q, keep_dist=state.warp.do_sample)
        stop = token in state.eos or len(draft) >= budget
        if stop or not policy.keep_drafting(len(draft), stop_signal(draft, state, policy)):
            return draft, start
        feed = [token]


class SelfDrafter(Drafter):
    """The target with some blocks removed (Draft & Verify): no second model, one shared cache.

    ``skip``: a fixed :class:`SkipSet` (drafted through a :class:`StaticStrategy`) or a :class:`SkipStrategy`,
    asked for the set before every draft and told how each verification went. ``weights``: None (the model's
    own), "int8" (the draft reads int8 copies of the kept blocks' weights, :mod:`labkit.core.draft_weights`;
    verification still uses the model's own) or stand-in modules built already (a
    :class:`~labkit.core.draft_weights.ModuleSwaps`: a width draft's MLPs, :func:`labkit.core.width.width_drafter`).
    ``head``: a :class:`~labkit.core.draft_head.DraftHead` fitted for the fixed set ``skip``, applied to the draft's
    last hidden state only."""

    def __init__(self, model, skip: SkipSet | SkipStrategy | None = None, weights: str | ModuleSwaps | None = None,
                 head: DraftHead | None = None, tree=None):
        skip = skip if skip is not None else SkipSet()
        if not isinstance(skip, (SkipSet, SkipStrategy)):
            raise TypeError(f"skip must be a labkit.SkipSet or a skip strategy (labkit.skip_strategy), "
                            f"got {type(skip).__name__}")
        if head is not None and not isinstance(head, DraftHead):
            raise TypeError(f"draft_head must be a labkit DraftHead (labkit.load_draft_head), "
                            f"got {type(head).__name__}")
        if isinstance(skip, SkipSet):
            skip = skip.validate(model.config.num_hidden_layers)
        check_mask_free_drafting(model, bool(skip.attention) if isinstance(skip, SkipSet) else True)
        if head is not None:                 # a strategy is never the set the head was fitted for: ValueError
            head.check(model, skip)
        self.strategy = (StaticStrategy(skip) if isinstance(skip, SkipSet) else skip).bind(model)
        if tree is not None and type(self.strategy).needs_hidden_states is not SkipStrategy.needs_hidden_states:
            raise ValueError(f"a tree draft cannot be verified with the hidden states the {self.strategy.name} "
                             f"strategy learns from: use a fixed skip set or another strategy")
        self.weights = weights if isinstance(weights, ModuleSwaps) else build_draft_weights(model, weights)
        self.model, self.head, self.tree = model, head, tree

    def prepare(self, state: DecodingState, prompt_ids: torch.Tensor) -> None:
        self.strategy.start(state)

    def draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        t0 = clock()
        skip = self.strategy.choose(state)
        t1 = clock()
        with skipping(self.model, skip), (self.weights.swapped() if self.weights else nullcontext()), \
                (self.head.applied(self.model) if self.head is not None else nullcontext()):
            if self.tree is None:
                draft, _ = draft_tokens(self.model, state.cache, [state.tokens[-1]], state.position - 1, state,
                                        budget, policy)
            else:
                draft = self._draft_tree(state, budget, policy)
        self.strategy.drafted(len(draft), clock() - t1)
        draft.skip, draft.drafter, draft.select_s = skip, self, t1 - t0
        draft.width = getattr(self.weights, "width", None)
        if self.strategy.needs_hidden_states:                    # the strategy watches the verify forward
            draft.forward = self.strategy.verify_forward
        return draft

    def _draft_tree(self, state: DecodingState, depth: int, policy: DraftPolicy) -> Draft:
        """A tree of at most ``depth`` levels grown by ``self.tree`` with this drafter's draft forwards."""
        def forward(tokens, positions, visible):
            return tree_forward(self.model, state.cache, tokens, positions, visible, state.position - 1)

        growing = GrowingTree(state, forward)
        self.tree.grow(growing, depth, policy)
        growing.draft.forward = tree_verify_forward
        return growing.draft

    def commit(self, state: DecodingState, draft: Draft, verdict: Verdict) -> None:
        self.strategy.observe(state, verdict.start, verdict, len(draft) if draft.drafter is self else 0)


class ModelDrafter(Drafter):
    """A separate draft model sharing the target's tokenizer, with a KV cache of its own."""

    def __init__(self, model, draft_model):
        check_supported(draft_model, "draft_model")
        if draft_model.config.vocab_size != model.config.vocab_size:
            raise ValueError(
                f"draft_model has a vocabulary of {draft_model.config.vocab_size} tokens, the model "
                f"{model.config.vocab_size}: the draft must share the model's tokenizer"
            )
        self.model, self.cache, self.cached = draft_model, new_cache(draft_model), 0

    def prepare(self, state: DecodingState, prompt_ids: torch.Tensor) -> None:
        forward_tokens(self.model, prompt_ids, 0, self.cache, logits_to_keep=1)
        self.cached = prompt_ids.shape[1]

    def draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        draft, self.cached = draft_tokens(self.model, self.cache, state.tokens[self.cached:], self.cached, state,
                                          budget, policy)
        draft.drafter = self
        return draft

    def commit(self, state: DecodingState, draft: Draft, verdict: Verdict) -> None:
        # still valid: positions before the step's start (the pending token included) and the accepted drafts
        self.cached = min(self.cached, verdict.start + verdict.n_accepted)
        crop_to(self.cache, self.cached)


def ngram_lookup(tokens: list[int], max_tokens: int, max_ngram: int = 3, min_ngram: int = 2) -> list[int]:
    """Prompt-lookup draft: the tokens that followed the most recent earlier occurrence of the
    sequence's last n tokens (longest n first). Free to compute; strong on code, which repeats itself."""
    if max_tokens <= 0:
        return []
    length = len(tokens)
    for n in range(min(max_ngram, length - 1), min_ngram - 1, -1):
        suffix = tokens[-n:]
        for start in range(length - n - 1, -1, -1):
            if tokens[start: start + n] == suffix:
                return tokens[start + n: start + n + max_tokens]
    return []


class LookupDrafter(Drafter):
    """Prompt lookup first (up to ``max_tokens`` copied tokens, q = 1 on each); ``fallback`` drafts otherwise."""

    def __init__(self, max_tokens: int, fallback: Drafter | None = None):
        self.max_tokens, self.fallback = check_int("lookup", max_tokens, 1), fallback

    def prepare(self, state: DecodingState, prompt_ids: torch.Tensor) -> None:
        if self.fallback is not None:
            self.fallback.prepare(state, prompt_ids)

    def draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        copied = ngram_lookup(state.tokens, min(self.max_tokens, budget))
        for i, token in enumerate(copied):
            if token in state.eos:                                  # stop a copied draft at EOS too
                copied = copied[: i + 1]
                break
        if not copied:
            return self.fallback.draft(state, budget, policy) if self.fallback is not None else Draft()
        draft = Draft(source="lookup", drafter=self)
        for token in copied:                                        # a point mass: q(d) = 1
            q = point_mass(token, state.vocab_size, model_device(state.model))
            draft.add(token, q, keep_dist=state.warp.do_sample)
        return draft

    def commit(self, state: DecodingState, draft: Draft, verdict: Verdict) -> None:
        if self.fallback is not None:                   # its cache and what it learns follow every step
            self.fallback.commit(state, draft, verdict)
