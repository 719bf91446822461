"""Plain and speculative decoding as small free functions named after their phases (one sequence; a batch is
dispatched to :mod:`labkit.core.batch_decoding`).

Notation, used throughout labkit: p is the target distribution (the full model), q the draft
distribution (the model with blocks skipped, a separate small model, or a copy from the context),
both after the same :class:`~labkit.core.sampling.Warp`. A step drafts γ tokens d_1..d_γ (the policy
decides γ, at most its ``max_draft``), verifies them in one forward of the target, accepts the first
n and appends one token of the target's own, so it emits n + 1 tokens::

    prefill  ->  repeat { draft  ->  verify  ->  accept  ->  record }

The KV cache holds every emitted token but the last, which is *pending* (see :mod:`labkit.core.state`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .batch import BatchConfig
from .batch_decoding import BatchResult, batch_prompts, batched_autoregressive, batched_speculative, is_batch
from .cache import new_cache
from .checks import take_options
from .devices import clock
from .drafters import Draft, Drafter
from .forward import check_inputs, eos_set, forward_tokens
from .jacobi_trace import JacobiTrace
from .policies import DraftPolicy
from .request import DRAFT_KEYWORDS, SAMPLING_KEYWORDS, resolve_drafter, resolve_sampling
from .sampling import Warp, sample
from .state import DecodingState
from .trace import StepRecord, Trace
from .verify import accept, full_forward, verify

__all__ = ["GenerationResult", "autoregressive_generate", "speculative_generate", "prefill", "decode_one_token",
           "speculative_step"]


@dataclass
class GenerationResult:
    sequences: torch.LongTensor      # (1, prompt + new)
    trace: Trace | JacobiTrace | None   # None for plain decoding; a JacobiTrace from jacobi_generate
    prompt_length: int
    elapsed_s: float                 # wall time of the whole call

    @property
    def new_tokens(self) -> list[int]:
        return self.sequences[0, self.prompt_length:].tolist()

    @property
    def ms_per_token(self) -> float:
        n = self.sequences.shape[1] - self.prompt_length
        return 1e3 * self.elapsed_s / n if n else float("nan")


def prefill(model, input_ids: torch.LongTensor, cache) -> torch.Tensor:
    """Read the prompt (1, T) into ``cache``; returns the logits (V,) at its last position."""
    return forward_tokens(model, input_ids, 0, cache, logits_to_keep=1)[-1]


def decode_one_token(model, token: int, position: int, cache) -> torch.Tensor:
    """One plain step: feed ``token`` at ``position``; returns the next-token logits (V,)."""
    return forward_tokens(model, [token], position, cache, logits_to_keep=1)[-1]


def _choose(logits: torch.Tensor, warp: Warp, generator) -> int:
    return sample(warp.probs(logits), generator) if warp.do_sample else int(logits.argmax())


@torch.inference_mode()
def autoregressive_generate(model, input_ids, max_new_tokens, *, sampling: Warp | None = None,
                            generator: torch.Generator | None = None, eos_token_id=None,
                            **options) -> GenerationResult | BatchResult:
    """One full forward per token, with a KV cache: the fair baseline. Stops at EOS (kept) or the budget.

    ``sampling``: a :class:`Warp` (default greedy); the older ``do_sample`` / ``temperature`` / ``top_k`` /
    ``top_p`` keywords still work (:func:`~labkit.core.request.resolve_sampling`). A batch (a list of prompts, a
    (B > 1, T) tensor, or a tensor with its ``attention_mask=``) decodes every row in one forward per step
    (:mod:`labkit.core.batch_decoding`, ``batch=``: a :class:`BatchConfig`) and returns a ``BatchResult``; one row
    of it takes the one-sequence path."""
    options = take_options("autoregressive_generate", options, ("attention_mask", "batch", *SAMPLING_KEYWORDS))
    attention_mask = options.pop("attention_mask", None)
    batch: BatchConfig | None = options.pop("batch", None)
    warp = resolve_sampling(sampling, **options)
    if is_batch(input_ids, attention_mask):
        prompts = batch_prompts(model, input_ids, attention_mask, max_new_tokens)
        if len(prompts) > 1:
            return batched_autoregressive(model, prompts, max_new_tokens, warp, eos_set(model, eos_token_id),
                                          generator, batch)
        return as_batch_result(autoregressive_generate(model, torch.tensor(prompts), max_new_tokens, sampling=warp,
                                                       generator=generator, eos_token_id=eos_token_id))
    input_ids = check_inputs(model, input_ids, max_new_tokens)
    eos = eos_set(model, eos_token_id)
    t0 = clock()
    prompt, new = input_ids[0].tolist(), []
    if max_new_tokens > 0:
        cache = new_cache(model)
        logits = prefill(model, input_ids, cache)
        while True:
            new.append(_choose(logits, warp, generator))
            if new[-1] in eos or len(new) == max_new_tokens:
                break
            logits = decode_one_token(model, new[-1], len(prompt) + len(new) - 1, cache)
    return GenerationResult(torch.tensor([prompt + new], device=input_ids.device), None, len(prompt),
                            clock() - t0)


def speculative_step(state: DecodingState, drafter: Drafter, policy: DraftPolicy, budget: int,
                     record: bool = True) -> StepRecord:
    """One draft -> verify -> accept step with at most ``budget`` drafted tokens; returns its record (with
    ``record``, the target's p of each drafted token too: read from the drafted rows only, never a full softmax).

    Phases timed for the record: drafting (less the drafter's choosing, ``draft.select_s``), verifying (the
    forward, the verdict, accepting, the policy's update) and the drafter's own bookkeeping (choosing before the
    draft, ``commit`` after it: a skip strategy's work)."""
    threshold = policy.threshold
    t0 = clock()
    draft = drafter.draft(state, budget, policy) if budget > 0 else Draft()
    t1 = clock()
    logits, hidden_states = (draft.forward or full_forward)(state, draft)
    verdict = verify(state, logits, draft, hidden_states=hidden_states)
    new, kind = accept(state, draft, verdict)
    t2 = clock()
    drafter.commit(state, draft, verdict)
    t3 = clock()
    if draft.source == "model":                          # copied drafts say nothing about the model's confidence
        policy.update(draft.depth, verdict.n_accepted)       # a tree: its deepest path, what a chain would be
    policy.observe_target(verdict.target_confidence)
    t4 = clock()
    rows = [parent + 1 for parent in draft.parents]          # the row of p each node's token was judged at
    p_drafted = verdict.p_of(rows, draft.tokens) if record else []
    return StepRecord(
        position=verdict.start, drafted=draft.tokens, q=draft.q, confidence=draft.confidence, p=p_drafted,
        n_accepted=verdict.n_accepted, next_token=verdict.next_token if kind != "none" else -1, next_kind=kind,
        threshold=threshold, draft_s=t1 - t0 - draft.select_s, verify_s=(t2 - t1) + (t4 - t3),
        policy_state=policy.state(), n_emitted=len(new), draft_source=draft.source,
        target_confidence=verdict.target_confidence, skip=draft.skip, select_s=draft.select_s + (t3 - t2),
        parents=draft.tree, path=verdict.path, levels=draft.levels, origins=draft.origins,
        width=draft.width)


#: What ``speculative_generate`` takes by name besides its own parameters (its ``**options``).
GENERATE_OPTIONS = ("eos_token_id", "record_trace", "attention_mask", "batch", "load", *DRAFT_KEYWORDS,
                    *SAMPLING_KEYWORDS)


@torch.inference_mode()
def speculative_generate(model, input_ids, *, draft=None, policy: DraftPolicy | None = None,
                         max_new_tokens: int = 64, sampling: Warp | None = None,
                         generator: torch.Generator | None = None, **options) -> GenerationResult | BatchResult:
    """Draft with ``draft``, verify with ``model``. Greedy output is token-identical to plain greedy decoding;
    sampled output is an exact sample of the (warped) target distribution.

    ``draft``: a :class:`~labkit.core.draft_config.DraftConfig`, a :class:`~labkit.core.skip.SkipSet`, a skip
    strategy (:func:`labkit.skip_strategy`: it chooses the set before every draft and keeps what it learned across
    calls), any :class:`~labkit.core.drafters.Drafter`, or a name core resolves (:mod:`labkit.core.request`).
    ``policy`` (default: the config's stop rule, else a fresh :class:`AdaptiveThreshold`) decides when drafting
    stops and keeps its state across calls. ``sampling``: a :class:`Warp` (default greedy), drawn with
    ``generator``.

    ``options``, by name: ``eos_token_id``; ``record_trace`` (default True); a self-draft's modifiers ``lookup``
    (> 0: first a prompt-lookup draft of up to that many copied tokens, a point-mass q), ``draft_weights``
    ("int8": cheaper drafts, the same output, :mod:`labkit.core.draft_weights`), ``draft_head`` (a
    :class:`~labkit.core.draft_head.DraftHead` fitted for the skip set) and ``tree`` (:func:`labkit.draft_tree`:
    a tree of continuations verified in one forward); the older draft keywords ``skip``, ``drafter``,
    ``draft_model`` and sampling keywords ``do_sample``, ``temperature``, ``top_k``, ``top_p``, converted by
    :func:`~labkit.core.request.resolve_drafter` and :func:`~labkit.core.request.resolve_sampling`. Unknown names
    are a TypeError.

    A batch (a list of prompts, a (B > 1, T) tensor, or a tensor with its ``attention_mask``) is decoded in one
    forward per draft position and one verify per step, each row with its own draft length and verdict
    (:mod:`labkit.core.batch_decoding`; ``batch``: how ragged acceptance is handled, ``load``: a γ cap by batch
    size) and returns a ``BatchResult``; one row of it takes the one-sequence path.
    """
    options = take_options("speculative_generate", options, GENERATE_OPTIONS)
    eos_token_id, record_trace = options.pop("eos_token_id", None), options.pop("record_trace", True)
    attention_mask, batch, load = (options.pop(k, None) for k in ("attention_mask", "batch", "load"))
    prompts = batch_prompts(model, input_ids, attention_mask, max_new_tokens) \
        if is_batch(input_ids, attention_mask) else None
    if prompts is not None and len(prompts) == 1:
        input_ids = torch.tensor(prompts)
    input_ids = check_inputs(model, input_ids, max_new_tokens) if prompts is None or len(prompts) == 1 else None
    drafter, policy = resolve_drafter(model, draft, policy, **{k: v for k, v in options.items() if k in DRAFT_KEYWORDS})
    warp = resolve_sampling(sampling, **{k: v for k, v in options.items() if k in SAMPLING_KEYWORDS})
    eos = eos_set(model, eos_token_id)
    if prompts is not None and len(prompts) > 1:
        return batched_speculative(model, prompts, drafter, policy, max_new_tokens, warp, eos, generator, batch, load)
    state = DecodingState(model, new_cache(model), input_ids[0].tolist(), input_ids.shape[1], warp, eos, generator)
    result = _decode_one(state, input_ids, drafter, policy, max_new_tokens, record_trace)
    return as_batch_result(result) if prompts is not None else result


def _decode_one(state: DecodingState, input_ids: torch.Tensor, drafter: Drafter, policy: DraftPolicy,
                max_new_tokens: int, record_trace: bool) -> GenerationResult:
    """The one-sequence loop: prefill, then steps until EOS or the budget."""
    policy.begin()
    trace = Trace(prompt_length=state.prompt_length, sampling=state.warp.do_sample)
    t_start = clock()
    if state.prompt_length > 1 and max_new_tokens > 0:                   # everything but the pending token
        keep = 0 if drafter.reads_prompt_logits else 1                   # a drafter may learn from every row
        logits = forward_tokens(state.model, input_ids[:, :-1], 0, state.cache, logits_to_keep=keep)
        drafter.prepare(state, input_ids[:, :-1])
        if drafter.reads_prompt_logits:
            drafter.read_prompt_logits(state, logits)
    trace.prefill_s = clock() - t_start
    while state.n_emitted < max_new_tokens:
        budget = min(policy.max_draft, max_new_tokens - state.n_emitted - 1)
        step = speculative_step(state, drafter, policy, budget, record=record_trace)
        if record_trace:
            trace.steps.append(step)
        if state.tokens[-1] in state.eos:
            break
    trace.total_s = clock() - t_start
    return GenerationResult(torch.tensor([state.tokens], device=input_ids.device), trace if record_trace else None,
                            state.prompt_length, trace.total_s)


def as_batch_result(result: GenerationResult) -> BatchResult:
    """A batch of one, decoded by the one-sequence path, in a batch's result."""
    trace = result.trace if isinstance(result.trace, Trace) else None
    return BatchResult([result.sequences.cpu()], [result.prompt_length], result.elapsed_s,
                       drafted=[sum(len(s.drafted) for s in trace.steps)] if trace else [0],
                       accepted=[sum(s.n_accepted for s in trace.steps)] if trace else [0],
                       steps=[len(trace.steps)] if trace else [0])
