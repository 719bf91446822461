"""What an acceptance pattern buys: the analytic speedup of speculative decoding, applied to costs and traces.

The two formulas live in :mod:`labkit.core.expectation` (E(α, γ) and (A + 1) / (d c + c_v)); this module checks
its inputs as the notebooks give them and applies them: with i.i.d. acceptance and verify = one plain step the
speedup is E / (γ c + 1) (Leviathan et al. 2023); from a trace, A and d are its mean accepted and drafted per step.

The modelled cost per generated token of a skip set z (the ``modelled`` objective of the search) is
f(z) = (γ draft_ms(z) + verify_ms[γ]) / E(α(z), γ), with γ the integer in 1..max_draft that minimises it
(:func:`best_gamma`): the draft length a well-tuned policy would settle on.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...core.checks import check_int, check_number, check_probability
from ...core.expectation import expected_tokens, speedup_limit
from ...core.policies import DraftPolicy, FixedK
from ...core.skip import SkipSet
from .costmodel import CostModel

#: The unit of the modelled and measured objectives (lower is better).
UNIT = "ms per generated token"

__all__ = ["UNIT", "expected_tokens_per_step", "speedup", "trace_speedup", "trace_limit", "Prediction", "predict",
           "best_gamma", "predicted_ms_per_token", "predicted_cost_frame", "path_optima", "check_path",
           "interpolate_cv", "best_limit", "limit_curve"]


def _check_alpha(alpha: float) -> float:
    return check_probability("alpha", alpha)


def _check_gamma(gamma: float) -> float:
    return check_number("gamma", gamma, 0.0)


def expected_tokens_per_step(alpha: float, gamma: float) -> float:
    """E(α, γ) (:func:`~labkit.core.expectation.expected_tokens`) of a checked α in [0, 1] and γ >= 0."""
    return expected_tokens(_check_alpha(alpha), _check_gamma(gamma))


def speedup(alpha: float, gamma: float, c: float) -> float:
    """Leviathan et al.'s expected walltime improvement E / (γ c + 1): the speedup limit with A = E - 1, d = γ and
    verify = one full step (c_v = 1)."""
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c!r}")
    return speedup_limit(expected_tokens_per_step(alpha, gamma) - 1.0, _check_gamma(gamma), c, 1.0)


def trace_speedup(mean_accepted: float, mean_drafted: float, c: float, c_v: float) -> float:
    """(A + 1) / (d c + c_v) (:func:`~labkit.core.expectation.speedup_limit`) of checked trace means and costs."""
    if min(mean_accepted, mean_drafted, c) < 0 or c_v <= 0:
        raise ValueError("mean_accepted, mean_drafted, c must be >= 0 and c_v > 0")
    return speedup_limit(mean_accepted, mean_drafted, c, c_v)


def trace_limit(trace, full_step_ms: float, *, cost_model: CostModel | None = None,
                skip: SkipSet | None = None) -> dict:
    """The speedup a trace's acceptance pattern allows, beside the speedup it measured.

    ``measured_speedup`` = ``full_step_ms`` / the trace's ms per token (draft + verify time,
    prefill excluded). ``limit_speedup`` = (A + 1) / (d c + c_v) with A, d from the trace and the
    forward costs c, c_v from ``cost_model`` (draft cost of ``skip``; verify cost of each step's
    draft length) when one is given, else from the trace's own phase timings (the drafter's bookkeeping,
    choosing a set and learning from the verdict, counted with the verification: the two then differ only by steps
    cut short by EOS or the budget).
    ``free_draft_speedup`` = (A + 1) / c_v is the ceiling if drafting cost nothing.
    """
    if not full_step_ms > 0:
        raise ValueError(f"full_step_ms must be > 0, got {full_step_ms!r}")
    s = trace.summary()
    if not s["steps"]:
        raise ValueError("the trace has no steps")
    A, d = s["mean_accepted_per_step"], s["drafted_per_step"]
    if cost_model is not None:
        draft_ms = cost_model.draft_ms(skip)
        verify_ms = sum(cost_model.verify_step_ms(min(st.n_drafted, cost_model.max_draft)) for st in trace.steps)
        verify_ms /= s["steps"]
        source = "cost model"
    else:
        draft_ms = s["draft_ms_per_drafted_token"] if s["drafted"] else 0.0
        select_ms = 1e3 * sum(st.select_s for st in trace.steps) / s["steps"]   # the drafter's bookkeeping
        verify_ms = s["verify_ms_per_step"] + select_ms
        source = "trace timings"
    c, c_v = draft_ms / full_step_ms, verify_ms / full_step_ms
    limit = trace_speedup(A, d, c, c_v)
    return {
        "mean_accepted_per_step": A, "drafted_per_step": d, "tokens_per_step": A + 1.0,
        "acceptance_rate": s["acceptance_rate"], "c": c, "c_v": c_v, "cost_source": source,
        "limit_speedup": limit, "limit_ms_per_token": full_step_ms / limit,
        "free_draft_speedup": (A + 1.0) / c_v,
        "measured_ms_per_token": s["ms_per_token"], "measured_speedup": full_step_ms / s["ms_per_token"],
    }


@dataclass(frozen=True)
class Prediction:
    ms_per_token: float
    gamma: int
    tokens_per_step: float
    speedup: float          # full_step_ms / ms_per_token
    draft_ms: float
    verify_ms: float


def predict(cost_model: CostModel, skip: SkipSet | None, alpha: float, gamma=None, *,
            max_gamma: int | None = None) -> Prediction:
    """Predicted cost per generated token of drafting with ``skip`` at agreement ``alpha``.

    ``gamma``: drafted tokens per step (an int, a :class:`~labkit.FixedK`), or None / an adaptive
    policy: the integer in 1..max_gamma (default: the cost model's max draft, 12) minimising
    f = (gamma draft_ms + verify_ms[gamma]) / E(alpha, gamma).
    """
    alpha = _check_alpha(alpha)
    draft = cost_model.draft_ms(skip)
    top = cost_model.max_draft if max_gamma is None else min(max_gamma, cost_model.max_draft)
    fixed = None
    if isinstance(gamma, FixedK):
        fixed = gamma.k
    elif isinstance(gamma, DraftPolicy):
        top = min(top, int(gamma.max_draft))
    elif gamma is not None:
        fixed = check_int("gamma (an int, None or a draft policy)", gamma)
    if top < 1:
        raise ValueError(f"max_gamma must be >= 1, got {max_gamma!r}")
    candidates = [fixed] if fixed is not None else list(range(1, top + 1))
    best = None
    for g in candidates:
        verify = cost_model.verify_step_ms(g)
        E = expected_tokens_per_step(alpha, g)
        ms = (g * draft + verify) / E
        if best is None or ms < best.ms_per_token:
            best = Prediction(ms, g, E, cost_model.full_step_ms / ms, draft, verify)
    return best


def best_gamma(cost_model: CostModel, skip: SkipSet | None, alpha: float, max_gamma: int | None = None) -> int:
    """The draft length in 1..max_gamma with the lowest predicted ms per token."""
    return predict(cost_model, skip, alpha, None, max_gamma=max_gamma).gamma


def predicted_ms_per_token(cost_model: CostModel, skip: SkipSet | None, alpha: float, gamma=None) -> float:
    """f(z) = (gamma draft_ms(z) + verify_ms[gamma]) / E(alpha, gamma); gamma=None: the best gamma."""
    return predict(cost_model, skip, alpha, gamma).ms_per_token


def check_path(path: Sequence, n_layers: int) -> list[tuple[SkipSet, float]]:
    out = list(path)
    if not out:
        raise ValueError("the elimination path is empty")
    for i, entry in enumerate(out):
        skip, a = entry
        if not isinstance(skip, SkipSet):
            raise TypeError(f"path entry {i} holds a {type(skip).__name__}, not a SkipSet")
        skip.validate(n_layers)
        if not 0.0 <= float(a) <= 1.0:
            raise ValueError(f"path entry {i} has agreement {a!r} outside [0, 1]")
    return out


def predicted_cost_frame(cost_model, path: Sequence, *, alphas: Sequence[float] = (), label: str = "") -> object:
    """Predicted cost per generated token of every set on ``path`` (plus nothing skipped).

    Rows for the path's own agreement (``alpha_source`` = 'measured') and for each fixed alpha in
    ``alphas`` ('fixed'); columns model, n_skipped, ratio, alpha, alpha_source, ms_per_token, gamma,
    tokens_per_step, draft_ms, speedup. The draft length gamma is the best for that alpha
    (:func:`predict`).
    """
    import pandas as pd

    L = cost_model.n_layers
    path = [(SkipSet(), 1.0)] + check_path(path, L)
    rows = []
    for skip, a in path:
        for alpha, source in [(float(a), "measured")] + [(float(x), "fixed") for x in alphas]:
            p = predict(cost_model, skip, alpha)
            rows.append({"model": label, "n_skipped": skip.n_skipped, "ratio": skip.ratio(L), "alpha": alpha,
                         "alpha_source": source, "ms_per_token": p.ms_per_token, "gamma": p.gamma,
                         "tokens_per_step": p.tokens_per_step, "draft_ms": p.draft_ms, "speedup": p.speedup,
                         "skip": str(skip)})
    return pd.DataFrame(rows)


def path_optima(cost_model, paths: Mapping[str, Sequence]):
    """The cheapest set on each model's path by predicted ms per token: a DataFrame indexed by model
    (columns n_skipped, ratio, alpha, gamma, tokens_per_step, ms_per_token, speedup, skip)."""
    import pandas as pd

    rows = []
    for name, path in paths.items():
        frame = predicted_cost_frame(cost_model, path, label=name)
        rows.append(frame.loc[frame["ms_per_token"].idxmin()])
    columns = ["model", "n_skipped", "ratio", "alpha", "gamma", "tokens_per_step", "ms_per_token", "speedup", "skip"]
    return pd.DataFrame(rows)[columns].set_index("model")


# -- what measured cost curves allow (rows of roofline.draft_cost_curve and verify_cost_curve) -----------------------
def interpolate_cv(verify_rows: Sequence[dict], tokens: float) -> float:
    """c_v at ``tokens`` read off a :func:`verify_cost_curve` (piecewise linear; the ends extended flat below and
    along the last slope above)."""
    pts = sorted((r["tokens"], r["c_v"]) for r in verify_rows)
    if not pts:
        raise ValueError("verify_rows is empty")
    if tokens <= pts[0][0] or len(pts) == 1:
        return pts[0][1]
    for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
        if tokens <= t1:
            return v0 + (v1 - v0) * (tokens - t0) / (t1 - t0)
    (t0, v0), (t1, v1) = pts[-2], pts[-1]
    return v1 + (v1 - v0) * (tokens - t1) / (t1 - t0)


def best_limit(alpha: float, c: float, verify_rows: Sequence[dict], gammas: Sequence[int] = range(1, 9)) -> dict:
    """The analytic limit E(α, γ) / (γ·c + c_v(γ + 1 tokens)) at the γ in ``gammas`` that maximises it:
    {gamma, tokens_per_step, step_cost, limit}."""
    best = None
    for g in gammas:
        E, cost = expected_tokens(alpha, g), g * c + interpolate_cv(verify_rows, g + 1)
        if best is None or E / cost > best["limit"]:
            best = {"gamma": int(g), "tokens_per_step": E, "step_cost": cost, "limit": E / cost}
    return best


def limit_curve(draft_rows: Sequence[dict], verify_rows: Sequence[dict], alphas: Sequence[float],
                gammas: Sequence[int] = range(1, 9)) -> list[dict]:
    """The analytic limit at each α for each measured draft cost (one row per (kept, α): ``label``, ``kept``,
    ``alpha``, ``c``, ``gamma``, ``tokens_per_step``, ``step_cost``, ``limit``). The same α at every kept fraction
    isolates what the costs do; in a real model α falls as fewer blocks are kept."""
    rows = []
    for r in draft_rows:
        for a in alphas:
            rows.append({"label": r["label"], "kept": r["kept"], "alpha": float(a), "c": r["c"],
                         **best_limit(a, r["c"], verify_rows, gammas)})
    return rows
