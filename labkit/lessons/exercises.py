"""Exercises that check themselves: predict (or write) first, then run the check.

Each ``check_*`` prints one verdict line, ``correct: ...`` or ``not yet: <why>``, and returns True / False.
A placeholder answer (``None``, or a function that still returns ``None``) gets "not yet" with what to do.
The notebooks' exercise cells hold a parameter-free placeholder; under papermill ``SOLUTIONS = True`` puts
:mod:`labkit.lessons.solutions` in its place (the tests check both verdicts). Instructors: docs/solutions.md.
"""
from __future__ import annotations

import math
import traceback

import numpy as np
import torch

from ..core.decoding import autoregressive_generate
from ..core.skip import SkipSet, skipping
from ..core.verify import verify_greedy
from ..measure.costs.analytic import expected_tokens_per_step
from ..measure.grid.results import PlaygroundGrid, Setting
from ..search.toy import expected_improvement
from .playground_claims import peak_ratios

__all__ = ["verdict", "check_expected_improvement", "f_of_mask", "check_f_prediction", "greedy_speculative_loop",
           "check_greedy_verification", "check_peak_prediction", "break_even_alpha", "check_break_even"]


def verdict(ok: bool, message: str) -> bool:
    """Print 'correct: message' or 'not yet: message'; return ``ok``."""
    print(f"{'correct' if ok else 'not yet'}: {message}")
    return ok


def _call(fn, *args):
    """(result, None) or (None, 'why it failed') for a student's function."""
    try:
        return fn(*args), None
    except Exception as err:   # the verdict names the error; the student's traceback is printed too
        traceback.print_exc(limit=2)
        return None, f"your function raised {type(err).__name__}: {err}"


# -- 01: expected improvement ----------------------------------------------------------------------------
def _ei_cases(seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        mu, sigma = rng.normal(0, 2, 50), rng.uniform(0, 1.5, 50)
        sigma[::7] = 0.0                                   # certain points: EI = max(I, 0)
        yield mu, sigma, float(rng.normal(0, 1)), float(rng.choice([0.0, 0.01, 0.1]))


def check_expected_improvement(fn) -> bool:
    """``fn(mu, sigma, best, xi)`` must equal the lab's EI (minimisation) on random arrays, σ = 0 included."""
    if fn is None:
        return verdict(False, "no function yet: define my_expected_improvement(mu, sigma, best, xi)")
    for mu, sigma, best, xi in _ei_cases():
        got, error = _call(fn, mu, sigma, best, xi)
        if error:
            return verdict(False, error)
        if got is None:
            return verdict(False, "your function returns None: compute I = best - mu - xi, z = I / sigma, ...")
        want = expected_improvement(mu, sigma, best, xi)
        got = np.asarray(got, dtype=float)
        if got.shape != want.shape:
            return verdict(False, f"shape {got.shape}, expected {want.shape} (one EI per candidate point)")
        bad = ~np.isclose(got, want, rtol=1e-6, atol=1e-9)
        if bad.any():
            i = int(np.argmax(bad))
            hint = " (σ = 0 there: EI = max(I, 0))" if sigma[i] == 0 else ""
            return verdict(False, f"at mu={mu[i]:.3f}, sigma={sigma[i]:.3f}, best={best:.3f}, xi={xi}: got "
                                  f"{got[i]:.6f}, expected {want[i]:.6f}{hint}")
    return verdict(True, "your EI matches labkit.search.toy.expected_improvement on 1000 points, σ = 0 included")


# -- 02: predict f for a mask ------------------------------------------------------------------------------
def f_of_mask(alpha: float, gamma: int, draft_ms: float, verify_ms: float) -> float:
    """The modelled objective for one mask: f = (γ·draft ms + verify ms) / E(α, γ), in ms per token."""
    return (gamma * draft_ms + verify_ms) / expected_tokens_per_step(alpha, gamma)


def check_f_prediction(predicted_ms, alpha: float, gamma: int, draft_ms: float, verify_ms: float,
                       rel_tol: float = 0.02) -> bool:
    """The student's f (ms per token) against :func:`f_of_mask` of the same α, γ and costs."""
    truth = f_of_mask(alpha, gamma, draft_ms, verify_ms)
    if predicted_ms is None:
        return verdict(False, "no prediction yet: set my_f_ms to your number (ms per token)")
    if not isinstance(predicted_ms, (int, float)) or math.isnan(predicted_ms):
        return verdict(False, f"my_f_ms must be a number, got {predicted_ms!r}")
    err = abs(predicted_ms - truth) / truth
    if err <= rel_tol:
        return verdict(True, f"f = ({gamma} x {draft_ms:.2f} + {verify_ms:.2f}) / E({alpha:.3f}, {gamma}) = "
                             f"{truth:.2f} ms/token (yours: {predicted_ms:.2f})")
    e = expected_tokens_per_step(alpha, gamma)
    why = (" (did you divide by γ + 1 instead of E(α, γ)?)"
           if abs(predicted_ms - (gamma * draft_ms + verify_ms) / (gamma + 1)) / truth <= rel_tol else "")
    return verdict(False, f"{predicted_ms:.2f} ms/token is {100 * err:.0f} % off{why}; E(α, γ) here is {e:.3f} "
                          f"tokens per step")


# -- 03: greedy verification -------------------------------------------------------------------------------
@torch.inference_mode()
def greedy_speculative_loop(verify_fn, model, input_ids, skip: SkipSet, max_new_tokens: int,
                            gamma: int = 4) -> list[int]:
    """The whole algorithm in a dozen lines, without a KV cache (every forward reads the whole sequence): draft
    γ tokens greedily with ``skip``, score [pending, d_1..d_γ] with one full forward, and let
    ``verify_fn(logits (γ+1, V), drafted) -> (n_accepted, next_token)`` decide; returns the new tokens."""
    tokens, start = input_ids[0].tolist(), input_ids.shape[1]
    while len(tokens) - start < max_new_tokens:
        drafted = []
        with skipping(model, skip):
            for _ in range(gamma):
                drafted.append(int(model(torch.tensor([tokens + drafted], device=model.device)).logits[0, -1].argmax()))
        logits = model(torch.tensor([tokens + drafted], device=model.device)).logits[0, len(tokens) - 1:]   # (γ+1, V)
        n, next_token = verify_fn(logits, drafted)
        tokens += drafted[:n] + [int(next_token)]
    return tokens[start:start + max_new_tokens]


def _random_verify_cases(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    for gamma in (0, 1, 3, 5):
        for _ in range(10):
            logits = torch.randn(gamma + 1, 7, generator=g)
            target = logits.argmax(-1).tolist()
            cut = int(torch.randint(0, gamma + 1, (), generator=g))          # agree on the first `cut` tokens
            drafted = target[:cut] + [(t + 1) % 7 for t in target[cut:gamma]]
            yield logits, drafted


def check_greedy_verification(fn, model=None, input_ids=None, skip: SkipSet | None = None,
                              max_new_tokens: int = 24) -> bool:
    """``fn(logits, drafted) -> (n_accepted, next_token)`` against :func:`labkit.core.verify.verify_greedy` on
    random cases, then (with a model) the output of :func:`greedy_speculative_loop` around it against plain
    greedy decoding: it must be identical."""
    if fn is None:
        return verdict(False, "no function yet: define my_verify_greedy(logits, drafted)")
    for logits, drafted in _random_verify_cases():
        got, error = _call(fn, logits, drafted)
        if error:
            return verdict(False, error)
        want = verify_greedy(logits, drafted)
        if got is None:
            return verdict(False, "your function returns None: return (n_accepted, next_token)")
        if tuple(int(v) for v in got) != want:
            return verdict(False, f"drafted {drafted}, target argmax {logits.argmax(-1).tolist()}: got {tuple(got)}, "
                                  f"expected {want} (accept the longest agreeing prefix, then the target's token)")
    if model is None:
        return verdict(True, "your verification matches verify_greedy on 40 random drafts")
    ours, error = _call(greedy_speculative_loop, fn, model, input_ids, skip or SkipSet(), max_new_tokens)
    if error:
        return verdict(False, error)
    plain = autoregressive_generate(model, input_ids, max_new_tokens, eos_token_id=[]).new_tokens
    if ours != plain:
        first = next(i for i, (a, b) in enumerate(zip(ours, plain)) if a != b)
        return verdict(False, f"the speculative loop's output differs from plain greedy decoding at new token {first}")
    return verdict(True, f"your verification matches verify_greedy on 40 random drafts, and the speculative loop "
                         f"around it reproduces plain greedy decoding token for token ({len(plain)} tokens)")


# -- 04: predict the peak skip ratio ----------------------------------------------------------------------
def check_peak_prediction(predicted_ratio, grid: PlaygroundGrid, setting: Setting) -> bool:
    """Correct when the grid ratio nearest to the prediction is one the noise cannot tell from the peak."""
    if predicted_ratio is None:
        return verdict(False, "no prediction yet: set my_peak_ratio to a skip ratio between 0 and 1")
    if not isinstance(predicted_ratio, (int, float)) or not 0.0 <= predicted_ratio <= 1.0:
        return verdict(False, f"my_peak_ratio must be a number in [0, 1], got {predicted_ratio!r}")
    nearest = min(grid.ratios, key=lambda r: abs(r - predicted_ratio))
    candidates = peak_ratios(grid, setting)
    shown = ", ".join(f"{r:.3f}" for r in candidates)
    if nearest in candidates:
        return verdict(True, f"{predicted_ratio:g} -> grid ratio {nearest:.3f}; "
                             f"within the noise the peak is at {shown}")
    side = "below" if nearest < min(candidates) else "above"
    return verdict(False, f"{predicted_ratio:g} -> grid ratio {nearest:.3f}, {side} the peak; look at where the "
                          f"falling c stops paying for the falling accepted / drafted")


# -- 04: break-even acceptance ---------------------------------------------------------------------------
def break_even_alpha(c: float, c_v: float, gamma: int) -> float:
    """The α at which a draft of γ tokens costing c each, verified at c_v, is as fast as the plain loop:
    E(α, γ) / (γ·c + c_v) = 1, solved by bisection (E rises from 1 at α = 0 to γ + 1 at α = 1). NaN when no
    α pays (γ·c + c_v ≥ γ + 1: even a perfect draft loses); 0 when every α does (γ·c + c_v ≤ 1)."""
    cost = gamma * c + c_v
    if cost >= gamma + 1:
        return float("nan")
    if cost <= 1:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens_per_step(mid, gamma) < cost else (lo, mid)
    return (lo + hi) / 2


def check_break_even(predicted_alpha, c: float, c_v: float, gamma: int, tol: float = 0.01) -> bool:
    """The student's break-even α against :func:`break_even_alpha` of the same c, c_v and γ (within ``tol``)."""
    truth = break_even_alpha(c, c_v, gamma)
    if predicted_alpha is None:
        return verdict(False, "no answer yet: set my_break_even_alpha to the α where E(α, γ) = γ·c + c_v")
    if not isinstance(predicted_alpha, (int, float)) or not 0.0 <= predicted_alpha <= 1.0:
        return verdict(False, f"my_break_even_alpha must be a number in [0, 1], got {predicted_alpha!r}")
    cost = gamma * c + c_v
    if math.isnan(truth):
        return verdict(False, f"no α pays here: γ·c + c_v = {cost:.2f} ≥ γ + 1 = {gamma + 1}")
    if abs(predicted_alpha - truth) <= tol:
        return verdict(True, f"E({truth:.3f}, {gamma}) = {gamma} x {c:.3f} + {c_v:.3f} = {cost:.2f}: below "
                             f"α = {truth:.3f} this draft is slower than the plain loop (yours: {predicted_alpha:.3f})")
    e = expected_tokens_per_step(predicted_alpha, gamma)
    side = "too low: the draft still loses there" if e < cost else "too high: the draft already pays below it"
    why = (" (γ·c + c_v counts γ drafts and one verify; did you leave out c_v?)"
           if abs(expected_tokens_per_step(predicted_alpha, gamma) - gamma * c) < 0.05 * cost else "")
    return verdict(False, f"at α = {predicted_alpha:.3f}, E = {e:.2f} tokens per step against a step cost of "
                          f"{cost:.2f} plain steps: {side}{why}")
