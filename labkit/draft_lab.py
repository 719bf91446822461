"""Figures and small helpers of notebook 02, *building the layer-skip draft*.

Every figure builder returns a ``plotly.graph_objects.Figure`` (never shows it). The pieces:

- what a forward costs: :func:`cost_breakdown_figure` (fixed ms and the attention / MLP / layer
  overhead of each layer, from a :class:`~labkit.costmodel.CostModel`) and :func:`verify_cost_figure`
  (checking n tokens in one forward, in units of one-token steps; :func:`verify_cost_in_steps`);
- what skipping costs in agreement: :func:`single_block_figure` (one block skipped at a time) and
  :func:`redundancy_figure` (greedy-elimination paths of several models; :func:`elimination_frame`,
  :func:`agreement_at_ratio`);
- what it buys: :func:`predicted_cost_frame` / :func:`predicted_cost_figure` (the modelled ms per
  generated token along those paths, for fixed and for the measured agreement);
- one completion drafted by a skip set next to the full model's: :func:`token_comparison` and
  :func:`token_comparison_html`;
- a wall-clock check of a chosen set: :func:`measure_speedup`.

A *path* is what :func:`labkit.robustness.greedy_elimination` returns: ``[(SkipSet, agreement), ...]``,
entry i skipping i + 1 blocks.
"""
from __future__ import annotations

import html
import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

import plotly.graph_objects as go
import torch

from .search import UNIT
from .skip import SkipSet, skipping
from .timeline import visible

__all__ = [
    "verify_cost_in_steps", "cost_breakdown_figure", "verify_cost_figure", "single_block_figure",
    "elimination_frame", "agreement_at_ratio", "redundancy_figure", "predicted_cost_frame", "path_optima",
    "predicted_cost_figure",
    "TokenComparison", "token_comparison", "token_comparison_html", "measure_speedup", "MODEL_COLOURS",
]

ATTENTION_COLOUR = "#1f78b4"
MLP_COLOUR = "#ff7f00"
OVERHEAD_COLOUR = "#b2b2b2"
FIXED_COLOUR = "#6a3d9a"
AGREE_COLOUR = "#2ca25f"
DISAGREE_COLOUR = "#de2d26"
#: Line colours of the models compared (first model, second model, ...).
MODEL_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a")


def _block_name(index: int, n_layers: int) -> str:
    """Mask index 0..2L-1 -> 'attention 3' / 'MLP 3'."""
    return f"attention {index}" if index < n_layers else f"MLP {index - n_layers}"


def _check_path(path: Sequence, n_layers: int) -> list[tuple[SkipSet, float]]:
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


# ---------------------------------------------------------------------------------------
# cost of a forward
# ---------------------------------------------------------------------------------------
def verify_cost_in_steps(cost_model, n_tokens: int) -> float:
    """Cost of verifying ``n_tokens`` tokens in one forward, in one-token full steps (1 token -> ~1)."""
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or not 1 <= n_tokens <= cost_model.max_draft + 1:
        raise ValueError(f"n_tokens must be an integer in 1..{cost_model.max_draft + 1}, got {n_tokens!r}")
    return cost_model.verify_step_ms(n_tokens - 1) / cost_model.full_step_ms


def cost_breakdown_figure(cost_model, *, title: str | None = None) -> go.Figure:
    """Stacked bars: each layer's fitted attention, MLP and layer-overhead ms, their mean over layers, and the
    fixed ms of every forward."""
    cm = cost_model
    L = cm.n_layers
    x = ["fixed"] + [str(l) for l in range(L)] + ["mean layer"]
    total_att, total_mlp, total_layer = sum(cm.attention_ms), sum(cm.mlp_ms), sum(cm.layer_ms)
    full = cm.draft_ms(SkipSet())

    def share(v: float) -> str:
        return f"{v:.2f} ms in all, {v / full:.0%}"

    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=[cm.fixed_ms] + [None] * (L + 1), name=f"fixed per forward: embedding, final norm, LM head, "
                         f"framework ({share(cm.fixed_ms)})", marker_color=FIXED_COLOUR,
                         hovertemplate="fixed: %{y:.3f} ms<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=[None] + list(cm.attention_ms) + [total_att / L], name=f"attention block ({share(total_att)})",
                         marker_color=ATTENTION_COLOUR, hovertemplate="layer %{x} attention: %{y:.3f} ms<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=[None] + list(cm.mlp_ms) + [total_mlp / L], name=f"MLP block ({share(total_mlp)})",
                         marker_color=MLP_COLOUR, hovertemplate="layer %{x} MLP: %{y:.3f} ms<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=[None] + list(cm.layer_ms) + [total_layer / L],
                         name=f"layer overhead, saved only when both blocks are skipped ({share(total_layer)})",
                         marker_color=OVERHEAD_COLOUR,
                         hovertemplate="layer %{x} overhead: %{y:.3f} ms<extra></extra>"))
    r2 = cm.fit.get("r2")
    threads = cm.machine.get("torch_threads")
    sub = (f"one-token step of the full model = {cm.full_step_ms:.2f} ms"
           + (f" on {threads} thread{'s' if threads != 1 else ''}" if threads else "")
           + (f"; block costs fitted over {cm.fit.get('n_sets', '?')} random skip sets, R² = {r2:.2f}"
              if r2 is not None and not math.isnan(r2) else ""))
    if cm.fit.get("tied"):
        sub += "<br>tied: every layer at the mean of the fitted per-layer costs"
    elif r2 is not None and not math.isnan(r2) and r2 < 0.97:
        sub += "<br>single layers scatter (a regression on noisy timings); their sums and the mean layer are reliable"
    fig.update_layout(
        barmode="stack", title=title or f"Where one forward of {cm.model or 'the model'} spends its time<br>"
                                        f"<sup>{sub}</sup>",
        xaxis_title="decoder layer (fixed: paid by every forward; mean layer: the average of layers 0..L-1)",
        yaxis_title="ms per one-token forward",
        legend=dict(orientation="h", yanchor="top", y=-0.2, x=0, traceorder="normal"), height=540,
        margin=dict(t=110),
    )
    return fig


def verify_cost_figure(cost_model, *, highlight: int = 5, title: str | None = None) -> go.Figure:
    """Cost of one forward over n tokens (the verify step), in one-token steps, against n separate steps."""
    cm = cost_model
    full = cm.full_step_ms
    n = list(range(1, cm.max_draft + 2))
    fitted = [v / full for v in cm.verify_ms]
    raw = cm.fit.get("verify_raw_ms")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=n, y=n, mode="lines", line=dict(color="#7f7f7f", dash="dash"),
                             name="n separate one-token steps (plain decoding)",
                             hovertemplate="%{x} steps<extra></extra>"))
    if raw and len(raw) == len(n):
        fig.add_trace(go.Scatter(x=n, y=[v / full for v in raw], mode="markers", marker=dict(size=8, color="#1f78b4"),
                                 name="one forward over n tokens: measured (median)",
                                 customdata=raw, hovertemplate="%{x} tokens: %{customdata:.2f} ms = %{y:.2f} steps"
                                                               "<extra></extra>"))
    fig.add_trace(go.Scatter(x=n, y=fitted, mode="lines", line=dict(color="#1f78b4", width=3),
                             name="one forward over n tokens: robust line (used by the cost model)",
                             customdata=cm.verify_ms,
                             hovertemplate="%{x} tokens: %{customdata:.2f} ms = %{y:.2f} steps<extra></extra>"))
    if 1 <= highlight <= len(n):
        v = verify_cost_in_steps(cm, highlight)
        fig.add_annotation(x=highlight, y=v, text=f"verifying {highlight} tokens costs {v:.1f} one-token steps",
                           showarrow=True, arrowhead=2, ax=60, ay=-70, bgcolor="white")
    fig.update_layout(
        title=title or (f"Checking n tokens at once costs about one step, not n<br><sup>one-token step = {full:.2f} ms; "
                        f"KV cache of {cm.context} tokens</sup>"),
        xaxis_title="tokens in the forward (the pending token + drafted tokens)",
        yaxis_title="cost in one-token steps (ms / one-token step ms)",
        legend=dict(yanchor="top", y=0.98, x=0.02, bgcolor="rgba(255,255,255,0.8)"), height=480, margin=dict(t=90),
    )
    fig.update_xaxes(tickmode="linear", dtick=1)
    return fig


# ---------------------------------------------------------------------------------------
# agreement
# ---------------------------------------------------------------------------------------
def single_block_figure(single: Mapping, *, title: str | None = None) -> go.Figure:
    """Heatmap of the agreement with one block skipped: layers across, attention / MLP down.

    ``single``: ``AgreementProbe.single_block_agreement()`` (``{'attention': [...], 'mlp': [...]}``), or a
    mapping ``{model label: that dict}`` to stack several models on one colour scale (0..1).
    """
    items = {"": single} if "attention" in single and "mlp" in single else dict(single)
    if not items:
        raise ValueError("no agreement to draw")
    n_layers = None
    z, labels = [], []
    for label, d in items.items():
        for part, key in (("attention", "attention"), ("MLP", "mlp")):
            values = [float(v) for v in d[key]]
            if n_layers is None:
                n_layers = len(values)
            if len(values) != n_layers:
                raise ValueError("every model must have the same number of layers")
            z.append(values)
            labels.append(f"{label} · {part}" if label else part)
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(n_layers)), y=labels, zmin=0.0, zmax=1.0, colorscale="Viridis", xgap=2, ygap=2,
        texttemplate="%{z:.2f}", textfont=dict(size=11),
        hovertemplate="%{y}, layer %{x} skipped: agreement %{z:.3f}<extra></extra>",
        colorbar=dict(title="agreement", thickness=16),
    ))
    fig.update_layout(
        title=title or "Agreement with the full model when ONE block is skipped",
        xaxis_title="decoder layer whose block is skipped", yaxis_title="block skipped",
        height=max(320, 46 * len(labels) + 170), yaxis_autorange="reversed",
    )
    fig.update_xaxes(tickmode="linear", dtick=1)
    return fig


def elimination_frame(paths: Mapping[str, Sequence], n_layers: int):
    """One row per model and number of skipped blocks (0 = the full model, agreement 1): a pandas DataFrame
    with columns model, n_skipped, ratio, agreement, added (the block this round removed), skip."""
    import pandas as pd

    rows = []
    for name, path in paths.items():
        path = _check_path(path, n_layers)
        rows.append({"model": name, "n_skipped": 0, "ratio": 0.0, "agreement": 1.0, "added": "",
                     "skip": str(SkipSet())})
        previous = [False] * (2 * n_layers)
        for skip, a in path:
            mask = skip.to_mask(n_layers)
            added = [i for i, (m, p) in enumerate(zip(mask, previous)) if m and not p]
            rows.append({"model": name, "n_skipped": skip.n_skipped, "ratio": skip.ratio(n_layers),
                         "agreement": float(a), "added": ", ".join(_block_name(i, n_layers) for i in added),
                         "skip": str(skip)})
            previous = mask
    return pd.DataFrame(rows)


def agreement_at_ratio(path: Sequence, n_layers: int, ratio: float = 0.5) -> float:
    """Agreement of the path's set with round(ratio * 2L) blocks skipped (1.0 at 0 skipped)."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must be in [0, 1], got {ratio!r}")
    path = _check_path(path, n_layers)
    k = int(round(ratio * 2 * n_layers))
    if k == 0:
        return 1.0
    for skip, a in path:
        if skip.n_skipped == k:
            return float(a)
    raise ValueError(f"the path has no set with {k} blocks skipped (it covers "
                     f"{path[0][0].n_skipped}..{path[-1][0].n_skipped})")


def redundancy_figure(paths: Mapping[str, Sequence], n_layers: int, *, band: tuple[float, float] | None = None,
                      band_label: str = "skip ratios seen in training", mark_ratio: float | None = 0.5,
                      sets: Mapping[str, tuple[SkipSet, float]] | None = None,
                      title: str | None = None) -> go.Figure:
    """Agreement against blocks skipped along each model's greedy-elimination path.

    ``band``: a skip-ratio range to shade (e.g. the ratios the skip-robust recipe trained on);
    ``mark_ratio``: a vertical line with each model's agreement there;
    ``sets``: single skip sets to show as stars, {label: (skip set, agreement)} (e.g. a trained draft path).
    """
    df = elimination_frame(paths, n_layers)
    blocks = 2 * n_layers
    fig = go.Figure()
    if band is not None:
        lo, hi = band
        fig.add_vrect(x0=lo * blocks, x1=hi * blocks, fillcolor="#cccccc", opacity=0.25, line_width=0,
                      annotation_text=band_label, annotation_position="bottom left")
    notes = []
    for i, (name, part) in enumerate(df.groupby("model", sort=False)):
        colour = MODEL_COLOURS[i % len(MODEL_COLOURS)]
        fig.add_trace(go.Scatter(
            x=part["n_skipped"], y=part["agreement"], mode="lines+markers", name=name,
            line=dict(color=colour, width=3), marker=dict(size=6),
            customdata=list(zip(part["ratio"], part["added"])),
            hovertemplate=(f"{name}<br>%{{x}} blocks skipped (ratio %{{customdata[0]:.2f}})<br>"
                           "this round removed: %{customdata[1]}<br>agreement %{y:.3f}<extra></extra>"),
        ))
        if mark_ratio is not None:
            a = agreement_at_ratio(paths[name], n_layers, mark_ratio)
            notes.append(f"{name}: {a:.0%}")
    for label, (skip, a) in (sets or {}).items():
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"agreement of {label!r} must be in [0, 1], got {a}")
        skip.validate(n_layers)
        fig.add_trace(go.Scatter(
            # the legend names the star; its text stays short and below it, clear of the title and annotations
            x=[skip.n_skipped], y=[a], mode="markers+text", name=f"{label} ({a:.0%})", text=[f"{a:.0%}"],
            textposition="bottom right", marker=dict(symbol="star", size=16, color="#222222"),
            hovertemplate=f"{label}<br>{skip}<br>agreement %{{y:.3f}}<extra></extra>",
        ))
    if mark_ratio is not None:
        k = int(round(mark_ratio * blocks))
        fig.add_vline(x=k, line_dash="dot", line_color="black",
                      annotation_text=f"{k} of {blocks} skipped: " + ", ".join(notes), annotation_position="top right")
    fig.update_layout(
        title=title or "How much of the model can a draft drop? Best set found at each size (greedy elimination)",
        xaxis_title=f"blocks skipped (of {blocks}: {n_layers} attention + {n_layers} MLP)",
        yaxis_title="agreement with the full model (top-1, teacher-forced)",
        yaxis_range=[0, 1.04], legend=dict(yanchor="bottom", y=0.02, x=0.02, bgcolor="rgba(255,255,255,0.8)"),
        height=500,
    )
    fig.update_xaxes(range=[-0.5, blocks + 0.5], tickmode="linear", dtick=2)
    return fig


# ---------------------------------------------------------------------------------------
# what it buys: the modelled objective along the paths
# ---------------------------------------------------------------------------------------
def predicted_cost_frame(cost_model, path: Sequence, *, alphas: Sequence[float] = (), label: str = "") -> "object":
    """Predicted cost per generated token of every set on ``path`` (plus nothing skipped).

    Rows for the path's own agreement (``alpha_source`` = 'measured') and for each fixed alpha in
    ``alphas`` ('fixed'); columns model, n_skipped, ratio, alpha, alpha_source, ms_per_token, gamma,
    tokens_per_step, draft_ms, speedup. The draft length gamma is the best for that alpha
    (:func:`labkit.costmodel.predict`).
    """
    import pandas as pd

    from .costmodel import predict

    L = cost_model.n_layers
    path = [(SkipSet(), 1.0)] + _check_path(path, L)
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


def predicted_cost_figure(cost_model, paths: Mapping[str, Sequence], *, alphas: Sequence[float] = (0.6, 0.8, 0.9),
                          title: str | None = None) -> go.Figure:
    """Predicted ms per generated token against blocks skipped.

    Thin grey lines: a fixed agreement alpha (drawn on the first path's sets), showing that if alpha did
    not fall, skipping more would always pay. Thick lines: each model's own measured agreement along its
    path, with its cheapest set starred. Dashed: plain decoding (one full step per token).
    """
    if not paths:
        raise ValueError("no path to draw")
    cm = cost_model
    L = cm.n_layers
    fig = go.Figure()
    first = next(iter(paths))
    fixed = predicted_cost_frame(cm, paths[first], alphas=alphas, label=first)
    greys = ["#d9d9d9", "#bdbdbd", "#969696", "#737373", "#525252"]
    for j, alpha in enumerate(alphas):
        part = fixed[(fixed.alpha_source == "fixed") & (fixed.alpha == float(alpha))]
        fig.add_trace(go.Scatter(
            x=part["n_skipped"], y=part["ms_per_token"], mode="lines", name=f"if agreement stayed at α = {alpha:g}",
            line=dict(color=greys[min(j + 1, len(greys) - 1)], width=1.5), customdata=part["gamma"],
            hovertemplate=f"α = {alpha:g}<br>%{{x}} skipped: %{{y:.2f}} ms/token (γ = %{{customdata}})<extra></extra>",
        ))
    for i, (name, path) in enumerate(paths.items()):
        part = predicted_cost_frame(cm, path, label=name)
        colour = MODEL_COLOURS[i % len(MODEL_COLOURS)]
        fig.add_trace(go.Scatter(
            x=part["n_skipped"], y=part["ms_per_token"], mode="lines+markers", name=f"{name}: its measured agreement",
            line=dict(color=colour, width=3), marker=dict(size=5),
            customdata=list(zip(part["alpha"], part["gamma"], part["speedup"])),
            hovertemplate=(f"{name}<br>%{{x}} skipped: α = %{{customdata[0]:.2f}}, best γ = %{{customdata[1]}}<br>"
                           "%{y:.2f} ms/token (%{customdata[2]:.2f}x)<extra></extra>"),
        ))
        best = part.loc[part["ms_per_token"].idxmin()]
        fig.add_trace(go.Scatter(
            x=[best["n_skipped"]], y=[best["ms_per_token"]], mode="markers+text",
            marker=dict(symbol="star", size=16, color=colour, line=dict(color="black", width=1)),
            text=[f"{best['speedup']:.2f}x"], textposition="bottom center", showlegend=False,
            hovertemplate=(f"{name}: cheapest set on the path<br>{int(best['n_skipped'])} skipped, "
                           f"α = {best['alpha']:.2f}, γ = {int(best['gamma'])}: %{{y:.2f}} ms/token<extra></extra>"),
        ))
    fig.add_trace(go.Scatter(x=[0, 2 * L], y=[cm.full_step_ms] * 2, mode="lines", line=dict(color="black", dash="dash"),
                             name=f"plain decoding: {cm.full_step_ms:.2f} ms/token (one full step)",
                             hovertemplate="plain decoding: %{y:.2f} ms/token<extra></extra>"))
    fig.update_layout(
        title=title or ("Predicted cost per token, f = (γ·draft ms + verify ms[γ]) / E[tokens per step]<br>"
                        "<sup>along the greedy-elimination paths; γ = the best draft length for each α</sup>"),
        xaxis_title=f"blocks skipped (of {2 * L})", yaxis_title=f"predicted {UNIT} (lower is better)",
        legend=dict(yanchor="bottom", y=0.02, x=0.01, xanchor="left", bgcolor="rgba(255,255,255,0.85)"),
        height=540, margin=dict(t=90),
    )
    ymax = max(t.y.max() if hasattr(t.y, "max") else max(t.y) for t in fig.data if t.y is not None and len(t.y))
    fig.update_yaxes(range=[0, min(ymax, 2.5 * cm.full_step_ms) * 1.05])
    fig.update_xaxes(tickmode="linear", dtick=2)
    return fig


# ---------------------------------------------------------------------------------------
# one completion, token by token
# ---------------------------------------------------------------------------------------
@dataclass
class TokenComparison:
    """A prompt's greedy continuation by the full model and by the draft (the model minus ``skip``)."""

    prompt_ids: list[int]
    full: list[int]              # the full model's greedy tokens
    draft_forced: list[int]      # the draft's top-1 at each position, given the full model's prefix
    draft_free: list[int]        # the draft's own greedy continuation (fed its own tokens)
    skip: SkipSet

    @property
    def agree(self) -> list[bool]:
        return [a == b for a, b in zip(self.draft_forced, self.full)]

    @property
    def agreement(self) -> float:
        return sum(self.agree) / len(self.full) if self.full else float("nan")

    @property
    def first_divergence(self) -> int | None:
        """First position where the draft's own continuation leaves the full model's (None: never)."""
        return next((i for i, (a, b) in enumerate(zip(self.draft_free, self.full)) if a != b), None)

    @property
    def verify_steps(self) -> int:
        """Steps (verify forwards) greedy self-speculative decoding takes for these tokens if the draft
        never stops early: each disagreement ends a step (the full model puts its own token there), and a
        last step ends the run, whose final token the full model emits whatever the draft said."""
        return sum(not a for a in self.agree[:-1]) + 1 if self.full else 0

    def accepted_runs(self) -> list[int]:
        """Lengths of the runs of agreeing tokens between disagreements."""
        runs, current = [], 0
        for a in self.agree:
            if a:
                current += 1
            else:
                runs.append(current)
                current = 0
        runs.append(current)
        return runs


@torch.inference_mode()
def token_comparison(model, tokenizer, prompt_text: str, skip: SkipSet, n_tokens: int = 32) -> TokenComparison:
    """The full model's greedy continuation of ``prompt_text``, and the draft's guesses for it.

    ``draft_forced``: one forward of the skipped model over prompt + full continuation (teacher
    forcing: at every position the draft sees the full model's tokens, as after each verification);
    ``draft_free``: the skipped model continuing the prompt on its own (greedy, with a KV cache, as it
    drafts). EOS is not special here: both run for ``n_tokens``.
    """
    from .decoding import autoregressive_generate

    if not isinstance(skip, SkipSet):
        raise TypeError(f"skip must be a labkit.SkipSet, got {type(skip).__name__}")
    skip.validate(model.config.num_hidden_layers)
    ids = tokenizer(prompt_text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    if ids.shape[1] == 0:
        raise ValueError("empty prompt")
    n_prompt = ids.shape[1]
    full = autoregressive_generate(model, ids, n_tokens, eos_token_id=[]).new_tokens
    sequence = torch.tensor([ids[0].tolist() + full[:-1]]) if full else ids
    with skipping(model, skip):
        logits = model(input_ids=sequence, use_cache=False).logits[0]                    # (T, V)
        forced = logits[n_prompt - 1:].argmax(dim=-1).tolist()[: len(full)]
        free = autoregressive_generate(model, ids, n_tokens, eos_token_id=[]).new_tokens
    return TokenComparison(prompt_ids=ids[0].tolist(), full=full, draft_forced=forced, draft_free=free, skip=skip)


def _visible(text: str) -> str:
    return html.escape(visible(text))


_CELL = ("padding:2px 5px;border:1px solid #ffffff;font-family:monospace;font-size:13px;white-space:pre;"
         "min-width:2.4em;text-align:center;")


def token_comparison_html(comparison: TokenComparison, tokenizer, *, per_row: int = 12,
                          labels: tuple[str, str] = ("full model", "draft")) -> str:
    """An HTML table, ``per_row`` positions per block: the full model's token, the draft's token given the
    same prefix (green: the same, red: different) and the draft's own continuation (grey after it diverged)."""
    c = comparison
    if per_row < 1:
        raise ValueError("per_row must be >= 1")
    full_name, draft_name = labels
    dec = lambda t: _visible(tokenizer.decode([t]))                                 # noqa: E731
    divergence = c.first_divergence
    legend = (f'<span style="background:{AGREE_COLOUR};color:white;padding:1px 5px">the draft agrees</span> '
              f'<span style="background:{DISAGREE_COLOUR};color:white;padding:1px 5px">the draft disagrees '
              f'(the full model\'s token replaces it)</span> '
              '<span style="background:#eeeeee;color:#777777;padding:1px 5px">the draft alone, after it diverged</span>'
              ' &nbsp; ⏎ newline, ␣ space')
    parts = ['<div style="font-family:sans-serif">', f'<div style="margin:6px 0">{legend}</div>']
    for start in range(0, len(c.full), per_row):
        cols = range(start, min(start + per_row, len(c.full)))
        rows = [f'<td style="{_CELL}color:#999999">{i}</td>' for i in cols]
        full = [f'<td style="{_CELL}background:#f4f4f4">{dec(c.full[i])}</td>' for i in cols]
        forced = []
        for i in cols:
            ok = c.draft_forced[i] == c.full[i]
            forced.append(f'<td style="{_CELL}background:{AGREE_COLOUR if ok else DISAGREE_COLOUR};color:white" '
                          f'title="position {i}: draft {html.escape(repr(tokenizer.decode([c.draft_forced[i]])))}, '
                          f'full model {html.escape(repr(tokenizer.decode([c.full[i]])))}">'
                          f'{dec(c.draft_forced[i])}</td>')
        free = []
        for i in cols:
            gone = divergence is not None and i >= divergence
            style = "background:#eeeeee;color:#777777" if gone else "background:#e5f5e0"
            free.append(f'<td style="{_CELL}{style}">{dec(c.draft_free[i])}</td>' if i < len(c.draft_free)
                        else f'<td style="{_CELL}"></td>')
        head = lambda text: f'<th style="{_CELL}text-align:right;font-family:sans-serif;background:white">{text}</th>'  # noqa: E731
        parts.append('<table style="border-collapse:collapse;margin-bottom:8px">'
                     f'<tr>{head("position")}{"".join(rows)}</tr>'
                     f'<tr>{head(full_name + " (greedy)")}{"".join(full)}</tr>'
                     f'<tr>{head(draft_name + ", same prefix")}{"".join(forced)}</tr>'
                     f'<tr>{head(draft_name + " on its own")}{"".join(free)}</tr></table>')
    runs = c.accepted_runs()
    div_text = (f"its own continuation leaves the full model's at position {divergence}" if divergence is not None
                else "its own continuation never leaves the full model's")
    parts.append(f'<div style="font-family:sans-serif">{sum(c.agree)} of {len(c.full)} tokens agree '
                 f'({c.agreement:.0%}); longest agreeing run {max(runs)} tokens; {div_text}.</div></div>')
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------
# a wall-clock check
# ---------------------------------------------------------------------------------------
def measure_speedup(model, input_ids, skip: SkipSet, *, policies: Mapping | None = None, max_new_tokens: int = 48,
                    repeats: int = 3):
    """Wall clock of greedy plain decoding and of self-speculative decoding with ``skip``, one row each.

    ``policies``: ``{label: draft policy}`` (default: an :class:`~labkit.AdaptiveThreshold`); each run
    gets a fresh copy. Runs are interleaved ``repeats`` times and the medians kept (a burst of background
    load hits every row alike). Returns a pandas DataFrame indexed by 'plain decoding' and the labels, with
    ms_per_token (prefill included, alike for all), speedup, acceptance_rate, tokens_per_step and identical
    (the output equals plain greedy decoding token for token, as greedy speculative decoding guarantees).
    """
    import copy

    import pandas as pd

    from .decoding import autoregressive_generate, speculative_generate
    from .policies import AdaptiveThreshold, DraftPolicy

    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    policies = dict(policies) if policies is not None else {"adaptive threshold": AdaptiveThreshold()}
    if not policies:
        raise ValueError("give at least one policy")
    for label, policy in policies.items():
        if not isinstance(policy, DraftPolicy):
            raise TypeError(f"policy {label!r} is a {type(policy).__name__}, not a labkit draft policy")
    autoregressive_generate(model, input_ids, 4, eos_token_id=[])                       # warm-up
    for policy in policies.values():
        speculative_generate(model, input_ids, skip=skip, policy=copy.deepcopy(policy), max_new_tokens=4,
                             eos_token_id=[])
    times: dict[str, list[float]] = {"plain decoding": [], **{label: [] for label in policies}}
    identical = dict.fromkeys(policies, True)
    summaries = {}
    for _ in range(repeats):
        plain = autoregressive_generate(model, input_ids, max_new_tokens, eos_token_id=[])
        times["plain decoding"].append(plain.ms_per_token)
        for label, policy in policies.items():
            out = speculative_generate(model, input_ids, skip=skip, policy=copy.deepcopy(policy),
                                       max_new_tokens=max_new_tokens, eos_token_id=[])
            times[label].append(out.ms_per_token)
            identical[label] &= out.new_tokens == plain.new_tokens
            summaries[label] = out.trace.summary()
    plain_ms = statistics.median(times["plain decoding"])
    rows = [{"decoding": "plain decoding", "ms_per_token": plain_ms, "speedup": 1.0, "acceptance_rate": float("nan"),
             "tokens_per_step": 1.0, "identical": True}]
    for label in policies:
        ms = statistics.median(times[label])
        rows.append({"decoding": label, "ms_per_token": ms, "speedup": plain_ms / ms,
                     "acceptance_rate": summaries[label]["acceptance_rate"],
                     "tokens_per_step": summaries[label]["tokens_per_step"], "identical": identical[label]})
    return pd.DataFrame(rows).set_index("decoding")
