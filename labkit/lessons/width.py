"""Notebook 12's glue: width drafts (contextual sparsity, Deja Vu, Liu et al. 2023; pruning) beside depth drafts.

What the notebook measures and says, each from the numbers it describes:

- :func:`contribution_sparsity` / :func:`sparsity_sentence`: how few of a layer's MLP neurons hold most of its output
  for one token (held-out windows; deterministic);
- :func:`recall_rows` / :func:`recall_sentence`: how many of the neurons that matter the predictor's top k holds,
  beside the static ranking a pruned draft keeps (deterministic);
- :func:`draft_grid` / :func:`grid_sentence` / :func:`cost_sentence`: each draft's teacher-forced agreement α and
  parameters read (deterministic), and its draft cost c timed on this machine ("this machine" lines);
- :func:`mlp_costs` / :func:`mlp_cost_sentence`: one MLP's time against the bytes it reads, dense, pruned and
  gathered, and the predictor alone (the roofline view, on this machine);
- :func:`speed_rows` / :func:`width_verdict`: the committed reference group ``12`` (every comparison in words), and
  :class:`WidthExplorer`, the kept-fraction slider over :func:`draft_grid`'s rows.

Names follow docs/notation.md: α (agreement), c (draft cost, a ratio), accepted / drafted.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch

from ..core.skip import SkipSet, decoder_layers
from ..core.width import (
    GatheredMLP,
    PrunedMLP,
    WidthDraftWeights,
    WidthPredictors,
    WidthSet,
    mlp_parts,
    neuron_contributions,
)
from ..measure.agreement import AgreementProbe
from ..measure.costs.roofline import CachedForwards
from ..measure.harness import interleaved_ms, ratio_spread
from ..measure.reference.groups import DEPTH_DRAFT, WIDTH_DRAFTS
from ..measure.reference.loader import PLAIN, Reference
from ..training.width import mlp_inputs, recall
from ..viz.widgets import as_widget, update_widget
from ..viz.width import draft_data, draft_figure
from .reference_claims import NO_REFERENCE

__all__ = ["KEPT", "DRAFTS", "contribution_sparsity", "sparsity_sentence", "recall_rows", "recall_sentence",
           "parameters_read", "draft_grid", "grid_sentence", "cost_sentence", "mlp_costs", "mlp_cost_sentence",
           "speed_rows", "width_verdict", "WidthExplorer"]

#: the kept fractions of the MLP neurons the notebook compares (the explorer's slider)
KEPT = (0.1, 0.25, 0.5, 0.75)
#: the drafts of :func:`draft_grid`: (name, with the depth draft's skip set, width kind or None)
DRAFTS = (("depth", True, None), ("dynamic", False, "dynamic"), ("pruned", False, "pruned"),
          ("depth + dynamic", True, "dynamic"), ("depth + pruned", True, "pruned"))


def _check_rows(rows, what: str) -> list[dict]:
    rows = list(rows)
    if not rows:
        raise ValueError(f"{what} must hold at least one row")
    return rows


# -- Deja Vu's observation ------------------------------------------------------------------------------------
@torch.inference_mode()
def contribution_sparsity(model, windows: torch.Tensor, shares: Sequence[float] = (0.5, 0.9)) -> list[dict]:
    """Per layer and share s: over every token of ``windows``, the fraction of the layer's neurons that holds s of
    the MLP's summed contribution |act(g_i·x)(u_i·x)|·‖w_down[:, i]‖ (the fewest, largest first): its median, 10th
    and 90th percentile. A small fraction is what makes a width draft possible."""
    rows = []
    for i, (layer, x) in enumerate(zip(decoder_layers(model), mlp_inputs(model, windows, progress=False))):
        y = neuron_contributions(layer.mlp, x.to(mlp_parts(layer.mlp)[0].dtype)).float()
        cum = y.sort(dim=1, descending=True).values.cumsum(dim=1)
        for share in shares:
            needed = ((cum < share * cum[:, -1:]).sum(dim=1) + 1).float() / y.shape[1]
            q = torch.quantile(needed, torch.tensor([0.1, 0.5, 0.9]))
            rows.append({"layer": i, "share": share, "p10": float(q[0]), "median": float(q[1]), "p90": float(q[2]),
                         "tokens": int(y.shape[0])})
    return rows


def sparsity_sentence(rows: Sequence[dict]) -> str:
    """The fewest and most neurons any layer needs (median over tokens) for the largest share measured."""
    rows = _check_rows(rows, "rows")
    share = max(r["share"] for r in rows)
    mine = [r for r in rows if r["share"] == share]
    low, high = min(mine, key=lambda r: r["median"]), max(mine, key=lambda r: r["median"])
    return (f"For one token, {share:.0%} of a layer's MLP output comes from a median {low['median']:.0%} of its "
            f"neurons (layer {low['layer']}) to {high['median']:.0%} (layer {high['layer']}), over "
            f"{mine[0]['tokens']} held-out tokens: most neurons add little to any one token's output.")


def recall_rows(model, predictors: WidthPredictors, windows: torch.Tensor, kept: Sequence[float] = KEPT[:3]
                ) -> list[dict]:
    """:func:`labkit.training.width.recall` at each kept fraction, one list."""
    return [row for k in kept for row in recall(model, predictors, windows, k, progress=False)]


def recall_sentence(rows: Sequence[dict], kept: float = 0.25) -> str:
    """The predictor's and the static ranking's mean recall over layers at ``kept`` (the nearest measured)."""
    rows = _check_rows(rows, "rows")
    kept = min({r["kept"] for r in rows}, key=lambda k: abs(k - kept))
    mine = [r for r in rows if r["kept"] == kept]
    pred, static = (sum(r[key] for r in mine) / len(mine) for key in ("predictor", "static"))
    worst = min(mine, key=lambda r: r["predictor"])
    return (f"Keeping {kept:g} of the neurons (k = {mine[0]['k']}), the predictor's top k holds {pred:.0%} of the "
            f"k that matter most, averaged over layers (lowest: {worst['predictor']:.0%}, layer {worst['layer']}); "
            f"the static ranking a pruned draft keeps holds {static:.0%}.")


# -- drafts: agreement, parameters read, cost ----------------------------------------------------------------
def _sizes(model) -> tuple[int, int, int, int]:
    """(parameters of one attention block, hidden size H, MLP neurons I, the full model's per-token parameters)."""
    layers = decoder_layers(model)
    attention = sum(p.numel() for p in layers[0].self_attn.parameters() if p.dim() == 2)
    H, I = model.config.hidden_size, model.config.intermediate_size
    return attention, H, I, model.get_output_embeddings().weight.numel() + len(layers) * (attention + 3 * H * I)


def parameters_read(model, skip: SkipSet | None, width: WidthSet | None) -> float:
    """The fraction of the full model's per-token parameters a drafted token reads: the kept attention blocks, the
    kept MLP neurons (3·H each) and the LM head (always); embeddings are a lookup, not counted (a dynamic draft's
    predictors: :func:`draft_grid` adds them)."""
    attention, H, I, full = _sizes(model)
    skip, kept = skip or SkipSet(), model.get_output_embeddings().weight.numel()
    for i in range(len(decoder_layers(model))):
        kept += 0 if i in skip.attention else attention
        if i not in skip.mlp:
            kept += 3 * H * round((width.mlp[i] if width else 1.0) * I)
    return kept / full


def _predictor_share(model, predictors: WidthPredictors, skip: SkipSet) -> float:
    """A dynamic draft's predictors' parameters over the full model's (the layers whose MLP it computes)."""
    per_layer = predictors.a[0].numel() + predictors.b[0].numel()
    return sum(per_layer for i in range(predictors.n_layers) if i not in skip.mlp) / _sizes(model)[3]


def _drafts(model, predictors: WidthPredictors, skip: SkipSet, kept: Sequence[float]) -> list[dict]:
    """Every draft of :data:`DRAFTS` at every kept fraction (the depth draft once): name, kept, skip set, its
    stand-in weights (None: the model's own) and the parameters it reads."""
    n = len(decoder_layers(model))
    out = [{"draft": "depth", "kept": 1.0, "skip": skip, "weights": None,
            "params": parameters_read(model, skip, None)}]
    for k in kept:
        for name, with_skip, kind in DRAFTS[1:]:
            width, s = WidthSet.uniform(n, k, kind), skip if with_skip else SkipSet()
            extra = _predictor_share(model, predictors, s) if kind == "dynamic" else 0.0
            out.append({"draft": name, "kept": k, "skip": s, "weights": WidthDraftWeights(model, predictors, width),
                        "params": parameters_read(model, s, width) + extra})
    return out


@torch.inference_mode()
def draft_grid(model, predictors: WidthPredictors, skip: SkipSet, probe: AgreementProbe,
               kept: Sequence[float] = KEPT, *, context: int = 64, repeats: int = 7) -> list[dict]:
    """Per draft and kept fraction (:data:`DRAFTS`): the teacher-forced agreement α on ``probe``'s positions, the
    parameters read, and c: one drafted token's forward over one plain step from a cache of ``context`` tokens,
    each draft interleaved with the plain step in rounds of its own (so each ratio pairs two calls taken moments
    apart: on a shared machine the steadiest); c is the median per-round ratio, ``c_min``–``c_max`` their range."""
    drafts = _drafts(model, predictors, skip, kept)
    runner = CachedForwards(model, context, 1)
    rows = []
    for d in drafts:
        samples = interleaved_ms({"plain": runner.one_token,
                                  "draft": lambda d=d: runner.one_token(d["skip"], d["weights"])},
                                 repeats=repeats, inner=2)
        if d["weights"] is None:
            top1 = probe.top1(d["skip"])
        else:
            with d["weights"].swapped():
                top1 = probe.top1(d["skip"])
        alpha = float(((top1 == probe.targets) & probe.scored).sum()) / probe.n_positions
        c, lo, hi = ratio_spread(samples["draft"], samples["plain"], "median")
        rows.append({"draft": d["draft"], "kept": d["kept"], "alpha": alpha, "params": d["params"], "c": c,
                     "c_min": lo, "c_max": hi})
    return rows


def _at(rows, draft: str, kept: float) -> dict:
    return next(r for r in rows if r["draft"] == draft and (draft == "depth" or r["kept"] == kept))


def grid_sentence(rows: Sequence[dict], kept: float = 0.5) -> str:
    """Agreement and parameters read at ``kept`` (deterministic: no timing)."""
    rows = _check_rows(rows, "rows")
    dyn, pru, depth = (_at(rows, d, kept) for d in ("dynamic", "pruned", "depth"))
    return (f"Keeping {kept:g} of the neurons, the dynamic draft agrees with the full model on {dyn['alpha']:.0%} "
            f"of the positions and the pruned one on {pru['alpha']:.0%}, reading {dyn['params']:.0%} and "
            f"{pru['params']:.0%} of the parameters; the depth draft agrees on {depth['alpha']:.0%} reading "
            f"{depth['params']:.0%}.")


def cost_sentence(rows: Sequence[dict], kept: float = 0.5) -> str:
    """c of each draft at ``kept`` against the parameters it reads, measured on this machine."""
    rows = _check_rows(rows, "rows")
    parts = [f"{r['draft']} {r['c']:.2f} (reads {r['params']:.2f})"
             for r in (_at(rows, d, kept) for d, _, _ in DRAFTS)]
    return f"On this machine, draft cost c at kept {kept:g}: " + "; ".join(parts) + "."


# -- one MLP: time against bytes -------------------------------------------------------------------------------
def _mlp_calls(model, predictors: WidthPredictors, k: int, x: torch.Tensor) -> dict:
    layers = [layer.mlp for layer in decoder_layers(model)]
    gathered = [GatheredMLP(m, predictors.a[i], predictors.b[i], k) for i, m in enumerate(layers)]
    pruned = [PrunedMLP(m, predictors.importance[i], k) for i, m in enumerate(layers)]
    dense = [PrunedMLP(m, predictors.importance[i], n) for i, (m, n) in enumerate(
        (m, mlp_parts(m)[0].shape[0]) for m in layers)]                     # every neuron, the same code path
    return {"dense": lambda: [m(x) for m in dense], "pruned": lambda: [m(x) for m in pruned],
            "gathered (with predictor)": lambda: [m(x) for m in gathered],
            "predictor alone": lambda: [m.scores(x).topk(k, dim=-1) for m in gathered]}


@torch.inference_mode()
def mlp_costs(model, predictors: WidthPredictors, kept: Sequence[float] = KEPT[:3], *, repeats: int = 9,
              inner: int = 5) -> list[dict]:
    """One token through every layer's MLP in turn, interleaved: pruned, gathered (the predictor's top k, the
    gathers and the products) and the predictor alone, each one's time over the dense MLP's (``ratio``: the
    median per-round ratio, with their range) and the bytes it reads over the dense MLP's. Dense is the
    pruned code keeping every neuron (three ``F.linear`` calls, as the stand-ins make), so the ratios compare the
    work and the gathers, not the model's own module calls."""
    H, I = model.config.hidden_size, model.config.intermediate_size
    x = torch.randn(1, H, generator=torch.Generator().manual_seed(0)).to(mlp_parts(decoder_layers(model)[0].mlp)[0])
    rank2 = predictors.a[0].shape[1]
    rows = []
    for f in kept:
        k = max(1, round(f * I))
        samples = interleaved_ms(_mlp_calls(model, predictors, k, x), repeats=repeats, inner=inner)
        nbytes = {"pruned": 3 * H * k, "gathered (with predictor)": 3 * H * k + rank2 * (H + I),
                  "predictor alone": rank2 * (H + I)}
        for kernel, read in nbytes.items():
            ratio, lo, hi = ratio_spread(samples[kernel], samples["dense"], "median")
            rows.append({"kernel": kernel, "kept": f, "k": k, "ratio": ratio, "ratio_min": lo, "ratio_max": hi,
                         "bytes": read / (3 * H * I), "dense_us": 1e3 * min(samples["dense"]) / len(
                             decoder_layers(model))})
    return rows


def mlp_cost_sentence(rows: Sequence[dict], kept: float = 0.25) -> str:
    """At ``kept``: the gathered MLP's and the pruned one's time and bytes against the dense MLP, on this machine."""
    rows = _check_rows(rows, "rows")
    kept = min({r["kept"] for r in rows}, key=lambda k: abs(k - kept))
    g, p, pred = (next(r for r in rows if r["kernel"] == name and r["kept"] == kept)
                  for name in ("gathered (with predictor)", "pruned", "predictor alone"))
    return (f"On this machine, at kept {kept:g}, the gathered MLP reads {g['bytes']:.0%} of the dense MLP's bytes "
            f"and took {g['ratio']:.2f}× its time (the predictor alone {pred['ratio']:.2f}×); the pruned MLP reads "
            f"{p['bytes']:.0%} and took {p['ratio']:.2f}× (dense: {g['dense_us']:.0f} µs per layer).")


# -- the reference run: speed in words -------------------------------------------------------------------------
def speed_rows(reference: Reference | None, group: str = "12") -> list[dict]:
    """The group's drafts (not the plain loop) per prompt source: {method, source, speedup, low, high, c,
    acceptance}, for :func:`labkit.viz.width.speed_figure`; [] without a reference."""
    if reference is None:
        return []
    return [{"method": r.method, "source": r.source, "speedup": r.speedup.median, "low": r.speedup.low,
             "high": r.speedup.high, "c": r.c, "acceptance": r.acceptance}
            for r in reference.select(group) if r.method != PLAIN and r.baseline == PLAIN]


def _why(width, depth) -> str:
    """Why a width row did not beat the depth row, from its measured c, accepted / drafted, tokens per step and
    c_v beside the depth row's (each named only when it is worse)."""
    worse = []
    if width.c > depth.c:
        worse.append(f"a dearer drafted token (c {width.c:.2f} against {depth.c:.2f})")
    if width.acceptance < depth.acceptance - 0.02:
        worse.append(f"a lower accepted / drafted ({width.acceptance:.2f} against {depth.acceptance:.2f})")
    if width.tokens_per_step < depth.tokens_per_step:
        worse.append(f"fewer tokens per step ({width.tokens_per_step:.2f} against {depth.tokens_per_step:.2f})")
    if width.c_v > depth.c_v:
        worse.append(f"a dearer verify (c_v {width.c_v:.2f} against {depth.c_v:.2f})")
    if not worse:
        return "None of its c, accepted / drafted, tokens per step or c_v is worse than the depth draft's."
    return f"What held {width.method} back: {', '.join(worse)}."


def width_verdict(reference: Reference | None, source: str = "packages", group: str = "12") -> list[str]:
    """Whether the fastest width (or depth + width) draft of the reference run reaches the depth draft's speedup on
    ``source``, and if not, the measured reason (c, accepted / drafted); each sentence under 50 words."""
    if reference is None:
        return [NO_REFERENCE]
    labels = [label for label, *_ in WIDTH_DRAFTS]
    rows = [r for r in reference.select(group, source) if r.method in labels and not math.isnan(r.speedup.median)]
    try:
        depth = reference.row(DEPTH_DRAFT, source, group)
    except LookupError:
        return [f"The reference run has no depth draft on {source} prompts."]
    if not rows:
        return [f"The reference run has no width drafts on {source} prompts."]
    best = max(rows, key=lambda r: r.speedup.median)
    head = (f"In the reference run on {source} prompts (fp32) the fastest width draft, {best.method}, reached "
            f"{best.speedup.text('×')} against the depth draft's {depth.speedup.text('×')}")
    if best.speedup.median >= depth.speedup.median:
        noise = "within the noise of it" if best.speedup.overlaps(depth.speedup) else "faster beyond the noise"
        return [head + f": it reaches the depth draft's speedup ({noise})."]
    if best.speedup.overlaps(depth.speedup):
        return [head + ": within the noise of it.", _why(best, depth)]
    return [head + ": slower, beyond the noise.", _why(best, depth)]


# -- the explorer -------------------------------------------------------------------------------------------------
class WidthExplorer:
    """A kept-fraction slider over :func:`draft_grid`'s rows: each draft's agreement α, draft cost c and parameters
    read at that fraction (the depth draft's row stays; bars without error bars, which a redraw keeps to x and y),
    redrawn from the rows; a readout names the draft with the
    best analytic limit at γ = 4 and c_v = 1 (E(α, γ) / (γ·c + c_v)). ``.widget``."""

    def __init__(self, rows: Sequence[dict], kept: float = 0.5, gamma: int = 4):
        import ipywidgets as widgets

        self.rows, self.gamma = _check_rows(rows, "rows"), gamma
        options = sorted({r["kept"] for r in self.rows if r["draft"] != "depth"})
        if kept not in options:
            raise ValueError(f"kept must be one of {options}, got {kept!r}")
        self.slider = widgets.SelectionSlider(options=options, value=kept, description="kept",
                                              continuous_update=True, layout=widgets.Layout(width="420px"))
        self.figure = as_widget(draft_figure(self.rows, kept, errors=False))
        self.readout = widgets.HTML()
        self.last_update_ms = float("nan")
        self.slider.observe(lambda change: self.update(), names="value")
        self.widget = widgets.VBox([self.slider, self.figure, self.readout])
        self.update()

    def limit(self, row: dict) -> float:
        """E(α, γ) / (γ·c + 1): the analytic limit at this explorer's γ with a verify of one plain step."""
        a, g = min(row["alpha"], 0.999999), self.gamma
        return (1 - a ** (g + 1)) / (1 - a) / (g * row["c"] + 1.0)

    def update(self) -> None:
        t0 = time.perf_counter()
        kept = self.slider.value
        traces = draft_data(self.rows, kept)
        update_widget(self.figure, {i: {"x": t["x"], "y": t["y"]} for i, t in enumerate(traces)},
                      layout={"title.text": f"Width drafts keeping {kept:g} of the MLP neurons, beside the depth "
                                            f"draft"})
        mine = [r for r in self.rows if r["kept"] == kept or r["draft"] == "depth"]
        best = max(mine, key=self.limit)
        self.readout.value = (f"At kept {kept:g}, with γ = {self.gamma} and c_v = 1, the highest analytic limit "
                              f"E(α, γ) / (γ·c + c_v) is <b>{best['draft']}</b>'s, {self.limit(best):.2f}× (c "
                              f"{best['c']:.2f}, {best['c_min']:.2f}–{best['c_max']:.2f} over the rounds, measured "
                              f"on this machine).")
        self.last_update_ms = 1e3 * (time.perf_counter() - t0)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
