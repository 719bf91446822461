"""What a draft step, a verify step and a full step cost on *this* machine, and what that buys.

Measuring (:func:`measure_cost_model`): wall clock (``time.perf_counter``) of single forwards at
batch size 1 with a KV cache of ``context`` tokens (about a prompt's length), after a warm-up,
taking the minimum over repeats (on a shared CPU other work only ever adds time; medians were
inflated several-fold on a busy 2-core machine) that are interleaved across configurations (so a
burst of background load hits every configuration alike). Only the model's forward is timed; the cache is
cut back to ``context`` positions after every forward, untimed.

Per-block costs come from a **regression over random skip sets** (chosen over one-block-at-a-time
differences, which subtract two noisy timings per block): the one-token step time of ~4L+8 random
skip sets z (skip ratios spread over 0..1, plus "nothing" and "everything") is fitted by
non-negative least squares, with each block type's per-layer costs partially pooled towards their
all-layer mean (empirical-Bayes ridge, see :func:`_fit_block_costs`; on a busy machine unpooled
per-layer costs came out as 0.0 for some blocks and the search then kept exactly those), to::

    step_ms(z) = fixed_ms + sum_l attention_ms[l] * kept_attention_l
                          + sum_l mlp_ms[l]       * kept_mlp_l
                          + sum_l layer_ms[l]     * (kept_attention_l or kept_mlp_l)

``layer_ms`` is the per-layer overhead (decoder-layer call, both RMSNorms, residual adds) that is
only saved when *both* blocks of a layer are skipped (labkit then swaps the whole layer for an
identity, see :mod:`labkit.skip`). ``fixed_ms`` is embedding, final norm, LM head and framework
overhead. The fitted costs are then scaled by one factor (``fit["scale"]``, close to 1) so that
``draft_ms(nothing skipped)`` equals ``full_step_ms``, the full one-token step timed directly;
otherwise fit noise could make drafting with the full model look cheaper than a plain step.

``verify_ms[k]`` is one full-model forward over k + 1 tokens (the pending token and k drafted
tokens) with logits for all of them, exactly as :func:`labkit.speculative_generate` verifies, for
k = 0..max_draft; ``verify_ms[0]`` is a plain step with full logits. The stored values are a robust
straight line (Theil-Sen) through the per-k minima, floored at ``full_step_ms``, so one odd timing
at a single k cannot make the optimiser prefer or avoid that draft length; the raw minima are kept
in ``fit["verify_raw_ms"]``.

Analytic speedup (Leviathan et al. 2023, i.i.d. acceptance with rate alpha, gamma drafted tokens):
expected tokens per step E = (1 - alpha^(gamma+1)) / (1 - alpha) (gamma + 1 at alpha = 1, 1 at
alpha = 0), speedup E / (gamma c + 1) with c = draft step cost / full step cost. From a trace with
a variable draft length: speedup = (A + 1) / (d c + c_v), A = mean accepted per step, d = mean
drafted per step, c = draft cost per drafted token / full step, c_v = verify cost per step / full.

Modelled cost per generated token (the ``modelled`` objective of :mod:`labkit.search`)::

    f(z) = (gamma * draft_ms(z) + verify_ms[gamma]) / E(alpha(z), gamma)

with gamma chosen per skip set as the integer in 1..max_draft that minimises f for that alpha
(:func:`best_gamma`): the draft length a well-tuned policy would settle on.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from .cache import crop_to, new_cache
from .decoding import forward_tokens
from .machine import machine_info
from .skip import SkipSet, skipping

__all__ = [
    "CostModel", "Prediction", "measure_cost_model", "expected_tokens_per_step", "speedup", "trace_speedup",
    "trace_limit", "best_gamma", "predict", "predicted_ms_per_token", "tied_cost_model",
]

MAX_DRAFT = 12


# ---------------------------------------------------------------------------------------
# the cost model
# ---------------------------------------------------------------------------------------
@dataclass
class CostModel:
    """Milliseconds per forward on the machine it was measured on (see module docstring)."""

    n_layers: int
    fixed_ms: float
    attention_ms: list[float]
    mlp_ms: list[float]
    verify_ms: list[float]                        # [k] = full forward over k + 1 tokens, k = 0..max_draft
    full_step_ms: float                           # one-token step of the full model, measured directly
    layer_ms: list[float] | None = None           # per-layer overhead, saved only when both blocks skip
    model: str = ""
    context: int = 0                              # KV-cache length the timings were taken at
    method: str = "regression"
    fit: dict = field(default_factory=dict)       # n_sets, repeats, r2, rmse_ms, seconds
    machine: dict = field(default_factory=dict)
    measured_at: str = ""

    def __post_init__(self) -> None:
        L = self.n_layers
        if self.layer_ms is None:
            self.layer_ms = [0.0] * L
        for name in ("attention_ms", "mlp_ms", "layer_ms"):
            values = getattr(self, name)
            if len(values) != L:
                raise ValueError(f"CostModel.{name} has {len(values)} entries for {L} layers")
            setattr(self, name, [float(v) for v in values])
        if not self.verify_ms:
            raise ValueError("CostModel.verify_ms is empty")
        self.verify_ms = [float(v) for v in self.verify_ms]

    # -- costs -----------------------------------------------------------------------------
    @property
    def max_draft(self) -> int:
        return len(self.verify_ms) - 1

    def draft_ms(self, skip: SkipSet | None) -> float:
        """Modelled one-token forward with ``skip`` removed (draft cost per drafted token)."""
        skip = (skip or SkipSet()).validate(self.n_layers)
        att, mlp = set(skip.attention), set(skip.mlp)
        total = self.fixed_ms
        for layer in range(self.n_layers):
            keep_att, keep_mlp = layer not in att, layer not in mlp
            total += self.attention_ms[layer] * keep_att + self.mlp_ms[layer] * keep_mlp
            total += self.layer_ms[layer] * (keep_att or keep_mlp)
        return total

    def verify_step_ms(self, n_drafted: int) -> float:
        """One verification forward of ``n_drafted`` drafted tokens (plus the pending one)."""
        if not 0 <= n_drafted <= self.max_draft:
            raise ValueError(f"n_drafted must be in 0..{self.max_draft}, got {n_drafted}")
        return self.verify_ms[n_drafted]

    def draft_cost_ratio(self, skip: SkipSet | None) -> float:
        """c = draft cost per drafted token / full one-token step."""
        return self.draft_ms(skip) / self.full_step_ms

    # -- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CostModel":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str) -> "CostModel":
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> "CostModel":
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no cost model at {path}; measure one with "
                                    "`python -m labkit.costmodel --model ...`")
        return cls.from_json(path.read_text())

    def summary(self) -> str:
        return (f"full step {self.full_step_ms:.2f} ms = fixed {self.fixed_ms:.2f} + attention "
                f"{sum(self.attention_ms):.2f} + MLP {sum(self.mlp_ms):.2f} + layer overhead {sum(self.layer_ms):.2f} "
                f"(model {self.draft_ms(SkipSet()):.2f}); verify 1..{self.max_draft + 1} tokens "
                f"{self.verify_ms[0]:.2f}..{self.verify_ms[-1]:.2f} ms; fit R^2 {self.fit.get('r2', float('nan')):.3f}")


# ---------------------------------------------------------------------------------------
# measuring
# ---------------------------------------------------------------------------------------
POOLINGS = ("partial", "full", "none")


def _check_pooling(pooling: str) -> None:
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be 'partial', 'full' or 'none', got {pooling!r}")


def _fit_block_costs(X: list[list[float]], y: list[float], n_layers: int,
                     pooling: str = "partial") -> tuple[list[float], dict]:
    """Non-negative regression with partial pooling of each block type's cost across layers.

    The layers of a decoder are identical in shape, so an attention block costs about the same in
    every layer; what differs between per-layer estimates is mostly timing noise, which the search
    would otherwise exploit ("keep the blocks that happen to look free"). Empirical Bayes: the pooled
    fit (one cost per block type) is the prior mean, the between-layer variance tau^2 is the spread
    of the unpooled estimates minus their sampling variance, and each per-layer cost is pulled
    towards the pooled one with ridge weight sigma^2 / tau^2 (fully pooled when tau^2 = 0).
    ``pooling="full"`` forces one cost per block type, ``"none"`` is the plain per-block NNLS fit.
    """
    _check_pooling(pooling)
    import numpy as np
    from scipy.optimize import nnls

    L = n_layers
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    groups = {"attention": slice(1, L + 1), "mlp": slice(L + 1, 2 * L + 1), "layer": slice(2 * L + 1, 3 * L + 1)}
    pooled_X = np.column_stack([X[:, 0]] + [X[:, g].sum(axis=1) for g in groups.values()])
    pooled, _ = nnls(pooled_X, y)
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    sigma2 = float(((y - X @ beta) ** 2).sum()) / max(1, len(y) - X.shape[1])
    sampling_var = np.diag(np.linalg.pinv(X.T @ X)) * sigma2
    rows, targets, shrinkage = [X], [y], {}
    for i, (name, g) in enumerate(groups.items()):
        tau2 = max(0.0, float(np.mean((beta[g] - pooled[i + 1]) ** 2)) - float(np.mean(sampling_var[g])))
        if pooling == "none":
            lam = 0.0
        elif pooling == "full" or tau2 == 0:
            lam = 1e6 * len(y)
        else:
            lam = sigma2 / tau2
        shrinkage[name] = lam
        prior_rows = np.zeros((L, X.shape[1]))
        prior_rows[np.arange(L), np.arange(X.shape[1])[g]] = math.sqrt(lam)
        rows.append(prior_rows)
        targets.append(np.full(L, math.sqrt(lam) * pooled[i + 1]))
    coef, _ = nnls(np.vstack(rows), np.concatenate(targets))
    info = {"pooling": pooling, "pooled_ms": dict(zip(["fixed", *groups], pooled.tolist())),
            "shrinkage": shrinkage, "noise_sd_ms": math.sqrt(sigma2)}
    return coef.tolist(), info


def _theil_sen_line(values: list[float]) -> list[float]:
    """Robust straight line through (k, values[k]) (median of pairwise slopes), evaluated at every k."""
    from scipy.stats import theilslopes

    ks = list(range(len(values)))
    slope, intercept, _, _ = theilslopes(values, ks)
    slope = max(0.0, float(slope))                      # more tokens never cost less
    intercept = float(statistics.median(v - slope * k for k, v in zip(ks, values)))
    return [intercept + slope * k for k in ks]


def _random_masks(n_layers: int, n_sets: int, rng: random.Random) -> list[SkipSet]:
    sets = [SkipSet(), SkipSet.all(n_layers)]
    while len(sets) < n_sets + 2:
        ratio = rng.random()
        sets.append(SkipSet.from_mask([rng.random() < ratio for _ in range(2 * n_layers)]))
    return sets


@torch.inference_mode()
def measure_cost_model(model, *, context: int = 128, n_sets: int | None = None, repeats: int = 7, warmup: int = 3,
                       max_draft: int = MAX_DRAFT, seed: int = 0, model_name: str = "",
                       pooling: str = "partial") -> CostModel:
    """Time this machine's forwards of ``model`` and fit a :class:`CostModel` (see module docstring).

    ``n_sets`` random skip sets (default 4L + 8) for the regression, ``repeats`` timings of each
    (minimum kept: contention only adds time), verify forwards of 1..max_draft+1 tokens. Takes a few
    seconds for the lab's models.
    """
    _check_pooling(pooling)                                         # before any timing
    if repeats < 1 or warmup < 0 or context < 1 or max_draft < 1:
        raise ValueError("repeats and context must be >= 1, warmup >= 0, max_draft >= 1")
    L = int(model.config.num_hidden_layers)
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None:
        context = min(context, limit - max_draft - 2)
    n_sets = 4 * L + 8 if n_sets is None else n_sets
    t_start = time.perf_counter()
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (1, context + max_draft + 1), generator=g)
    cache = new_cache(model)
    forward_tokens(model, ids[:, :context], 0, cache, logits_to_keep=1)
    pending = ids[:, context: context + 1]

    def one_token(skip: SkipSet) -> float:
        with skipping(model, skip):
            t0 = time.perf_counter()
            forward_tokens(model, pending, context, cache, logits_to_keep=1)
            elapsed = time.perf_counter() - t0
        crop_to(cache, context)
        return elapsed

    def verify(k: int) -> float:
        t0 = time.perf_counter()
        forward_tokens(model, ids[:, context: context + k + 1], context, cache)
        elapsed = time.perf_counter() - t0
        crop_to(cache, context)
        return elapsed

    for _ in range(warmup):
        one_token(SkipSet())
        one_token(SkipSet.all(L))
        verify(max_draft)

    rng = random.Random(seed)
    sets = _random_masks(L, n_sets, rng)
    times: dict[int, list[float]] = {i: [] for i in range(len(sets))}
    full: list[float] = []
    verify_times: dict[int, list[float]] = {k: [] for k in range(max_draft + 1)}
    for _ in range(repeats):
        order = list(range(len(sets)))
        rng.shuffle(order)
        for i in order:
            times[i].append(one_token(sets[i]))
        for k in rng.sample(range(max_draft + 1), max_draft + 1):
            verify_times[k].append(verify(k))
        full.extend(one_token(SkipSet()) for _ in range(2))

    # the minimum of repeats: on a shared CPU, other work only ever adds time, never removes it
    y = [1e3 * min(times[i]) for i in range(len(sets))]
    X = []
    for skip in sets:
        mask = skip.to_mask(L)
        keep_att = [0.0 if m else 1.0 for m in mask[:L]]
        keep_mlp = [0.0 if m else 1.0 for m in mask[L:]]
        X.append([1.0] + keep_att + keep_mlp + [max(a, m) for a, m in zip(keep_att, keep_mlp)])
    coef, pooling_info = _fit_block_costs(X, y, L, pooling)
    full_ms = 1e3 * min(full)
    fitted_none = sum(coef)                                          # the nothing-skipped row is all ones
    scale = full_ms / fitted_none if fitted_none > 0 else 1.0
    raw_verify = [1e3 * min(verify_times[k]) for k in range(max_draft + 1)]
    verify_ms = [max(v, full_ms) for v in _theil_sen_line(raw_verify)]
    fitted = [sum(c * x for c, x in zip(coef, row)) for row in X]
    mean_y = sum(y) / len(y)
    ss_res = sum((a - b) ** 2 for a, b in zip(y, fitted))
    ss_tot = sum((a - mean_y) ** 2 for a in y) or float("nan")
    scaled = [scale * c for c in coef]
    return CostModel(
        n_layers=L, fixed_ms=scaled[0], attention_ms=scaled[1: L + 1], mlp_ms=scaled[L + 1: 2 * L + 1],
        layer_ms=scaled[2 * L + 1:], verify_ms=verify_ms, full_step_ms=full_ms, model=model_name, context=context,
        method="regression over random skip sets (NNLS, costs partially pooled across layers)",
        fit={"n_sets": len(sets), "repeats": repeats, "r2": 1 - ss_res / ss_tot, "rmse_ms": math.sqrt(ss_res / len(y)),
             "scale": scale, **pooling_info, "verify_raw_ms": raw_verify, "seconds": time.perf_counter() - t_start},
        machine=machine_info(),
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
    )


# ---------------------------------------------------------------------------------------
# analytic speedup
# ---------------------------------------------------------------------------------------
def _check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or math.isnan(alpha):
        raise TypeError(f"alpha must be a number in [0, 1], got {alpha!r}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    return float(alpha)


def _check_gamma(gamma: float) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or math.isnan(gamma):
        raise TypeError(f"gamma must be a number >= 0, got {gamma!r}")
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma!r}")
    return float(gamma)


def expected_tokens_per_step(alpha: float, gamma: float) -> float:
    """E = (1 - alpha^(gamma+1)) / (1 - alpha): gamma + 1 at alpha = 1, 1 at alpha = 0 or gamma = 0."""
    alpha, gamma = _check_alpha(alpha), _check_gamma(gamma)
    if alpha == 1.0:
        return gamma + 1.0
    if alpha == 0.0:
        return 1.0
    # -expm1((g+1) log a) / -log1p(-(1-a)) form keeps precision for alpha close to 1
    return -math.expm1((gamma + 1.0) * math.log(alpha)) / (1.0 - alpha)


def speedup(alpha: float, gamma: float, c: float) -> float:
    """Leviathan et al.'s expected walltime improvement E / (gamma c + 1) (verify = one full step)."""
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c!r}")
    return expected_tokens_per_step(alpha, gamma) / (_check_gamma(gamma) * c + 1.0)


def trace_speedup(mean_accepted: float, mean_drafted: float, c: float, c_v: float) -> float:
    """(A + 1) / (d c + c_v): speedup over plain decoding with variable draft lengths."""
    if min(mean_accepted, mean_drafted, c) < 0 or c_v <= 0:
        raise ValueError("mean_accepted, mean_drafted, c must be >= 0 and c_v > 0")
    return (mean_accepted + 1.0) / (mean_drafted * c + c_v)


def trace_limit(trace, full_step_ms: float, *, cost_model: CostModel | None = None,
                skip: SkipSet | None = None) -> dict:
    """The speedup a trace's acceptance pattern allows, beside the speedup it measured.

    ``measured_speedup`` = ``full_step_ms`` / the trace's ms per token (draft + verify time,
    prefill excluded). ``limit_speedup`` = (A + 1) / (d c + c_v) with A, d from the trace and the
    forward costs c, c_v from ``cost_model`` (draft cost of ``skip``; verify cost of each step's
    draft length) when one is given, else from the trace's own phase timings (which include the
    decoder's bookkeeping, so the two then differ only by steps cut short by EOS or the budget).
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
        verify_ms = s["verify_ms_per_step"]
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


# ---------------------------------------------------------------------------------------
# predicted ms per generated token
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prediction:
    ms_per_token: float
    gamma: int
    tokens_per_step: float
    speedup: float          # full_step_ms / ms_per_token
    draft_ms: float
    verify_ms: float


def tied_cost_model(cost_model: CostModel) -> CostModel:
    """A copy of ``cost_model`` with every layer's attention, MLP and overhead ms set to their mean over layers.

    The lab's decoder layers all have the same shapes, so they cost the same; the fitted per-layer costs
    scatter around the mean because they are a regression on noisy timings (on a busy 2-core machine some
    blocks come out at 0 ms, others at twice the mean). Tying keeps every total, the fixed part, the full
    step and the verify costs, and stops a search from "saving" time by skipping blocks that only look
    expensive. (Not right for models whose layers differ, e.g. sliding-window vs global attention.)
    """
    L = cost_model.n_layers
    d = cost_model.to_dict()
    for key in ("attention_ms", "mlp_ms", "layer_ms"):
        d[key] = [sum(d[key]) / L] * L
    d["method"] = f"{cost_model.method}, tied across layers"
    d["fit"] = {**d.get("fit", {}), "tied": True}
    return CostModel.from_dict(d)


def predict(cost_model: CostModel, skip: SkipSet | None, alpha: float, gamma=None, *,
            max_gamma: int | None = None) -> Prediction:
    """Predicted cost per generated token of drafting with ``skip`` at agreement ``alpha``.

    ``gamma``: drafted tokens per step (an int, a :class:`~labkit.FixedK`), or None / an adaptive
    policy: the integer in 1..max_gamma (default: the cost model's max draft, 12) minimising
    f = (gamma draft_ms + verify_ms[gamma]) / E(alpha, gamma).
    """
    alpha = _check_alpha(alpha)
    draft = cost_model.draft_ms(skip)
    from .policies import DraftPolicy, FixedK

    top = cost_model.max_draft if max_gamma is None else min(max_gamma, cost_model.max_draft)
    fixed = None
    if isinstance(gamma, FixedK):
        fixed = gamma.k
    elif isinstance(gamma, DraftPolicy):
        top = min(top, int(gamma.max_draft))
    elif gamma is not None:
        if isinstance(gamma, bool) or not isinstance(gamma, int):
            raise TypeError(f"gamma must be an int, None or a draft policy, got {gamma!r}")
        fixed = gamma
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


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m labkit.costmodel",
        description="Measure a model's forward costs on this machine and save them as JSON.")
    parser.add_argument("--model", default="default", help="shipped model name or a Hugging Face model folder")
    parser.add_argument("--out", default=None, help="JSON path (default: results/costmodel/<model>.json)")
    parser.add_argument("--context", type=int, default=128, help="KV-cache length to time at")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--pooling", default="partial", choices=POOLINGS,
                        help="per-layer block costs: pooled across layers partially (default), fully, or not")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from .models import load_model

    model, _ = load_model(args.model)
    cm = measure_cost_model(model, context=args.context, repeats=args.repeats, model_name=str(args.model),
                            pooling=args.pooling)
    results = Path(__file__).resolve().parent.parent / "results"
    default_out = results / "costmodel" / f"{Path(str(args.model)).name}.json"
    out = Path(args.out) if args.out else default_out
    cm.save(out)
    print(cm.summary())
    print(f"saved {out} ({cm.fit['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
