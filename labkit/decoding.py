"""Plain and self-speculative decoding as small free functions (batch size 1).

Notation, used throughout labkit:

- ``p``: the target distribution (the full model), ``q``: the draft distribution (the
  model with some blocks skipped, or a separate small draft model), both after the same
  :class:`~labkit.sampling.Warp`;
- a step drafts ``k`` tokens d_1..d_k, verifies them with one forward of the full model,
  accepts ``n`` of them and appends one token of its own: a *replacement* for d_{n+1} or,
  when all k were accepted, a *bonus* token. Each step emits n + 1 tokens.

Cache invariant between steps: the KV cache holds every emitted token but the last, which
is *pending* (its keys/values are computed by the next forward). Drafting feeds the pending
token and then each drafted token; verification first cuts every cache layer back to the
verified length (skipped attention layers appended nothing, so layers differ), then feeds
[pending, d_1..d_k] in one pass, and afterwards cuts the cache back to the accepted prefix.
Positions are always passed explicitly, so a skipped layer 0 cannot shift them.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch

from .cache import crop_to, new_cache
from .models import check_supported
from .policies import AdaptiveThreshold, DraftPolicy
from .sampling import Warp, residual_distribution, sample
from .skip import SkipSet, skipping
from .trace import StepRecord, Trace

__all__ = ["GenerationResult", "autoregressive_generate", "speculative_generate", "forward_tokens", "ngram_lookup"]


@dataclass
class GenerationResult:
    sequences: torch.LongTensor      # (1, prompt + new)
    trace: Trace | None              # None for plain decoding
    prompt_length: int
    elapsed_s: float                 # wall time of the whole call

    @property
    def new_tokens(self) -> list[int]:
        return self.sequences[0, self.prompt_length:].tolist()

    @property
    def ms_per_token(self) -> float:
        n = self.sequences.shape[1] - self.prompt_length
        return 1e3 * self.elapsed_s / n if n else float("nan")


# ---------------------------------------------------------------------------------------
# shared pieces
# ---------------------------------------------------------------------------------------
def _context_length(model) -> int | None:
    return getattr(model.config, "max_position_embeddings", None)


def _check_inputs(model, input_ids, max_new_tokens) -> torch.LongTensor:
    check_supported(model)
    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"input_ids must be a torch.LongTensor, got {type(input_ids).__name__}")
    if input_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"input_ids must hold integer token ids, got dtype {input_ids.dtype}")
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (1, T), got {tuple(input_ids.shape)}")
    if input_ids.shape[0] != 1:
        raise ValueError(f"input_ids has batch size {input_ids.shape[0]}; labkit decodes batch size 1 only")
    if input_ids.shape[1] == 0:
        raise ValueError("input_ids is empty: the prompt needs at least one token")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise TypeError(f"max_new_tokens must be an integer, got {max_new_tokens!r}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    vocab = model.config.vocab_size
    if int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab:
        raise ValueError(f"input_ids holds token ids outside the vocabulary [0, {vocab})")
    limit = _context_length(model)
    if limit is not None and input_ids.shape[1] + max_new_tokens > limit:
        raise ValueError(
            f"prompt ({input_ids.shape[1]} tokens) + max_new_tokens ({max_new_tokens}) exceeds the model's "
            f"context of {limit} positions"
        )
    return input_ids.long()


def _eos_set(model, eos_token_id) -> frozenset[int]:
    if eos_token_id is None:
        eos_token_id = getattr(model.generation_config, "eos_token_id", None)
    if eos_token_id is None:
        return frozenset()
    if isinstance(eos_token_id, int):
        return frozenset([eos_token_id])
    return frozenset(int(e) for e in eos_token_id)


def forward_tokens(model, token_ids: list[int] | torch.Tensor, start: int, cache, logits_to_keep: int = 0) -> torch.Tensor:
    """Feed tokens at positions start.. into the model with the cache; (T or logits_to_keep, V) logits."""
    ids = token_ids if isinstance(token_ids, torch.Tensor) else torch.tensor([token_ids])
    if ids.dim() == 1:
        ids = ids[None]
    positions = torch.arange(start, start + ids.shape[1])[None]              # (1, T)
    extra = {}
    layer_types = getattr(model.config, "layer_types", None)
    if ids.shape[1] == 1 and layer_types:
        # One query token attends to everything cached, in every layer: no mask. Passing the
        # mapping skips mask building, which would size the mask from one cache layer while
        # drafting has left layers at different lengths.
        extra["attention_mask"] = dict.fromkeys(set(layer_types))
    out = model(input_ids=ids, position_ids=positions, past_key_values=cache, use_cache=True,
                logits_to_keep=logits_to_keep, **extra)
    return out.logits[0]                                                     # (T', V)


def _choose(logits: torch.Tensor, warp: Warp, generator) -> int:
    if not warp.do_sample:
        return int(logits.argmax())
    return sample(warp.probs(logits), generator)


# ---------------------------------------------------------------------------------------
# plain decoding: the fair baseline
# ---------------------------------------------------------------------------------------
@torch.inference_mode()
def autoregressive_generate(model, input_ids, max_new_tokens, do_sample=False, temperature=1.0, top_k=None,
                            top_p=None, generator=None, *, eos_token_id=None) -> GenerationResult:
    """One full forward per token, with a KV cache. Stops at EOS (kept) or after max_new_tokens."""
    input_ids = _check_inputs(model, input_ids, max_new_tokens)
    warp = Warp(do_sample, temperature, top_k, top_p)
    eos = _eos_set(model, eos_token_id)
    t0 = time.perf_counter()
    prompt = input_ids[0].tolist()
    new: list[int] = []
    if max_new_tokens > 0:
        cache = new_cache(model)
        logits = forward_tokens(model, input_ids, 0, cache, logits_to_keep=1)[-1]
        while True:
            token = _choose(logits, warp, generator)
            new.append(token)
            if token in eos or len(new) == max_new_tokens:
                break
            logits = forward_tokens(model, [token], len(prompt) + len(new) - 1, cache, logits_to_keep=1)[-1]
    sequences = torch.tensor([prompt + new])
    return GenerationResult(sequences, None, len(prompt), time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------
# speculative decoding
# ---------------------------------------------------------------------------------------
def _check_draft_model(model, draft_model) -> None:
    check_supported(draft_model)
    if draft_model.config.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"draft_model has a vocabulary of {draft_model.config.vocab_size} tokens, the model "
            f"{model.config.vocab_size}: the draft must share the model's tokenizer"
        )


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


def _check_mask_free_drafting(model, skip: SkipSet) -> None:
    """Single-token drafting needs no mask; models without per-layer-type masks get none only under sdpa."""
    if getattr(model.config, "layer_types", None) or not skip.attention:
        return
    implementation = getattr(model.config, "_attn_implementation", "sdpa")
    if implementation != "sdpa":
        raise ValueError(
            f"skipping attention blocks of a {type(model).__name__} needs attn_implementation='sdpa' "
            f"(the model uses {implementation!r}); load it with labkit.load_model or pass attn_implementation='sdpa'"
        )


def _verify_greedy(logits, drafted):
    """Accept the longest prefix of the draft that matches the target's argmax."""
    target = logits.argmax(dim=-1).tolist()                                   # (k+1,)
    n = 0
    while n < len(drafted) and drafted[n] == target[n]:
        n += 1
    return n, target[n]


def _verify_sampling(p, q_dists, drafted, generator):
    """Speculative sampling: accept d_i with prob min(1, p/q); else draw from normalise(max(0, p - q))."""
    for i, d in enumerate(drafted):
        p_d, q_d = float(p[i, d]), float(q_dists[i][d])
        if float(torch.rand((), generator=generator)) * q_d < p_d:           # r < p/q, safe when q_d > 0
            continue
        return i, sample(residual_distribution(p[i], q_dists[i]), generator)
    return len(drafted), sample(p[len(drafted)], generator)


@torch.inference_mode()
def speculative_generate(model, input_ids, *, skip: SkipSet | None = None, draft_model=None,
                         policy: DraftPolicy | None = None, max_new_tokens: int = 64, do_sample: bool = False,
                         temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                         generator: torch.Generator | None = None, eos_token_id=None,
                         lookup: int = 0, record_trace: bool = True) -> GenerationResult:
    """Draft with ``model`` minus the blocks in ``skip`` (or with ``draft_model``), verify with ``model``.

    Greedy output is token-identical to plain greedy decoding; sampled output is an exact
    sample of the (warped) target distribution. ``policy`` (default: a fresh
    :class:`AdaptiveThreshold`) decides when drafting stops and keeps its state across calls.
    ``lookup`` > 0 first tries a prompt-lookup draft of up to that many tokens copied from the
    context (:func:`ngram_lookup`, a point-mass q); the model drafts only when nothing matches.
    """
    input_ids = _check_inputs(model, input_ids, max_new_tokens)
    if skip is not None and draft_model is not None:
        raise ValueError("give either skip (self-drafting) or draft_model, not both")
    if skip is not None and not isinstance(skip, SkipSet):
        raise TypeError(f"skip must be a labkit.SkipSet, got {type(skip).__name__}")
    if draft_model is not None:
        _check_draft_model(model, draft_model)
    else:
        skip = (skip or SkipSet()).validate(model.config.num_hidden_layers)
        _check_mask_free_drafting(model, skip)
    if policy is None:
        policy = AdaptiveThreshold()
    if isinstance(lookup, bool) or not isinstance(lookup, int) or lookup < 0:
        raise ValueError(f"lookup must be an integer >= 0, got {lookup!r}")
    if not isinstance(policy, DraftPolicy):
        raise TypeError(f"policy must be a labkit draft policy (FixedK, StaticThreshold, AdaptiveThreshold), got {policy!r}")
    warp = Warp(do_sample, temperature, top_k, top_p)
    eos = _eos_set(model, eos_token_id)

    t_start = time.perf_counter()
    tokens = input_ids[0].tolist()
    prompt_length = len(tokens)
    trace = Trace(prompt_length=prompt_length, sampling=do_sample)
    cache = new_cache(model)
    drafter = draft_model if draft_model is not None else model
    draft_cache = new_cache(draft_model) if draft_model is not None else cache
    if prompt_length > 1 and max_new_tokens > 0:                          # everything but the pending token
        forward_tokens(model, input_ids[:, :-1], 0, cache, logits_to_keep=1)
        if draft_model is not None:
            forward_tokens(draft_model, input_ids[:, :-1], 0, draft_cache, logits_to_keep=1)
    draft_cached = prompt_length - 1                                        # tokens in the drafter's cache
    trace.prefill_s = time.perf_counter() - t_start
    skip_context = (lambda: contextlib.nullcontext()) if draft_model is not None else (lambda: skipping(model, skip))

    emitted = 0
    while emitted < max_new_tokens:
        position = len(tokens)                                              # pending token sits at position - 1
        max_k = min(policy.max_draft, max_new_tokens - emitted - 1)
        threshold = policy.threshold

        # -- draft ------------------------------------------------------------------------
        t0 = time.perf_counter()
        drafted, q_drafted, confidences, q_dists = [], [], [], []
        source = "model"
        if lookup and max_k > 0:
            drafted = ngram_lookup(tokens, min(lookup, max_k))
            for d in drafted:
                if d in eos:                                              # stop a copied draft at EOS too
                    drafted = drafted[: drafted.index(d) + 1]
                    break
        if drafted:
            source = "lookup"
            q_drafted, confidences = [1.0] * len(drafted), [1.0] * len(drafted)
            if do_sample:
                q_dists = [torch.nn.functional.one_hot(torch.tensor(d), model.config.vocab_size).float() for d in drafted]
        elif max_k > 0:
            with skip_context():
                feed = tokens[draft_cached:]
                while True:
                    logits = forward_tokens(drafter, feed, draft_cached, draft_cache, logits_to_keep=1)[-1]
                    draft_cached += len(feed)
                    q = warp.probs(logits)                                  # (V,)
                    d = sample(q, generator) if do_sample else int(logits.argmax())
                    confidence = float(q.max())
                    drafted.append(d)
                    q_drafted.append(float(q[d]))
                    confidences.append(confidence)
                    q_dists.append(q)
                    if d in eos or len(drafted) >= max_k or not policy.keep_drafting(len(drafted), confidence):
                        break
                    feed = [d]
        t1 = time.perf_counter()

        # -- verify -----------------------------------------------------------------------
        crop_to(cache, position - 1)
        logits = forward_tokens(model, [tokens[-1]] + drafted, position - 1, cache)   # (k+1, V)
        if do_sample:
            p = warp.probs(logits)                                          # (k+1, V)
            n_accepted, next_token = _verify_sampling(p, q_dists, drafted, generator)
        else:
            n_accepted, next_token = _verify_greedy(logits, drafted)
            p = torch.softmax(logits.float(), dim=-1) if record_trace else None
        new = drafted[:n_accepted]
        if new and new[-1] in eos:                                          # the draft ended on an accepted EOS
            next_kind = "none"
        else:
            new.append(next_token)
            next_kind = "bonus" if n_accepted == len(drafted) else "replacement"
        tokens.extend(new)
        crop_to(cache, len(tokens) - 1)
        if draft_model is not None:
            draft_cached = min(draft_cached, position + n_accepted)
            crop_to(draft_cache, draft_cached)
        else:
            draft_cached = len(tokens) - 1
        if source == "model":
            policy.update(len(drafted), n_accepted)
        t2 = time.perf_counter()

        emitted += len(new)
        if record_trace:
            trace.steps.append(StepRecord(
                position=position, drafted=drafted, q=q_drafted, confidence=confidences,
                p=p[torch.arange(len(drafted)), drafted].tolist() if drafted else [],
                n_accepted=n_accepted, next_token=next_token if next_kind != "none" else -1, next_kind=next_kind,
                threshold=threshold, draft_s=t1 - t0, verify_s=t2 - t1, policy_state=policy.state(),
                n_emitted=len(new), draft_source=source,
            ))
        if new[-1] in eos:
            break

    trace.total_s = time.perf_counter() - t_start
    return GenerationResult(torch.tensor([tokens]), trace if record_trace else None, prompt_length, trace.total_s)
