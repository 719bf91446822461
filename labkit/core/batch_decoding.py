"""Plain and self-speculative decoding of a batch: every row with its own draft length, verdict, bonus token and
end, all rows' drafts and verifies in one forward each (the cache, masks and ragged acceptance:
:mod:`labkit.core.batch`).

One step of a batch::

    draft (every row that drafts: one batched draft forward per drafted position; lookup and heads need none)
      ->  verify (one forward over [pending, d_1..d_γ_b] of every row, padded to the longest draft)
      ->  each row's verdict (greedy or speculative sampling, exactly as for one sequence)  ->  realign

Each row gets its own copy of the draft policy (an adaptive threshold adapts to its own row). ``LoadPolicy`` caps
γ by the number of rows still decoding: speculation spends spare compute, and so does batching. Drafters a batch
supports: a self-draft with a fixed skip set (any draft weights, a draft head), prompt lookup (alone or in front
of one of them) and Medusa heads drafting a chain; trees, cascades, skip strategies, separate draft models and
early exit decode one sequence at a time (a ValueError says so).
"""
from __future__ import annotations

import copy
from contextlib import ExitStack
from dataclasses import dataclass, field

import torch

from .batch import BatchConfig, BatchState, batch_forward, check_batch_fits, check_rows, keep_rows, new_batch, realign
from .cache import crop_to
from .devices import clock
from .draft import Draft
from .drafters import Drafter, LookupDrafter, SelfDrafter, ngram_lookup, stop_signal
from .forward import check_inputs
from .medusa import HeadsDrafter
from .sampling import point_mass, sample
from .skip import skipping
from .state import DecodingState
from .strategies import StaticStrategy
from .verify import verify

__all__ = ["BatchResult", "LoadPolicy", "batched_autoregressive", "batched_speculative", "batch_prompts",
           "is_batch"]


@dataclass
class BatchResult:
    """Each row's sequence (1, prompt + new) in the order given, and what the batch did."""

    sequences: list[torch.LongTensor]
    prompt_lengths: list[int]
    elapsed_s: float
    drafted: list[int] = field(default_factory=list)      # drafted tokens per row
    accepted: list[int] = field(default_factory=list)     # accepted drafted tokens per row
    steps: list[int] = field(default_factory=list)        # verify forwards each row took part in
    forwards: int = 0                                     # batched forwards after the prefill (drafts and verifies)

    @property
    def new_tokens(self) -> list[list[int]]:
        return [s[0, n:].tolist() for s, n in zip(self.sequences, self.prompt_lengths)]

    @property
    def n_new(self) -> int:
        return sum(len(t) for t in self.new_tokens)

    @property
    def ms_per_token(self) -> float:
        """Wall time per generated token of the whole batch (its throughput's inverse)."""
        return 1e3 * self.elapsed_s / self.n_new if self.n_new else float("nan")


@dataclass(frozen=True)
class LoadPolicy:
    """γ cap by batch size: ``max_draft[i]`` applies from ``batch_sizes[i]`` rows up (0: decode plainly). Built from
    c and c_v measured per batch size by :func:`labkit.measure.costs.batch_costs.load_policy`."""

    batch_sizes: tuple[int, ...] = (1,)
    max_draft: tuple[int, ...] = (12,)

    def __post_init__(self) -> None:
        if len(self.batch_sizes) != len(self.max_draft) or not self.batch_sizes:
            raise ValueError("LoadPolicy needs one max_draft per batch size, at least one")
        if list(self.batch_sizes) != sorted(set(self.batch_sizes)) or self.batch_sizes[0] < 1:
            raise ValueError(f"batch_sizes must be increasing and >= 1, got {self.batch_sizes}")
        if any(g < 0 for g in self.max_draft):
            raise ValueError(f"max_draft must be >= 0, got {self.max_draft}")

    def cap(self, batch_size: int) -> int:
        """The γ cap for ``batch_size`` rows: the entry of the largest listed size not above it."""
        return next(g for b, g in zip(reversed(self.batch_sizes), reversed(self.max_draft)) if b <= batch_size) \
            if batch_size >= self.batch_sizes[0] else self.max_draft[0]


def is_batch(input_ids, attention_mask) -> bool:
    """A list of prompts, a (B > 1, T) tensor, or any tensor given with an attention mask."""
    if isinstance(input_ids, (list, tuple)):
        return True
    return isinstance(input_ids, torch.Tensor) and (attention_mask is not None
                                                    or (input_ids.dim() == 2 and input_ids.shape[0] > 1))


def batch_prompts(model, input_ids, attention_mask, max_new_tokens) -> list[list[int]]:
    """The prompts a batch call names (padding removed by ``attention_mask``), each checked as one prompt is."""
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() != 2:
            raise ValueError(f"a batch of input_ids must have shape (B, T), got {tuple(input_ids.shape)}")
        if attention_mask is not None:
            if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape:
                raise ValueError(f"attention_mask must be a tensor of input_ids' shape {tuple(input_ids.shape)}")
            rows = [ids[mask.bool()] for ids, mask in zip(input_ids, attention_mask.cpu())]
        else:
            rows = list(input_ids)
    else:
        rows = list(input_ids)
    rows = check_rows(rows)
    return [check_inputs(model, torch.tensor([r]), max_new_tokens)[0].tolist() for r in rows]


def _choose(logits: torch.Tensor, state: BatchState) -> int:
    return sample(state.warp.probs(logits), state.generator) if state.warp.do_sample else int(logits.argmax())


def _finish(state: BatchState, max_new_tokens: int, out: dict) -> None:
    """Rows at EOS or their budget leave the batch; their sequences go to ``out`` by original row."""
    keep = []
    for i, tokens in enumerate(state.tokens):
        if state.n_emitted(i) >= max_new_tokens or (state.n_emitted(i) and tokens[-1] in state.eos):
            out[state.rows[i]] = tokens
        else:
            keep.append(i)
    keep_rows(state, keep)


@torch.inference_mode()
def batched_autoregressive(model, prompts: list[list[int]], max_new_tokens: int, warp, eos, generator,
                           config: BatchConfig | None = None) -> BatchResult:
    """The batched plain loop: one forward of every unfinished row's pending token per step."""
    t0 = clock()
    out: dict[int, list[int]] = {}
    state, _ = new_batch(model, prompts, warp, eos, generator)
    forwards = 0
    if max_new_tokens == 0:
        keep_rows(state, [])
        out = dict(enumerate(prompts))
    while state.size:
        ones = torch.ones(state.size, 1, dtype=torch.bool)
        check_batch_fits(model, state.valid.shape[1] + 1)
        logits = batch_forward(model, state.cache, state.valid, torch.tensor([[t[-1]] for t in state.tokens]),
                               torch.tensor([[p - 1] for p in state.positions()]), ones, last_only=True).logits
        forwards += 1
        state.valid = torch.cat([state.valid, ones], dim=1)
        for i, tokens in enumerate(state.tokens):
            tokens.append(_choose(logits[i, -1], state))
        _finish(state, max_new_tokens, out)
    return _result(out, prompts, clock() - t0, forwards=forwards)


def _result(out: dict, prompts, elapsed: float, **counts) -> BatchResult:
    device_rows = [torch.tensor([out[b]]) for b in range(len(prompts))]
    return BatchResult(device_rows, [len(p) for p in prompts], elapsed, **counts)


@dataclass
class _Spec:
    """What a batch drafts with, read off a drafter: lookup tokens, a self-draft (set, weights, head), heads."""

    lookup: int = 0
    self_drafter: SelfDrafter | None = None
    heads: HeadsDrafter | None = None


def batch_spec(drafter: Drafter) -> _Spec:
    """The batch's view of ``drafter``, or a ValueError naming what a batch cannot draft with."""
    spec, inner = _Spec(), drafter
    if type(drafter) is LookupDrafter:
        spec.lookup, inner = drafter.max_tokens, drafter.fallback
    if type(inner) is SelfDrafter and type(inner.strategy) is StaticStrategy and inner.tree is None:
        spec.self_drafter = inner
    elif type(inner) is HeadsDrafter and inner.choices is None:
        spec.heads = inner
    elif inner is not None:
        raise ValueError(f"batched decoding drafts with a fixed skip set (any draft weights, a draft head), prompt "
                         f"lookup and Medusa heads as a chain; got {type(inner).__name__}"
                         f"{' with a tree' if getattr(inner, 'tree', None) or getattr(inner, 'choices', None) else ''}"
                         f": trees, cascades, skip strategies, separate draft models and early exit decode one "
                         f"sequence at a time (pass one prompt)")
    return spec


def _row_state(state: BatchState, i: int) -> DecodingState:
    """Row i as the one-sequence state the verdict and the drafters' helpers read (no cache of its own)."""
    return DecodingState(state.model, None, state.tokens[i], state.prompt_lengths[i], state.warp, state.eos,
                         state.generator)


def _lookup_draft(state: BatchState, i: int, max_tokens: int) -> Draft | None:
    copied = ngram_lookup(state.tokens[i], max_tokens)
    for k, token in enumerate(copied):
        if token in state.eos:
            copied = copied[: k + 1]
            break
    if not copied:
        return None
    draft = Draft(source="lookup")
    for token in copied:
        draft.add(token, point_mass(token, int(state.model.config.vocab_size), state.valid.device),
                  keep_dist=state.warp.do_sample)
    return draft


def _self_drafts(state: BatchState, drafter: SelfDrafter, policies, budgets: list[int], drafts: list,
                 draft_while: float) -> int:
    """Self-drafts for rows whose ``drafts[i]`` is None and budget > 0, one batched draft forward per position
    while at least ``draft_while`` of the rows that began still draft; returns the number of forwards."""
    drafting = [drafts[i] is None and budgets[i] > 0 for i in range(state.size)]
    started = sum(drafting)
    for i in range(state.size):
        drafts[i] = Draft() if drafts[i] is None else drafts[i]
    feed, columns, width, forwards = [t[-1] for t in state.tokens], [], state.valid.shape[1], 0
    with ExitStack() as stack:
        stack.enter_context(skipping(state.model, drafter.strategy.skip))
        if drafter.weights is not None:
            stack.enter_context(drafter.weights.swapped())
        if drafter.head is not None:
            stack.enter_context(drafter.head.applied(state.model))
        while any(drafting) and sum(drafting) >= draft_while * started:
            new = torch.tensor(drafting)[:, None]
            cached = torch.cat([state.valid, *columns], dim=1)
            check_batch_fits(state.model, cached.shape[1] + 1)
            logits = batch_forward(state.model, state.cache, cached, torch.tensor(feed)[:, None],
                                   torch.tensor([[p - 1 + len(columns)] for p in state.positions()]), new,
                                   last_only=True).logits[:, -1]
            columns.append(new)
            forwards += 1
            q = state.warp.probs(logits)                                                   # (B, V)
            for i in (i for i in range(state.size) if drafting[i]):
                feed[i] = sample(q[i], state.generator) if state.warp.do_sample else int(logits[i].argmax())
                drafts[i].add(feed[i], q[i], keep_dist=state.warp.do_sample)
                drafting[i] = not (feed[i] in state.eos or len(drafts[i]) >= budgets[i] or not policies[i]
                                   .keep_drafting(len(drafts[i]), stop_signal(drafts[i], _row_state(state, i),
                                                                              policies[i])))
    crop_to(state.cache, width)                       # skipped attention appended nothing: realign every layer
    return forwards


def _head_drafts(state: BatchState, heads: HeadsDrafter, hidden, policies, budgets: list[int], drafts: list):
    """Medusa chains for rows whose ``drafts[i]`` is None, from h kept at each row's pending token's predecessor."""
    for i in range(state.size):
        if drafts[i] is None:
            drafts[i] = Draft()
            if hidden[i] is not None and budgets[i] > 0:
                q = state.warp.probs(heads.heads.logits(state.model, hidden[i]))          # (K, V)
                heads._chain(drafts[i], q[:budgets[i]], _row_state(state, i), policies[i])


def _verify_forward(state: BatchState, drafts: list[Draft], hidden_states: bool):
    """One forward of every row's [pending, d_1..d_γ_b], padded to the longest draft: logits (B, 1 + G, V), the
    last layer's states (B, 1 + G, H) when asked for, and which new columns are real (B, 1 + G)."""
    width = 1 + max(len(d) for d in drafts)
    ids = torch.zeros(state.size, width, dtype=torch.long)
    new = torch.zeros(state.size, width, dtype=torch.bool)
    for i, (tokens, draft) in enumerate(zip(state.tokens, drafts)):
        ids[i, : 1 + len(draft)] = torch.tensor([tokens[-1]] + draft.tokens)
        new[i, : 1 + len(draft)] = True
    positions = torch.tensor(state.positions())[:, None] - 1 + torch.arange(width)[None]
    check_batch_fits(state.model, state.valid.shape[1] + width)
    out = batch_forward(state.model, state.cache, state.valid, ids, positions, new, hidden_states=hidden_states)
    return out.logits, (out.hidden_states[-1] if hidden_states else None), new


@dataclass
class _Counts:
    drafted: list[int]
    accepted: list[int]
    steps: list[int]
    forwards: int = 0


def _step(state: BatchState, spec: _Spec, policies, hidden, budgets, config: BatchConfig, counts: _Counts):
    """One draft -> verify -> accept step of every row; returns h at each row's new pending token's predecessor
    (Medusa heads) or None."""
    drafts = [_lookup_draft(state, i, min(spec.lookup, budgets[i])) if spec.lookup and budgets[i] > 0 else None
              for i in range(state.size)]
    if spec.self_drafter is not None:
        counts.forwards += _self_drafts(state, spec.self_drafter, policies, budgets, drafts, config.draft_while)
    elif spec.heads is not None:
        _head_drafts(state, spec.heads, hidden, policies, budgets, drafts)
    drafts = [d if d is not None else Draft() for d in drafts]
    logits, last_hidden, new = _verify_forward(state, drafts, spec.heads is not None)
    counts.forwards += 1
    verdicts = [verify(_row_state(state, i), logits[i, : 1 + len(d)], d)
                for i, d in enumerate(drafts)]
    if config.ragged == "shortest":                 # every row keeps as many drafted tokens as the fewest kept
        least = min(v.n_accepted for v in verdicts)
        for v, d in zip(verdicts, drafts):
            if v.n_accepted > least:
                v.n_accepted, v.next_token = least, d.tokens[least]
        new[:, 1 + least:] = False
        new = new[:, : 1 + least]
    for i, (draft, verdict) in enumerate(zip(drafts, verdicts)):
        kept = draft.tokens[: verdict.n_accepted]
        state.tokens[i].extend(kept if kept and kept[-1] in state.eos else kept + [verdict.next_token])
        new[i, 1 + verdict.n_accepted:] = False
        if draft.source == "model":
            policies[i].update(len(draft), verdict.n_accepted)
        policies[i].observe_target(verdict.target_confidence)
        counts.drafted[state.rows[i]] += len(draft)
        counts.accepted[state.rows[i]] += verdict.n_accepted
        counts.steps[state.rows[i]] += 1
    state.valid = torch.cat([state.valid, new], dim=1)
    if last_hidden is None:
        return None
    return [last_hidden[i, v.n_accepted] for i, v in enumerate(verdicts)]


@torch.inference_mode()
def batched_speculative(model, prompts: list[list[int]], drafter: Drafter, policy, max_new_tokens: int, warp, eos,
                        generator, config: BatchConfig | None = None, load: LoadPolicy | None = None) -> BatchResult:
    """Self-speculative decoding of every prompt in one batch (see the module docstring); ``policy`` is copied for
    every row, ``load`` caps γ by the number of rows still decoding."""
    config = config if config is not None else BatchConfig()
    spec = batch_spec(drafter)
    t0 = clock()
    out: dict[int, list[int]] = {}
    state, hidden = new_batch(model, prompts, warp, eos, generator, hidden_states=spec.heads is not None)
    hidden = [h if len(p) > 1 else None for h, p in zip(hidden, prompts)] if hidden is not None else \
        [None] * len(prompts)
    policies = [copy.deepcopy(policy) for _ in prompts]
    for p in policies:
        p.begin()
    counts = _Counts([0] * len(prompts), [0] * len(prompts), [0] * len(prompts))
    if max_new_tokens == 0:
        keep_rows(state, [])
        out = dict(enumerate(prompts))
    while state.size:
        cap = load.cap(state.size) if load is not None else None
        budgets = [min(policies[i].max_draft if cap is None else min(cap, policies[i].max_draft),
                       max_new_tokens - state.n_emitted(i) - 1) for i in range(state.size)]
        hidden = _step(state, spec, policies, hidden, budgets, config, counts)
        before = list(state.rows)
        _finish(state, max_new_tokens, out)
        if hidden is not None:
            hidden = [hidden[before.index(r)] for r in state.rows]
        policies = [policies[before.index(r)] for r in state.rows]
        realign(state, config)
    return _result(out, prompts, clock() - t0, drafted=counts.drafted, accepted=counts.accepted,
                   steps=counts.steps, forwards=counts.forwards)
