"""Cascades: a drafter whose draft is itself drafted speculatively by a cheaper drafter (CAS-Spec, NeurIPS 2025).

Notation as in :mod:`labkit.core.decoding`: p the target, q a draft's distribution (after the same warp), α the
per-token acceptance probability, γ tokens proposed per round, c the cost of one forward of a draft, c_v of one
verification by the target.

Levels, cheapest first: prompt lookup (optional, bottom only), then "virtual" drafts of the same model (a skip set,
optionally int8 weights and a draft head), the last one, the *top*, closest to the target. The top level drafts by
running speculative decoding itself with the level below as its drafter, recursively::

    level k, one round:  level k-1 proposes l_1..l_γ (its own q_{k-1}, or a copied point mass)
                         ONE forward of level k over [pending, l_1..l_γ] gives q_k at each of the γ + 1 rows
                         greedy: keep the l_i that equal argmax q_k, then level k's own argmax
                         sampling: keep l_i with probability min(1, q_k(l_i) / q_{k-1}(l_i)), then draw level k's
                         own token from normalise(max(0, q_k - q_{k-1})), or from q_k after the last one
    the accepted tokens and level k's own token join level k's draft, each with q_k at its position.

This is the engine's verification (:func:`~labkit.core.verify.verify_greedy`, :func:`~.verify_sampling`) with q_k
in the role of p, so level k's draft is what level k would draft alone: token for token when greedy, distributed as
q_k when sampling. The top's draft therefore carries the top's q, and the target verifies it exactly as it verifies
any chain: greedy output is token-identical to plain decoding, sampled output an exact sample of p.

The cache: every model level keeps its own KV cache for the step, a fork (:func:`~labkit.core.cache.fork_cache`) of
the target's prefix (the P - 1 positions before the pending token) holding only the layers whose attention the
level keeps, and then only entries the level computed itself, for the tokens it was fed. Before a forward the level
keeps the longest run of what it was fed that still matches the step's tokens (``crop_to``) and feeds the rest, so
after a verdict it resumes where its accepted tokens end, and after a rejection it recomputes only the changed
tail. Each level's q is thus a function of the target's prefix and the step's tokens alone, whatever the other
levels did, and the target's own cache is never touched while drafting. What it costs: one copy of the kept
layers' prefix per model level per step (``DynamicLayer.update`` concatenates; each forward on the shared cache
copies a layer too), and a level that lags by a token (its proposals were all accepted, so it never fed the last)
feeds one more row in its next forward. Sharing ``state.cache`` instead would interleave the levels' entries in the
layers two levels keep, where cropping one level's entries would drop the other's.

The controller (:class:`FixedController`, :class:`DynamicController`, after CAS-Spec's DyTC) chooses, per step,
which levels under the top take part (the *route*) and how many tokens each proposes per round.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field

import torch

from .architectures import check_mask_free_drafting
from .cache import crop_to, fork_cache
from .checks import check_choice, check_int, check_number, check_probability, with_defaults
from .devices import clock, model_device
from .draft import Draft
from .draft_config import DraftConfig
from .draft_head import DraftHead
from .draft_weights import Int8DraftWeights
from .draft_weights import draft_weights as build_draft_weights
from .drafters import Drafter, LookupDrafter, SelfDrafter, ngram_lookup, stop_signal
from .expectation import expected_tokens
from .forward import forward_tokens
from .policies import DraftPolicy
from .sampling import point_mass
from .skip import SkipSet, skipping
from .state import DecodingState
from .strategies import StaticStrategy
from .strategies.base import SmoothedAcceptance
from .tree import tree_forward
from .verify import Verdict, verify_greedy, verify_sampling

__all__ = ["CONTROLLERS", "CascadeDrafter", "DynamicController", "FixedController", "LookupLevel", "ModelLevel",
           "Plan", "cascade"]

CONTROLLERS = ("fixed", "dynamic")
Token = tuple[int, torch.Tensor]                  # a drafted token and the drafting level's q at its position (V,)


class LookupLevel:
    """Prompt lookup as the bottom level: up to γ tokens copied from the context, q a point mass on each."""

    is_model = False

    def __init__(self, max_tokens: int):
        self.max_tokens = check_int("lookup", max_tokens, 1)
        self.name = "lookup"

    def propose(self, state: DecodingState, context: list[int], n: int) -> list[Token]:
        """Copied continuations of ``state.tokens[:-1] + context`` (cut after an EOS), with one-hot q."""
        copied = ngram_lookup(state.tokens[:-1] + context, min(n, self.max_tokens))
        out = []
        for token in copied:
            out.append((token, point_mass(token, state.vocab_size, model_device(state.model))))
            if token in state.eos:
                break
        return out


class ModelLevel:
    """A virtual draft: the target with the blocks of ``skip`` removed, its own or int8 weights, maybe a head.

    Holds its own cache per step (see the module docstring): ``begin`` forks the target's prefix, ``logits``
    feeds what the cache lacks of the step's tokens. Built without a model, it binds to the first one it drafts for."""

    is_model = True

    def __init__(self, skip: SkipSet, weights: str | Int8DraftWeights | None = None, head: DraftHead | None = None,
                 model=None):
        self.skip, self.weights, self.head, self.model = skip, weights, head, None
        self.name = f"skip {skip.n_skipped}" + (" int8" if weights is not None else "") + (" head" if head else "")
        self.cache, self.start, self.fed = None, 0, []
        if model is not None:
            self.bind(model)

    def bind(self, model) -> None:
        """Check the set (and head) against ``model`` and build its draft weights; once per model."""
        if self.model is model:
            return
        if self.model is not None:
            raise ValueError("a cascade level was built for another model than the one decoding")
        n_layers = model.config.num_hidden_layers
        self.skip = self.skip.validate(n_layers)
        if self.head is not None:
            self.head.check(model, self.skip)
        if not isinstance(self.weights, Int8DraftWeights):
            self.weights = build_draft_weights(model, self.weights)
        check_mask_free_drafting(model, bool(self.skip.attention))          # its one-token forwards pass no mask
        implementation = getattr(model.config, "_attn_implementation", "sdpa")
        if implementation not in ("sdpa", "eager"):
            raise ValueError(f"a cascade verifies with several rows per forward and an explicit mask: it needs "
                             f"attn_implementation 'sdpa' or 'eager', the model uses {implementation!r}")
        self.model = model
        self.kept_attention = set(range(n_layers)) - set(self.skip.attention)
        self.name = f"skip {self.skip.n_skipped}/{2 * n_layers}" + (" int8" if self.weights else "") \
            + (" head" if self.head is not None else "")

    def begin(self, state: DecodingState) -> None:
        """A fresh cache for this step: the target's prefix (all but the pending token) in the layers it reads."""
        self.start = state.position - 1
        self.cache = fork_cache(self.model, state.cache, self.start, layers=self.kept_attention)
        self.fed = []

    def active(self) -> ExitStack:
        """The model as this draft: blocks removed, int8 weights in, head on (undone on exit)."""
        stack = ExitStack()
        stack.enter_context(skipping(self.model, self.skip))
        if self.weights is not None:
            stack.enter_context(self.weights.swapped())
        if self.head is not None:
            stack.enter_context(self.head.applied(self.model))
        return stack

    def logits(self, tokens: list[int], keep: int) -> torch.Tensor:
        """This draft's logits (keep, V) at the last ``keep`` of ``tokens`` (the step's tokens from the pending
        one on), inside ``active()``. Feeds only what its cache does not hold yet (at least ``keep`` tokens)."""
        common = 0
        limit = min(len(self.fed), len(tokens) - keep)
        while common < limit and self.fed[common] == tokens[common]:
            common += 1
        crop_to(self.cache, self.start + common)
        feed, at = tokens[common:], self.start + common
        if len(feed) == 1:
            logits = forward_tokens(self.model, feed, at, self.cache, logits_to_keep=1)
        else:                                                   # a causal mask over the fed rows, explicit
            visible = torch.ones(len(feed), len(feed), dtype=torch.bool).tril()
            logits = tree_forward(self.model, self.cache, feed, list(range(at, at + len(feed))), visible, at)
        self.fed = list(tokens)
        return logits[-keep:]


def make_level(spec, index: int, gamma: int):
    """A level from what :func:`cascade` accepts: "lookup", a LookupDrafter (no fallback), a SkipSet, a DraftConfig
    (its set and weights), or a SelfDrafter with a fixed set (its set, weights and head)."""
    name = f"levels[{index}]"
    if isinstance(spec, str) and spec == "lookup":
        return LookupLevel(gamma)
    if isinstance(spec, LookupDrafter):
        if spec.fallback is not None:
            raise ValueError(f"{name}: a LookupDrafter level must have no fallback; in a cascade the level above "
                             f"drafts when nothing matches")
        return LookupLevel(spec.max_tokens)
    if isinstance(spec, SkipSet):
        return ModelLevel(spec)
    if isinstance(spec, DraftConfig):
        return ModelLevel(spec.skip, spec.draft_weights)
    if isinstance(spec, SelfDrafter):
        if not isinstance(spec.strategy, StaticStrategy) or spec.tree is not None:
            raise ValueError(f"{name}: a SelfDrafter level needs a fixed skip set and a chain (no strategy, no tree)")
        return ModelLevel(spec.strategy.skip, spec.weights, spec.head, spec.model)
    raise TypeError(f"{name} must be 'lookup', a LookupDrafter, a SkipSet, a DraftConfig or a SelfDrafter with a "
                    f"fixed set, got {spec!r}")


@dataclass
class Plan:
    """One step's arrangement: which levels draft (cheapest first, the top last) and how many tokens each helper
    proposes per round of the level above it."""

    route: tuple[int, ...]
    gamma: dict[int, int] = field(default_factory=dict)
    expected_ms: float = math.nan              # the dynamic controller's predicted ms per emitted token


class FixedController:
    """Always the whole cascade, each helper level proposing its fixed γ per round."""

    name = "fixed"

    def __init__(self, n_levels: int, gamma: list[int]):
        self.n_levels, self.gamma = n_levels, list(gamma)

    def plan(self) -> Plan:
        return Plan(tuple(range(self.n_levels)), dict(enumerate(self.gamma)))

    def observe_round(self, lower: int, upper: int, proposed: int, accepted: int) -> None:
        """A round of ``upper`` verifying ``proposed`` tokens of ``lower``; ``accepted`` were kept."""

    def observe_step(self, counts: list[dict], drafted: int, accepted: int, verify_s: float) -> None:
        """After the target's verdict: each level's counts and seconds, the top's draft and the verify time."""


class DynamicController(FixedController):
    """CAS-Spec's DyTC, simplified: per step, the route and the helpers' γ that maximise expected tokens per second.

    Measured, with exponential smoothing (``beta``): α for every pair (lower, upper) of levels and for (top, target)
    (:class:`~labkit.core.strategies.base.SmoothedAcceptance`: an accepted token counts 1, the first rejected one 0;
    a lookup that found nothing counts as one rejection, starting at ``prior``); c_k, the seconds of one forward of
    level k (one call for lookup), from the level's own draft timings unless ``costs`` gives them; c_v, the time
    from the end of a draft to its verdict; γ_T, the top's draft length (the policy decides it).

    Model: a level fed by helper j with γ proposals per round makes E(α_jk, γ) tokens for γ c_j' + c_k, so its cost
    per token is c_k' = min over γ of (γ c_j' + c_k) / E(α_jk, γ) (a lookup helper costs c_j per round, whatever γ),
    computed from the bottom of the route up (c' of the bottom is its c). The step then emits E(α_T, γ_T) tokens
    for γ_T c_top' + c_v. Every route that ends at the top (2^(levels - 1)) is scored; the best is used. Every
    ``explore`` steps (and until every level has been timed) the whole cascade runs with the fixed γ, so a bypassed
    level is measured again. ``per_call``: the levels whose c is per call, not per token (lookup)."""

    name = "dynamic"

    def __init__(self, n_levels: int, gamma: list[int], max_gamma: list[int], per_call: list[bool], *,
                 beta: float = 0.9, prior: float = 0.6, explore: int = 16, costs: list[float | None] | None = None):
        super().__init__(n_levels, gamma)
        self.max_gamma, self.per_call, self.beta, self.explore = list(max_gamma), list(per_call), beta, explore
        pairs = [(j, k) for k in range(1, n_levels + 1) for j in range(k)]          # k == n_levels: the target
        self.alpha = {pair: SmoothedAcceptance(beta, prior) for pair in pairs}
        self.fixed_costs = list(costs) if costs is not None else [None] * n_levels
        self.cost: list[float | None] = list(self.fixed_costs)
        self.verify_s, self.drafted, self.steps = None, 1.0, 0
        self.last: Plan | None = None

    def plan(self) -> Plan:
        self.steps += 1
        if (self.steps - 1) % self.explore == 0 or None in self.cost or self.verify_s is None:
            self.last = super().plan()
            return self.last
        top, best = self.n_levels - 1, None
        for r in range(top + 1):
            for helpers in itertools.combinations(range(top), r):
                route = helpers + (top,)
                cost, gamma = self.route_cost(route)
                gamma_t = max(1, round(self.drafted))
                ms = 1e3 * (gamma_t * cost + self.verify_s) / expected_tokens(self.alpha[top, self.n_levels].value,
                                                                               gamma_t)
                if best is None or ms < best.expected_ms:
                    best = Plan(route, gamma, ms)
        self.last = best
        return best

    def route_cost(self, route: tuple[int, ...]) -> tuple[float, dict[int, int]]:
        """(c' of the route's top in seconds per token, the best γ of each helper), bottom up."""
        cost, gamma = self.cost[route[0]], {}
        for lower, upper in zip(route, route[1:]):
            options = {}
            for g in range(1, self.max_gamma[lower] + 1):
                proposals = cost if self.per_call[lower] else g * cost
                options[g] = (proposals + self.cost[upper]) / expected_tokens(self.alpha[lower, upper].value, g)
            gamma[lower] = min(options, key=options.get)
            cost = options[gamma[lower]]
        return cost, gamma

    def observe_round(self, lower: int, upper: int, proposed: int, accepted: int) -> None:
        self.alpha[lower, upper].update(max(proposed, 1), accepted)

    def observe_step(self, counts: list[dict], drafted: int, accepted: int, verify_s: float) -> None:
        top = self.n_levels - 1
        self.alpha[top, self.n_levels].update(drafted, accepted)
        smooth = self._smooth
        for k, c in enumerate(counts):
            if self.fixed_costs[k] is None and c["forwards"]:
                self.cost[k] = smooth(self.cost[k], c["seconds"] / c["forwards"])
        self.verify_s = smooth(self.verify_s, verify_s)
        self.drafted = smooth(self.drafted, float(drafted))

    def _smooth(self, old: float | None, new: float) -> float:
        return new if old is None else self.beta * old + (1 - self.beta) * new


def level_counts(name: str) -> dict:
    """One level's part in one step (``Draft.levels``, ``StepRecord.levels``): tokens it proposed to the level
    above (the top: to the target), how many of them that level accepted, tokens it drafted itself (its replacement
    or bonus tokens), its forwards (lookup: calls) and their seconds; ``used``: whether the route included it."""
    return {"level": name, "used": False, "proposed": 0, "accepted": 0, "own": 0, "forwards": 0, "seconds": 0.0}


class CascadeDrafter(Drafter):
    """The top level drafts by speculative decoding over the levels below it (the module docstring); the
    controller picks the route and the helpers' γ each step. Build it with :func:`cascade`."""

    def __init__(self, levels: list, controller: FixedController):
        self.levels, self.controller = levels, controller
        self._plan: Plan | None = None
        self._drafted_at = 0.0

    def _bind(self, model) -> None:
        for level in self.levels:
            if level.is_model:
                level.bind(model)

    def prepare(self, state: DecodingState, prompt_ids: torch.Tensor) -> None:
        self._bind(state.model)

    def draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        t0 = clock()
        self._bind(state.model)                        # a one-token prompt skips prepare
        plan = self._plan = self.controller.plan()
        t1 = clock()
        counts = [level_counts(level.name) for level in self.levels]
        for k in plan.route:
            counts[k]["used"] = True
            if self.levels[k].is_model:
                self.levels[k].begin(state)
        draft = Draft(drafter=self)

        def stop(token: int, q: torch.Tensor) -> bool:          # the top's tokens go straight into the draft
            draft.add(token, q, keep_dist=state.warp.do_sample)
            return not policy.keep_drafting(len(draft), stop_signal(draft, state, policy))

        self._speculate(state, plan, len(plan.route) - 1, [state.tokens[-1]], budget, counts, stop)
        top = plan.route[-1]
        counts[top]["proposed"] = len(draft)
        draft.skip, draft.select_s, draft.levels = self.levels[top].skip, t1 - t0, counts
        self._drafted_at = clock()
        return draft

    def _speculate(self, state: DecodingState, plan: Plan, i: int, context: list[int], budget: int,
                   counts: list[dict], stop: Callable[[int, torch.Tensor], bool] | None = None) -> list[Token]:
        """Up to ``budget`` tokens of level ``plan.route[i]`` after ``context`` (the step's tokens from the pending
        one on), each with its q: rounds of proposals from the level below, verified with one forward of this one.
        Stops after an EOS, at ``budget``, or when ``stop`` (the top's policy) says so after a token."""
        k = plan.route[i]
        level, own, out = self.levels[k], counts[k], []
        t0 = clock()
        if not level.is_model:                                  # lookup: the bottom, proposes and is done
            out = level.propose(state, context, budget)
            own["forwards"] += 1
            own["seconds"] += clock() - t0
            return out
        with level.active() if i == 0 else ExitStack():        # the bottom stays swapped in for all its rounds
            while len(out) < budget:
                tokens = context + [t for t, _ in out]
                room = budget - len(out) - 1                    # the round's own token needs one place
                below = self._speculate(state, plan, i - 1, tokens, min(plan.gamma[plan.route[i - 1]], room),
                                        counts) if i > 0 and room > 0 else []
                proposed = [t for t, _ in below]
                t0 = clock()
                with level.active() if i > 0 else ExitStack():
                    logits = level.logits(tokens + proposed, keep=len(proposed) + 1)       # (γ + 1, V)
                q = state.warp.probs(logits)
                n, token = (verify_sampling(q, [d for _, d in below], proposed, state.generator)
                            if state.warp.do_sample else verify_greedy(logits, proposed))
                own["forwards"] += 1
                own["seconds"] += clock() - t0
                if i > 0 and room > 0:
                    counts[plan.route[i - 1]]["proposed"] += len(proposed)
                    counts[plan.route[i - 1]]["accepted"] += n
                    self.controller.observe_round(plan.route[i - 1], k, len(proposed), n)
                for j, t in enumerate(proposed[:n] + [token]):
                    out.append((t, q[j]))
                    own["own"] += j == n
                    halted = stop is not None and stop(t, q[j])            # (the top's token enters the draft)
                    if halted or t in state.eos or len(out) >= budget:
                        return out
        return out

    def commit(self, state: DecodingState, draft: Draft, verdict: Verdict) -> None:
        if draft.drafter is not self or draft.levels is None:
            return
        verify_s = clock() - self._drafted_at
        draft.levels[self._plan.route[-1]]["accepted"] = verdict.n_accepted
        self.controller.observe_step(draft.levels, len(draft), verdict.n_accepted, verify_s)


def _gammas(gamma, n_helpers: int) -> list[int]:
    if isinstance(gamma, (list, tuple)):
        if len(gamma) != n_helpers:
            raise ValueError(f"gamma must be one number or one per level under the top ({n_helpers}), got {gamma!r}")
        return [check_int(f"gamma[{i}]", g, 1) for i, g in enumerate(gamma)]
    return [check_int("gamma", gamma, 1)] * n_helpers


#: The dynamic controller's settings :func:`cascade` takes by name, with their defaults.
DYNAMIC_DEFAULTS = {"max_gamma": 8, "explore": 16, "smoothing": 0.9, "prior": 0.6}


def cascade(levels, *, model=None, controller: str = "fixed", gamma=4, cost_model=None,
            **dynamic) -> CascadeDrafter:
    """A drafter whose top level (the last of ``levels``, cheapest first) drafts by speculative decoding over the
    levels below it: ``speculative_generate(model, ids, drafter=cascade([...]))``.

    ``levels``: "lookup" or a LookupDrafter (bottom only), SkipSets, DraftConfigs (set and draft weights), or
    SelfDrafters with a fixed set; at least two, the top a model level. ``model``: binds (checks) the levels now;
    otherwise they bind to the model they first draft for. ``gamma``: tokens each helper proposes per round (one
    number, or one per helper); a lookup helper copies at most that many. ``controller``: "fixed" (the whole
    cascade, ``gamma``) or "dynamic" (:class:`DynamicController`: the route and γ ≤ ``max_gamma`` per step, from α
    smoothed with ``smoothing`` from ``prior``, the whole cascade every ``explore`` steps). ``cost_model``: any
    object with ``draft_ms(skip)`` (a :class:`labkit.measure.costs.costmodel.CostModel`) for the model levels' c instead
    of their measured timings."""
    max_gamma, explore, smoothing, prior = with_defaults("cascade", dynamic, DYNAMIC_DEFAULTS).values()
    if not isinstance(levels, (list, tuple)):
        raise TypeError(f"levels must be a list of drafts, cheapest first, got {type(levels).__name__}")
    if len(levels) < 2:
        raise ValueError(f"levels must name at least two drafts (cheapest first, the top last), got {len(levels)}")
    gammas = _gammas(gamma, len(levels) - 1)
    built = [make_level(spec, i, gammas[i] if i < len(gammas) else 1) for i, spec in enumerate(levels)]
    for i, level in enumerate(built[1:], start=1):
        if not level.is_model:
            raise ValueError(f"levels[{i}]: prompt lookup can only be the bottom level (levels[0]); the levels above "
                             f"it verify, which needs a distribution of their own")
    check_choice("controller", controller, CONTROLLERS)
    check_int("max_gamma", max_gamma, 1)
    check_int("explore", explore, 1)
    check_number("smoothing", smoothing, 0.0, 1.0)
    check_probability("prior", prior)
    if cost_model is not None and not callable(getattr(cost_model, "draft_ms", None)):
        raise TypeError(f"cost_model must have a draft_ms(skip) method (labkit CostModel), got {cost_model!r}")
    if model is not None:
        for level in built:
            if level.is_model:
                level.bind(model)
    if controller == "fixed":
        return CascadeDrafter(built, FixedController(len(built), gammas))
    costs = [1e-3 * cost_model.draft_ms(level.skip) if cost_model is not None and level.is_model else None
             for level in built]
    limits = [min(max_gamma, level.max_tokens) if not level.is_model else max_gamma for level in built]
    dynamic = DynamicController(len(built), gammas, limits, [not level.is_model for level in built], beta=smoothing,
                                prior=prior, explore=explore, costs=costs)
    return CascadeDrafter(built, dynamic)
