"""Greedy decoding as a fixed-point problem, solved by Jacobi iteration (Santilli et al. 2023, ACL).

Greedy decoding of m tokens solves m equations at once: y_i = F_i(y) = argmax p(· | x, y_<i) for i = 1..m
(x the prompt, p the target, the full model). Plain decoding solves them by substitution, one forward per
token. Jacobi iteration guesses a whole *block* of future tokens and applies F to all of it in one forward
(a causal model scores every position of its input in one pass):

    y^(k+1) = F(y^(k))          one forward over [pending token, y^(k)_1 .. y^(k)_{w-1}] gives y^(k+1)_1..w

Causality gives convergence, and the exact test this module uses. F_1 depends on nothing unknown, so the
first slot is exact after one iteration; if the guess agrees with F on slots 1..n, slots 1..n+1 are exact.
So every iteration *fixes* the matched prefix plus one slot: at least one token per iteration, never more
iterations than tokens, and the output is plain greedy decoding token for token. That test is greedy
speculative verification with the previous iterate as the draft (:func:`labkit.core.verify.verify_greedy`);
the paper's own stopping test (the block did not change, y^(k+1) = y^(k)) is the case "all slots matched",
which this test sees one iteration earlier when only the block's last slot still moves.

Methods (Santilli et al.'s names in brackets):

- ``"jacobi"`` [Parallel Jacobi]: one window of ``block_size`` slots, all updated every iteration; the proven
  prefix is committed at once and the window slides on, its new slots starting from the initial guess. With
  ``block_size >= max_new_tokens`` the window is the whole output: the paper's PJ.
- ``"gauss-seidel"`` [(Hybrid) GS-Jacobi]: the output is cut into blocks of ``block_size`` slots solved one
  after another (Gauss-Seidel *over blocks*: block j + 1 starts once block j is exact) with Jacobi iterations
  inside each block. Like the paper's hybrid variant it needs no known output length: it stops at EOS or at
  ``max_new_tokens``. A Gauss-Seidel sweep over single *tokens* (slot i updated from the already updated
  slots before it) is plain greedy decoding, one forward per token: ``block_size=1`` is exactly that.

Initial guesses for new slots (``init``): ``"pad"`` (the pad token, the paper's choice), ``"repeat"`` (the
token before the slot, repeated), and, beyond the paper, ``"self-draft"``: the greedy continuation of the
current iterate by the model with the blocks in ``skip`` removed (Draft & Verify's draft), so a good guess
can show whether it converges in fewer iterations. Greedy only. Imports torch and transformers only.
"""
from __future__ import annotations

import torch

from .cache import crop_to, new_cache
from .checks import check_choice, check_int
from .decoding import GenerationResult, prefill
from .devices import clock
from .drafters import SelfDrafter
from .forward import check_inputs, eos_set, forward_tokens
from .jacobi_trace import JacobiIteration, JacobiTrace
from .skip import SkipSet, skipping

__all__ = ["METHODS", "INITS", "JacobiIteration", "JacobiTrace", "jacobi_generate", "fixed_prefix"]

METHODS = ("jacobi", "gauss-seidel")
INITS = ("pad", "repeat", "self-draft")


def fixed_prefix(guess: list[int], output: list[int]) -> int:
    """How many leading slots ``output`` = F(``guess``) has proven exact: the matched prefix + 1 (at least 1)."""
    n = 0
    while n < len(guess) - 1 and guess[n] == output[n]:
        n += 1
    return min(n + 1, len(output))


def _check_args(model, block_size, method, init, skip, pad_token_id) -> int:
    check_int("block_size", block_size, 1)
    check_choice("method", method, METHODS)
    check_choice("init", init, INITS)
    if init == "self-draft" and skip is None:
        raise ValueError("init='self-draft' drafts with the model minus the blocks in skip: give skip= (a SkipSet)")
    if init != "self-draft" and skip is not None:
        raise ValueError(f"skip is used only by init='self-draft' (init is {init!r})")
    if pad_token_id is None:
        pad_token_id = next((t for t in (getattr(model.generation_config, "pad_token_id", None),
                                         getattr(model.config, "pad_token_id", None)) if isinstance(t, int)), 0)
    return check_int("pad_token_id", pad_token_id, 0, model.config.vocab_size - 1)     # a token of the vocabulary


def _self_draft(model, skip: SkipSet, cache, tokens: list[int], block: list[int], n: int) -> list[int]:
    """The skipped model's greedy continuation (n tokens) of committed ``tokens`` + the current iterate ``block``.
    Uses the target's cache for the committed prefix and leaves it as it found it."""
    out, feed, start = [], [tokens[-1]] + block, len(tokens) - 1
    with skipping(model, skip):
        while len(out) < n:
            logits = forward_tokens(model, feed, start, cache, logits_to_keep=1)[-1]      # (V,)
            start += len(feed)
            out.append(int(logits.argmax()))
            feed = [out[-1]]
    crop_to(cache, len(tokens) - 1)
    return out


def _initial_guess(init: str, n: int, tokens: list[int], block: list[int], pad_token_id: int, model, skip, cache
                   ) -> list[int]:
    """Guesses for the ``n`` slots that enter the block after the current iterate ``block``."""
    if n <= 0:
        return []
    if init == "pad":
        return [pad_token_id] * n
    if init == "repeat":
        return [block[-1] if block else tokens[-1]] * n
    return _self_draft(model, skip, cache, tokens, block, n)


def _apply_f(model, cache, tokens: list[int], block: list[int],
             eos: frozenset[int]) -> tuple[list[int], int, list[int]]:
    """One Jacobi iteration: F of the whole block in one forward; commits the proven prefix to ``tokens``
    (through the first EOS) and keeps the cache on it. Returns (output, n_fixed, committed tokens)."""
    logits = forward_tokens(model, [tokens[-1]] + block[:-1], len(tokens) - 1, cache)     # (w, V)
    output = logits.argmax(dim=-1).tolist()                                                # (w,)
    n_fixed = fixed_prefix(block, output)
    new = output[:n_fixed]
    for i, token in enumerate(new):
        if token in eos:
            new = new[: i + 1]
            break
    tokens.extend(new)
    crop_to(cache, len(tokens) - 1)            # exact inputs only: the pending token and the matched guesses
    return output, n_fixed, new


@torch.inference_mode()
def jacobi_generate(model, input_ids, max_new_tokens: int, *, block_size: int = 4, method: str = "jacobi",
                    init: str = "pad", skip: SkipSet | None = None, eos_token_id=None,
                    pad_token_id: int | None = None) -> GenerationResult:
    """Greedy decoding by fixed-point iteration over blocks of ``block_size`` future tokens (see the module
    docstring for ``method`` and ``init``). Token-identical to plain greedy decoding; never more iterations
    than tokens. ``skip``: the blocks the self-draft skips (``init="self-draft"`` only). ``pad_token_id``
    (``init="pad"``): default the model's pad token, else 0. The result's ``trace`` is a :class:`JacobiTrace`.
    ``block_size`` 4 by default: larger blocks fixed no more tokens per forward on the lab's model and cost more
    per forward (docs/decisions.md)."""
    input_ids = check_inputs(model, input_ids, max_new_tokens)
    pad_token_id = _check_args(model, block_size, method, init, skip, pad_token_id)
    if skip is not None:
        SelfDrafter(model, skip)                        # the same checks as a self-draft (type, layers, masks)
    eos = eos_set(model, eos_token_id)
    tokens = input_ids[0].tolist()
    trace = JacobiTrace(len(tokens), method, init, block_size)
    t_start = clock()
    cache = new_cache(model)
    if len(tokens) > 1 and max_new_tokens > 0:                   # everything but the pending token
        prefill(model, input_ids[:, :-1], cache)
    trace.prefill_s = clock() - t_start
    block, n_block = [], 0                                        # the current iterate of the unfixed slots
    while (emitted := len(tokens) - trace.prompt_length) < max_new_tokens:
        if method == "gauss-seidel" and block:                    # keep solving the current block
            width = len(block)
        else:                                                     # a new block (gs) or the sliding window
            width = min(block_size, max_new_tokens - emitted)
            n_block += method == "gauss-seidel" and bool(trace.iterations)
        block = block[:width]
        t0 = clock()
        n_init = width - len(block)
        block = block + _initial_guess(init, n_init, tokens, block, pad_token_id, model, skip, cache)
        t1 = clock()
        position = len(tokens)
        output, n_fixed, new = _apply_f(model, cache, tokens, block, eos)
        trace.iterations.append(JacobiIteration(position, block, output, n_fixed, len(new), n_init, n_block,
                                                clock() - t1, t1 - t0))
        if new[-1] in eos:
            break
        block = output[n_fixed:]
    trace.total_s = clock() - t_start
    return GenerationResult(torch.tensor([tokens]), trace, trace.prompt_length, trace.total_s)
