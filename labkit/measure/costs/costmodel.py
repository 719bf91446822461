"""What a draft step, a verify step and a full step cost on *this* machine (c and c_v in ms).

:func:`measure_cost_model` times single forwards at batch size 1 with a KV cache of ``context`` tokens
and fits, over random skip sets z, the one-token step time::

    step_ms(z) = fixed_ms + Σ_l attention_ms[l]·kept_attention_l + Σ_l mlp_ms[l]·kept_mlp_l
                          + Σ_l layer_ms[l]·(kept_attention_l or kept_mlp_l)

``layer_ms`` is the per-layer overhead (decoder-layer call, norms, residual adds), saved only when both
blocks of a layer are skipped (the whole layer is then swapped for an identity); ``fixed_ms`` is the
embedding, final norm, LM head and framework overhead every forward pays. ``verify_ms[k]`` is one full
forward over k + 1 tokens (the pending token and k drafted ones), as the verify step runs it.
How the timings are taken and fitted, and why, is in ``docs/decisions.md`` (cost model).
"""
from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ...artifacts import arguments
from ...artifacts.models import load_model
from ...artifacts.paths import RESULTS_DIR
from ...core.cache import crop_to, new_cache
from ...core.checks import check_int, with_defaults
from ...core.devices import clock
from ...core.draft_weights import draft_weights as build_draft_weights
from ...core.forward import forward_tokens
from ...core.skip import SkipSet, skipping
from ..machine import machine_info

__all__ = ["CostModel", "measure_cost_model", "tied_cost_model", "verify_cost_in_steps", "fit_block_costs",
           "random_skip_sets", "POOLINGS", "MAX_DRAFT"]

MAX_DRAFT = 12


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
    draft_weights: str | None = None              # the weights the draft blocks were timed with (None: the model's)

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
    def from_dict(cls, d: dict) -> CostModel:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str) -> CostModel:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no cost model at {path}; measure one with "
                                    "`python -m labkit costmodel --model ...`")
        return cls.from_json(path.read_text())

    def summary(self) -> str:
        return (f"full step {self.full_step_ms:.2f} ms = fixed {self.fixed_ms:.2f} + attention "
                f"{sum(self.attention_ms):.2f} + MLP {sum(self.mlp_ms):.2f} + layer overhead {sum(self.layer_ms):.2f} "
                f"(model {self.draft_ms(SkipSet()):.2f}); verify 1..{self.max_draft + 1} tokens "
                f"{self.verify_ms[0]:.2f}..{self.verify_ms[-1]:.2f} ms; fit R^2 {self.fit.get('r2', float('nan')):.3f}")


POOLINGS = ("partial", "full", "none")


def _check_pooling(pooling: str) -> None:
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be 'partial', 'full' or 'none', got {pooling!r}")


def fit_block_costs(X: list[list[float]], y: list[float], n_layers: int,
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


def random_skip_sets(n_layers: int, n_sets: int, rng: random.Random) -> list[SkipSet]:
    sets = [SkipSet(), SkipSet.all(n_layers)]
    while len(sets) < n_sets + 2:
        ratio = rng.random()
        sets.append(SkipSet.from_mask([rng.random() < ratio for _ in range(2 * n_layers)]))
    return sets


class _Timer:
    """Times one-token forwards under a skip set and verify forwards of k + 1 tokens, always from the same
    cache of ``context`` tokens (cut back after every forward, untimed). ``weights``: the draft weights the
    one-token forwards of a skip set read (None: the model's own); the full step and verifies never do."""

    def __init__(self, model, context: int, max_draft: int, seed: int, weights: str | None = None):
        g = torch.Generator().manual_seed(seed)
        self.model, self.context = model, context
        self.weights = build_draft_weights(model, weights)
        self.ids = torch.randint(0, model.config.vocab_size, (1, context + max_draft + 1), generator=g)
        self.cache = new_cache(model)
        forward_tokens(model, self.ids[:, :context], 0, self.cache, logits_to_keep=1)

    def one_token(self, skip: SkipSet, draft: bool = True) -> float:
        swap = self.weights.swapped() if draft and self.weights is not None else nullcontext()
        with skipping(self.model, skip), swap:
            t0 = clock()
            forward_tokens(self.model, self.ids[:, self.context: self.context + 1], self.context, self.cache,
                           logits_to_keep=1)
            elapsed = clock() - t0
        crop_to(self.cache, self.context)
        return elapsed

    def verify(self, k: int) -> float:
        t0 = clock()
        forward_tokens(self.model, self.ids[:, self.context: self.context + k + 1], self.context, self.cache)
        elapsed = clock() - t0
        crop_to(self.cache, self.context)
        return elapsed


def _time_all(timer: _Timer, sets: list[SkipSet], max_draft: int, repeats: int, rng: random.Random) -> tuple:
    """Minimum over ``repeats`` rounds (configurations shuffled in each) of every set's step, every verify
    length and the full step: on a shared CPU other work only ever adds time."""
    times = {i: [] for i in range(len(sets))}
    verify_times = {k: [] for k in range(max_draft + 1)}
    full = []
    for _ in range(repeats):
        order = list(range(len(sets)))
        rng.shuffle(order)
        for i in order:
            times[i].append(timer.one_token(sets[i]))
        for k in rng.sample(range(max_draft + 1), max_draft + 1):
            verify_times[k].append(timer.verify(k))
        full.extend(timer.one_token(SkipSet(), draft=False) for _ in range(2))
    return ([1e3 * min(times[i]) for i in range(len(sets))], [1e3 * min(verify_times[k]) for k in verify_times],
            1e3 * min(full))


def _design_row(skip: SkipSet, n_layers: int) -> list[float]:
    """[1, kept attention (L), kept MLP (L), layer kept at all (L)]: one row of the regression."""
    mask = skip.to_mask(n_layers)
    keep_att = [0.0 if m else 1.0 for m in mask[:n_layers]]
    keep_mlp = [0.0 if m else 1.0 for m in mask[n_layers:]]
    return [1.0] + keep_att + keep_mlp + [max(a, m) for a, m in zip(keep_att, keep_mlp)]


def _fit_quality(X: list[list[float]], y: list[float], coef: list[float]) -> dict:
    fitted = [sum(c * x for c, x in zip(coef, row)) for row in X]
    mean_y = sum(y) / len(y)
    ss_res = sum((a - b) ** 2 for a, b in zip(y, fitted))
    ss_tot = sum((a - mean_y) ** 2 for a in y) or float("nan")
    return {"r2": 1 - ss_res / ss_tot, "rmse_ms": math.sqrt(ss_res / len(y))}


#: How :func:`measure_cost_model` times, by name, with its defaults.
TIMING_DEFAULTS = {"context": 128, "n_sets": None, "repeats": 7, "warmup": 3, "max_draft": MAX_DRAFT, "seed": 0}


@torch.inference_mode()
def measure_cost_model(model, *, model_name: str = "", pooling: str = "partial", draft_weights: str | None = None,
                       **timing) -> CostModel:
    """Time this machine's forwards of ``model`` and fit a :class:`CostModel` (see the module docstring).

    ``n_sets`` random skip sets (default 4L + 8) for the regression, ``repeats`` timings of each (minimum
    kept), verify forwards of 1..max_draft+1 tokens. Takes a few seconds for the lab's models.
    ``draft_weights="int8"``: the skip sets' forwards read int8 draft weights (the draft's cost), while
    ``full_step_ms`` and ``verify_ms`` stay the model's own (the target's cost), so c = draft_ms / full_step_ms.
    ``timing``, by name (:data:`TIMING_DEFAULTS`): ``context``, ``n_sets``, ``repeats``, ``warmup``, ``max_draft``,
    ``seed``.
    """
    context, n_sets, repeats, warmup, max_draft, seed = with_defaults("measure_cost_model", timing,
                                                                      TIMING_DEFAULTS).values()
    _check_pooling(pooling)                                         # before any timing
    if repeats < 1 or warmup < 0 or context < 1 or max_draft < 1:
        raise ValueError("repeats and context must be >= 1, warmup >= 0, max_draft >= 1")
    L = int(model.config.num_hidden_layers)
    limit = getattr(model.config, "max_position_embeddings", None)
    context = min(context, limit - max_draft - 2) if limit is not None else context
    t_start = clock()
    timer = _Timer(model, context, max_draft, seed, draft_weights)
    for _ in range(warmup):
        timer.one_token(SkipSet()), timer.one_token(SkipSet.all(L)), timer.verify(max_draft)
    rng = random.Random(seed)
    sets = random_skip_sets(L, 4 * L + 8 if n_sets is None else n_sets, rng)
    y, raw_verify, full_ms = _time_all(timer, sets, max_draft, repeats, rng)
    X = [_design_row(skip, L) for skip in sets]
    coef, pooling_info = fit_block_costs(X, y, L, pooling)
    # scale so that drafting with nothing skipped costs exactly what it was timed at (sets[0] skips nothing;
    # with the model's own weights that is the directly timed full step)
    reference = full_ms if draft_weights is None else y[0]
    scale = reference / sum(coef) if sum(coef) > 0 else 1.0
    scaled = [scale * c for c in coef]
    return CostModel(
        n_layers=L, fixed_ms=scaled[0], attention_ms=scaled[1: L + 1], mlp_ms=scaled[L + 1: 2 * L + 1],
        layer_ms=scaled[2 * L + 1:], verify_ms=[max(v, full_ms) for v in _theil_sen_line(raw_verify)],
        full_step_ms=full_ms, model=model_name, context=context,
        method="regression over random skip sets (NNLS, costs partially pooled across layers)",
        fit={"n_sets": len(sets), "repeats": repeats, **_fit_quality(X, y, coef), "scale": scale, **pooling_info,
             "verify_raw_ms": raw_verify, "seconds": clock() - t_start},
        machine=machine_info(), measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"), draft_weights=draft_weights,
    )


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


def verify_cost_in_steps(cost_model, n_tokens: int) -> float:
    """Cost of verifying ``n_tokens`` tokens in one forward, in one-token full steps (1 token -> ~1)."""
    check_int("n_tokens", n_tokens, 1, cost_model.max_draft + 1)
    return cost_model.verify_step_ms(n_tokens - 1) / cost_model.full_step_ms


def main(argv: Sequence[str] | None = None) -> None:
    parser = arguments.command_parser("Measure a model's forward costs on this machine and save them as JSON.")
    parser.add_argument("--model", type=arguments.model, default="default",
                        help="shipped model name or a Hugging Face model folder")
    parser.add_argument("--out", type=arguments.output_file, default=None,
                        help="JSON path (default: results/costmodel/<model>.json)")
    parser.add_argument("--context", type=arguments.count, default=128, help="KV-cache length to time at")
    parser.add_argument("--repeats", type=arguments.count, default=7)
    parser.add_argument("--threads", type=arguments.count, default=1, help="torch threads (default 1)")
    parser.add_argument("--pooling", default="partial", choices=POOLINGS,
                        help="per-layer block costs: pooled across layers partially (default), fully, or not")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    model, _ = load_model(args.model)
    cm = measure_cost_model(model, context=args.context, repeats=args.repeats, model_name=str(args.model),
                            pooling=args.pooling)
    default_out = RESULTS_DIR / "costmodel" / f"{Path(str(args.model)).name}.json"
    out = Path(args.out) if args.out else default_out
    cm.save(out)
    print(cm.summary())
    print(f"saved {out} ({cm.fit['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
