"""Notebook 08's glue: the family map's contents, outside prompts, the "which one when" sentences written from
the measured numbers, and two explorers (exit layer, gate threshold).

Every sentence here is chosen by the data it describes (which drafter is fastest, whether the gate helps), so
it stays true in FAST mode, in full mode and after any rerun; the tests feed each one data that reverses it.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from ..measure.gate import gate_preview
from ..measure.saturation import Saturation
from ..viz.drafters import exit_layer_figure, gate_signal_figure, gate_signal_traces
from ..viz.style import PALETTE
from ..viz.widgets import as_widget, update_widget

__all__ = ["FAMILY_METHODS", "LAB_CHAPTERS", "combo_exit_layer",
           "fastest_sentence", "early_exit_vs_skip_sentence", "gate_sentences", "memory_sentence", "lookup_sentence",
           "saturation_sentence", "roc_sentence", "profile_sentences",
           "gate_table_sentence", "which_one_when", "ExitLayerExplorer", "GateExplorer"]

# ---------------------------------------------------------------------------------------------------------
# the survey's map of the family, and the lab's chapters on it
# ---------------------------------------------------------------------------------------------------------
FAMILY_METHODS = [
    {"key": "early exit", "label": "Early exit<br>(depth-adaptive decoders, CALM, SkipDecode)",
     "group": "fewer parameters per token", "x": 0.2, "y": 0.82, "feeds": ("self-spec",),
     "refs": "Elbayad et al. 2020; Schuster et al. 2022 (CALM); Del Corro et al. 2023 (SkipDecode)"},
    {"key": "layer skip", "label": "Layer skipping<br>(drop blocks for some tokens)", "group": "fewer parameters per token",
     "x": 0.2, "y": 0.62, "feeds": ("self-spec",), "refs": "Zhang et al. 2023 (Draft & Verify); Elhoushi et al. 2024 (LayerSkip)"},
    {"key": "sparsity", "label": "Contextual sparsity<br>(skip heads / neurons per input)",
     "group": "fewer parameters per token", "x": 0.2, "y": 0.42, "refs": "Liu et al. 2023 (Deja Vu)"},
    {"key": "moe", "label": "Mixture of experts<br>(each token uses a few experts)", "group": "fewer parameters per token",
     "x": 0.2, "y": 0.22, "refs": "Shazeer et al. 2017; Fedus et al. 2022"},
    {"key": "speculative", "label": "Speculative decoding<br>(small draft model, one verify pass)",
     "group": "more tokens per forward", "x": 0.8, "y": 0.82, "feeds": ("self-spec",),
     "refs": "Leviathan et al. 2023; Chen et al. 2023"},
    {"key": "sampling", "label": "Speculative sampling<br>(lossless: accept with min(1, p/q))",
     "group": "more tokens per forward", "x": 0.8, "y": 0.62, "refs": "Leviathan et al. 2023; Chen et al. 2023"},
    {"key": "lookup", "label": "Prompt lookup<br>(draft copied from the context)", "group": "more tokens per forward",
     "x": 0.8, "y": 0.42, "refs": "Saxena 2023 (prompt lookup decoding)"},
    {"key": "parallel", "label": "Parallel decoding<br>(Jacobi, lookahead: no draft)", "group": "more tokens per forward",
     "x": 0.8, "y": 0.22, "refs": "Santilli et al. 2023; Fu et al. 2024 (lookahead)"},
    {"key": "self-spec", "label": "<b>Self-speculative<br>decoding</b><br>draft: fewer parameters<br>verify: many tokens / pass",
     "group": "both", "x": 0.5, "y": 0.62, "refs": "Zhang et al. 2023 (Draft & Verify)"},
    {"key": "plain", "label": "Plain decoding<br>(one token per full forward)", "group": "baseline", "x": 0.5, "y": 0.22,
     "refs": "the baseline every speedup is measured against"},
]

#: The lab's chapters, each placed on the method it teaches.
LAB_CHAPTERS = [
    {"number": "00", "title": "setup", "method": "plain"},
    {"number": "01", "title": "Bayesian optimization (searching skip sets)", "method": "layer skip"},
    {"number": "02", "title": "layer-skip draft", "method": "layer skip"},
    {"number": "03", "title": "draft/verify timeline", "method": "self-spec"},
    {"number": "04", "title": "playground", "method": "self-spec"},
    {"number": "05", "title": "speculative sampling", "method": "sampling"},
    {"number": "06", "title": "parallel decoding", "method": "parallel"},
    {"number": "07", "title": "adaptive skip sets", "method": "sparsity"},
    {"number": "08", "title": "choosing a drafter (early exit, gate)", "method": "early exit"},
]

def combo_exit_layer(sat: Saturation, min_alpha: float = 0.8) -> int:
    """The exit layer to combine with prompt lookup: the shallowest E < L whose logit-lens α reaches
    ``min_alpha`` (else L - 1)."""
    alpha = sat.exit_alpha()
    return next((e for e in range(1, sat.n_layers) if alpha[e] >= min_alpha), sat.n_layers - 1)


# ---------------------------------------------------------------------------------------------------------
# "which one when", written from the numbers
# ---------------------------------------------------------------------------------------------------------
def _rows(table: pd.DataFrame) -> pd.DataFrame:
    rows = table.reset_index()
    return rows[rows["drafter"] != "plain"]


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def _compare(a: float, b: float, tol: float) -> int:
    """+1: a clearly above b, -1: clearly below, 0: within ``tol`` (relative)."""
    if abs(a - b) <= tol * max(abs(a), abs(b)):
        return 0
    return 1 if a > b else -1


def fastest_sentence(table: pd.DataFrame) -> str:
    rows = _rows(table).sort_values("speedup", ascending=False)
    best = rows.iloc[0]
    if best["speedup"] < 1.0:
        return (f"No drafter beats plain decoding on these prompts: the best, {best['drafter']}, runs at "
                f"{best['speedup']:.2f}x.")
    runner = rows.iloc[1] if len(rows) > 1 else None
    tail = f", ahead of {runner['drafter']} ({runner['speedup']:.2f}x)" if runner is not None else ""
    return (f"{best['drafter']} is the fastest on these prompts: {best['speedup']:.2f}x plain decoding "
            f"(acceptance {_pct(best['acceptance'])}, {best['tokens_per_step']:.2f} tokens per step){tail}.")


def early_exit_vs_skip_sentence(table: pd.DataFrame, n_layers: int, tol: float = 0.03) -> str:
    rows = _rows(table)
    rows = rows[rows["gate"].isna()]
    skip = rows[rows["family"] == "layer skip"]
    exits = rows[rows["family"] == "early exit"]
    if skip.empty or exits.empty:
        return "Early exit and layer skip were not both measured."
    s, e = skip.iloc[0], exits.sort_values("speedup", ascending=False).iloc[0]
    verdict = {1: "layer skip is faster", -1: "early exit is faster", 0: "the two are within measurement noise"}[
        _compare(s["speedup"], e["speedup"], tol)]
    acc = {1: "higher", -1: "lower", 0: "about the same"}[_compare(s["acceptance"], e["acceptance"], 0.02)]
    return (f"Layer skip (searched) reaches {s['speedup']:.2f}x at acceptance {_pct(s['acceptance'])}; the best early "
            f"exit, E={int(e['exit_layer'])} of {n_layers} layers, reaches {e['speedup']:.2f}x at acceptance "
            f"{_pct(e['acceptance'])}: {verdict}, with {acc} acceptance for layer skip.")


def gate_sentences(sweep: pd.DataFrame, tol: float = 0.02) -> list[str]:
    """One sentence per (prompt set, policy): does some gate threshold beat no gate, by more than ``tol``?"""
    out = []
    for (prompts, policy), sel in sweep.groupby(["prompts", "policy"], sort=False):
        base = sel[sel["threshold"].isna()]
        gated = sel[sel["threshold"].notna()]
        if base.empty or gated.empty:
            continue
        b, best = base.iloc[0], gated.sort_values("speedup", ascending=False).iloc[0]
        verdict = _compare(best["speedup"], b["speedup"], tol)
        head = f"On {prompts} prompts with the {policy}"
        if verdict > 0:
            out.append(f"{head}, the gate helps: at threshold {best['threshold']:g} it runs at {best['speedup']:.2f}x "
                       f"against {b['speedup']:.2f}x ungated (acceptance {_pct(b['acceptance'])} -> "
                       f"{_pct(best['acceptance'])}, {best['gated_fraction']:.0%} of steps decoded plainly).")
        elif verdict < 0:
            out.append(f"{head}, the gate does not help: no threshold beats the ungated {b['speedup']:.2f}x (the best "
                       f"gated, threshold {best['threshold']:g}, runs at {best['speedup']:.2f}x).")
        else:
            out.append(f"{head}, the gate makes no measurable difference: best threshold {best['threshold']:g} at "
                       f"{best['speedup']:.2f}x against {b['speedup']:.2f}x ungated (within {tol:.0%}).")
    return out


def memory_sentence(table: pd.DataFrame, target_parameters: int) -> str:
    rows = _rows(table)
    rows = rows[rows["gate"].isna()]
    sep = rows[rows["family"] == "separate model"]
    selfish = rows[rows["extra_parameters"] == 0]
    if sep.empty:
        return "Every drafter measured here reuses the target's own weights: no extra parameters."
    m, best_self = sep.iloc[0], selfish.sort_values("speedup", ascending=False).iloc[0]
    faster = _compare(m["speedup"], best_self["speedup"], 0.03)
    how = {1: "and is faster than", -1: "yet is slower than", 0: "and is about as fast as"}[faster]
    return (f"Only the separate model adds memory: {int(m['extra_parameters']):,} parameters "
            f"({m['extra_parameters'] / target_parameters:.0%} of the target's) plus a KV cache of its own, {how} the "
            f"best drafter that adds none ({best_self['drafter']}, {best_self['speedup']:.2f}x against "
            f"{m['speedup']:.2f}x).")


def lookup_sentence(table: pd.DataFrame) -> str:
    rows = _rows(table)
    rows = rows[rows["gate"].isna()].set_index("drafter")
    if "prompt lookup" not in rows.index:
        return "Prompt lookup was not measured."
    combos = rows[rows["family"] == "combination"]
    alone = rows.loc["prompt lookup"]
    if combos.empty:
        return f"Prompt lookup alone runs at {alone['speedup']:.2f}x."
    best = combos.sort_values("speedup", ascending=False).iloc[0]
    partner = best.name.replace("lookup + ", "")
    partner_speed = rows.loc[partner, "speedup"] if partner in rows.index else float("nan")
    verdict = _compare(best["speedup"], max(alone["speedup"], partner_speed if not math.isnan(partner_speed) else 0), 0.03)
    how = {1: "beats both parts alone", -1: "does not beat its best part alone", 0: "is about as fast as its best part"}[verdict]
    return (f"Prompt lookup costs nothing to draft: alone it runs at {alone['speedup']:.2f}x; in front of a model "
            f"drafter the best combination, {best.name}, runs at {best['speedup']:.2f}x ({partner} alone: "
            f"{partner_speed:.2f}x), so the combination {how}.")


def gate_table_sentence(table: pd.DataFrame, tol: float = 0.03) -> str:
    """Which drafters the gate sped up in the side-by-side table (gated row vs the same drafter ungated), and
    whether those are the ones whose drafts were accepted least."""
    rows = _rows(table)
    plain_rows = rows[rows["gate"].isna()].set_index("drafter")
    pairs = []
    for _, g in rows[rows["gate"].notna()].iterrows():
        base = g["drafter"].rsplit(" + gate ", 1)[0]
        if base in plain_rows.index:
            b = plain_rows.loc[base]
            pairs.append((base, _compare(g["speedup"], b["speedup"], tol), float(b["acceptance"])))
    if not pairs:
        return "No drafter was measured both with and without the gate."
    helped = [p for p in pairs if p[1] > 0]
    others = [p for p in pairs if p[1] <= 0]
    gate = rows["gate"].dropna().iloc[0]
    head = f"In the side-by-side table the gate ({gate:g}) speeds up {len(helped)} of {len(pairs)} drafters"
    if not helped:
        return head + "."
    names = ", ".join(p[0] for p in helped)
    if not others:
        return f"{head}: all of them ({names})."
    acc_h, acc_o = float(np.median([p[2] for p in helped])), float(np.median([p[2] for p in others]))
    which = ("the ones whose drafts were accepted least" if acc_h < acc_o - 0.02 else
             "not the ones whose drafts were accepted least" if acc_h > acc_o + 0.02 else
             "with no clear link to how often their drafts were accepted")
    return (f"{head} ({names}): {which} (median ungated acceptance {_pct(acc_h)} against {_pct(acc_o)} for the "
            f"drafters it did not speed up).")


def which_one_when(table: pd.DataFrame, sweep: pd.DataFrame | None, *, n_layers: int,
                   target_parameters: int) -> list[str]:
    """The conclusion, one sentence per question, every clause chosen by the numbers."""
    out = [fastest_sentence(table), early_exit_vs_skip_sentence(table, n_layers), lookup_sentence(table),
           memory_sentence(table, target_parameters), gate_table_sentence(table)]
    if sweep is not None:
        out.extend(gate_sentences(sweep))
    return out


def saturation_sentence(sats: dict[str, Saturation], layer: int) -> str:
    """How many tokens each model already gets right after ``layer`` of its layers, the earliest first."""
    parts = sorted(((float(sat.fraction_saturated()[sat.layer_stage(layer)]), name, sat.n_layers)
                    for name, sat in sats.items()), reverse=True)
    text = "; ".join(f"{name}: {frac:.0%}" for frac, name, _ in parts)
    head = (f"After {layer} of {parts[0][2]} layers the logit lens already gives the final token for {text}")
    if len(parts) > 1:
        gap = parts[0][0] - parts[-1][0]
        head += (f": {parts[0][1]}'s first {layer} layers are already right for {100 * gap:.0f} percentage points more "
                 f"tokens than {parts[-1][1]}'s" if gap > 0.02 else ", about the same")
    return head + "."


def roc_sentence(rocs: dict[str, dict[str, dict]]) -> list[str]:
    """Per model: CALM's signals ranked by AUC, and whether the best is better than a coin flip."""
    out = []
    for name, signals in rocs.items():
        ranked = sorted(signals.items(), key=lambda kv: kv[1]["auc"], reverse=True)
        best, worst = ranked[0], ranked[-1]
        a = worst[1]["auc"]
        coin = "worse than a coin flip (0.5)" if a < 0.45 else "close to a coin flip (0.5)" if a < 0.55 else "better than a coin flip"
        out.append(f"{name}: the {best[0]} predicts best (AUC {best[1]['auc']:.2f}), the {worst[0]} worst "
                   f"(AUC {worst[1]['auc']:.2f}, {coin}).")
    return out


def profile_sentences(profiles: dict[str, dict], ours: str = "labkit", theirs: str = "transformers") -> list[str]:
    """Why the two early-exit implementations differ, from their profiles (see labkit.measure.early_exit)."""
    a, b = profiles[ours], profiles[theirs]
    same = a["steps"] == b["steps"] and abs(a["acceptance"] - b["acceptance"]) < 1e-9
    out = [("Both drafted the same tokens (same number of steps, same acceptance "
            f"{_pct(a['acceptance'])}), so every difference below is cost, not luck." if same else
            f"Their drafts differ ({a['steps']} vs {b['steps']} steps, acceptance {_pct(a['acceptance'])} vs "
            f"{_pct(b['acceptance'])}), so part of the difference is the drafts themselves.")]
    ratio = b["first_layer_tokens"] / a["first_layer_tokens"] if a["first_layer_tokens"] else float("nan")
    out.append(f"The first layer read {b['first_layer_tokens']} tokens in {theirs} and {a['first_layer_tokens']} in "
               f"{ours} ({ratio:.1f}x): {theirs} runs the early layers again in its verify forward (and prefills the "
               f"prompt a second time for its draft cache), {ours} keeps what the draft computed.")
    verify_a = a["late_ms_per_token"] + a["full_ms_per_token"]
    verify_b = b["full_ms_per_token"]
    out.append(f"Model calls that verify (and prefill) cost {verify_b:.2f} ms per token in {theirs} against "
               f"{verify_a:.2f} in {ours}; outside model calls (the decoding loop) {b['outside_ms_per_token']:.2f} "
               f"against {a['outside_ms_per_token']:.2f} ms per token.")
    faster = theirs if b["ms_per_token"] < a["ms_per_token"] else ours
    out.append(f"In all, {b['ms_per_token']:.2f} ms per token in {theirs} and {a['ms_per_token']:.2f} in {ours}: "
               f"{faster} is faster on this run.")
    return out


# ---------------------------------------------------------------------------------------------------------
# explorers
# ---------------------------------------------------------------------------------------------------------
class ExitLayerExplorer:
    """A slider over the measured exit layers: the chosen E is outlined in the exit-layer figure and its numbers
    (measured acceptance, the lens' α, speedup, against layer skip) are written below. ``.widget`` to display."""

    def __init__(self, table: pd.DataFrame, exit_alpha: dict[int, float] | None = None):
        import ipywidgets as widgets

        self.table, self.exit_alpha = table, exit_alpha or {}
        self.rows = table[(table["family"] == "early exit") & table["gate"].isna()].sort_values("exit_layer")
        self.layers = self.rows["exit_layer"].astype(int).tolist()
        if not self.layers:
            raise ValueError("the table has no ungated early-exit rows")
        start = self.layers[int(np.argmax(self.rows["speedup"].to_numpy()))]
        self.figure = as_widget(exit_layer_figure(table, self.exit_alpha, selected=start))
        self.slider = widgets.SelectionSlider(options=self.layers, value=start, description="exit layer E",
                                              continuous_update=True, layout=widgets.Layout(width="420px"))
        self.readout = widgets.HTML()
        self.slider.observe(lambda change: self.update(), names="value")
        self.widget = widgets.VBox([self.slider, self.figure, self.readout])
        self.update()

    def update(self) -> None:
        e = int(self.slider.value)
        row = self.rows[self.rows["exit_layer"] == e].iloc[0]
        update_widget(self.figure, {0: {"marker.line.color": [PALETTE["current"] if x == e else "rgba(0,0,0,0)"
                                                              for x in self.layers],
                                        "marker.line.width": [3 if x == e else 0 for x in self.layers]},
                                    len(self.figure.data) - 1: {"x": [e], "y": [float(row["speedup"])]}},
                      layout={"title.text": f"Early exit: E = {e} selected"})
        alpha = self.exit_alpha.get(e, float("nan"))
        self.readout.value = (f"<b>E = {e}</b>: speedup {row['speedup']:.2f}x, acceptance {_pct(row['acceptance'])} "
                              f"(the logit lens says {_pct(alpha)} of tokens are already final after layer {e}), "
                              f"{row['tokens_per_step']:.2f} tokens per step.")


class GateExplorer:
    """A threshold slider and a prompt-set/policy dropdown over the ungated runs' steps: the histogram splits the
    steps the gate would keep from those it would decode plainly, and the readout previews the gate (fraction
    gated, acceptance kept vs gated away) beside the measured sweep's nearest threshold. ``.widget``."""

    def __init__(self, signal: pd.DataFrame, sweep: pd.DataFrame, threshold: float = 0.4):
        import ipywidgets as widgets

        self.signal, self.sweep = signal, sweep
        keys = list(dict.fromkeys(zip(signal["prompts"], signal["policy"])))
        if not keys:
            raise ValueError("no ungated steps to explore")
        self.choice = widgets.Dropdown(options=[(f"{p} · {q}", (p, q)) for p, q in keys], value=keys[0],
                                       description="runs", layout=widgets.Layout(width="420px"))
        self.slider = widgets.FloatSlider(value=threshold, min=0.0, max=1.0, step=0.05, description="gate",
                                          readout_format=".2f", continuous_update=True, layout=widgets.Layout(width="420px"))
        self.figure = as_widget(gate_signal_figure(self._selected(), threshold))
        self.readout = widgets.HTML()
        self.last_update_ms = float("nan")
        for control in (self.slider, self.choice):
            control.observe(lambda change: self.update(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.choice, self.slider]), self.figure, self.readout])
        self.update()

    def _selected(self) -> pd.DataFrame:
        p, q = self.choice.value
        return self.signal[(self.signal["prompts"] == p) & (self.signal["policy"] == q)]

    def update(self) -> None:
        t0 = time.perf_counter()
        t, sel = float(self.slider.value), self._selected()
        update_widget(self.figure, {i: {"x": values} for i, values in enumerate(gate_signal_traces(sel, t))},
                      layout={"shapes[0].x0": t, "shapes[0].x1": t, "shapes[1].x1": t, "annotations[0].x": t,
                              "annotations[0].text": f"gate {t:.2f}: steps left of here go plain"})
        preview = gate_preview(sel, t)
        p, q = self.choice.value
        measured = self.sweep[(self.sweep["prompts"] == p) & (self.sweep["policy"] == q)]
        nearest = measured.iloc[int(np.argmin(np.abs(measured["threshold"].fillna(0.0).to_numpy() - t)))]
        label = "no gate" if math.isnan(nearest["threshold"]) else f"gate {nearest['threshold']:g}"
        self.readout.value = (
            f"A gate at {t:.2f} would decode {preview['gated_fraction']:.0%} of these steps plainly; the drafts it keeps "
            f"had acceptance {_pct(preview['acceptance_kept'])}, those it drops {_pct(preview['acceptance_gated'])} "
            f"({preview['accepted_tokens_lost']:.0%} of all accepted tokens). The previous token's confidence predicts the "
            f"first drafted token's acceptance with AUC {preview['auc']:.2f}. Measured nearest setting ({label}): "
            f"{nearest['speedup']:.2f}x, acceptance {_pct(nearest['acceptance'])}.")
        self.last_update_ms = 1e3 * (time.perf_counter() - t0)
