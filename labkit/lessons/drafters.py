"""Notebooks 08 and 09's glue: the family map's contents, the sentences written from the measured numbers
(CALM's signals, the two early exits, the gate against its random control, "which one when"), and two
explorers (exit layer, gate threshold).

Where a sentence compares timings it reads their min–max over interleaved repetitions (``speedup_min`` /
``speedup_max``, ``ms_min`` / ``ms_max``; AUC intervals for the exit signals) and says "within the noise" when the
ranges overlap; a table without ranges falls back to a relative tolerance.

Every sentence here is chosen by the data it describes (which drafter is fastest, whether the gate helps), so
it stays true in FAST mode, in full mode and after any rerun; the tests feed each one data that reverses it.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from ..measure.signals.gate import gate_preview
from ..measure.signals.saturation import Saturation
from ..viz.drafters import exit_layer_figure, gate_signal_figure, gate_signal_traces
from ..viz.style import PALETTE
from ..viz.widgets import as_widget, update_widget
from .claims import difference_se, drafted_tokens, join, overlaps, proportions_differ

__all__ = ["FAMILY_METHODS", "LAB_CHAPTERS", "combo_exit_layer",
           "fastest_sentence", "early_exit_vs_skip_sentence", "memory_sentence", "lookup_sentence",
           "saturation_sentence", "roc_sentence", "profile_sentences",
           "gate_control_sentences", "which_one_when", "ExitLayerExplorer", "GateExplorer"]

# ---------------------------------------------------------------------------------------------------------
# the survey's map of the family, and the lab's chapters on it
# ---------------------------------------------------------------------------------------------------------
FAMILY_METHODS = [
    {"key": "early exit", "label": "Early exit<br>(depth-adaptive decoders, CALM, SkipDecode)",
     "group": "fewer parameters per token", "x": 0.2, "y": 0.82, "feeds": ("self-spec",),
     "refs": "Elbayad et al. 2020; Schuster et al. 2022 (CALM); Del Corro et al. 2023 (SkipDecode)"},
    {"key": "layer skip", "label": "Layer skipping<br>(drop blocks for some tokens)",
     "group": "fewer parameters per token", "x": 0.2, "y": 0.62, "feeds": ("self-spec",),
     "refs": "Zhang et al. 2023 (Draft & Verify); Elhoushi et al. 2024 (LayerSkip)"},
    {"key": "sparsity", "label": "Contextual sparsity<br>(skip heads / neurons per input)",
     "group": "fewer parameters per token", "x": 0.2, "y": 0.42, "feeds": ("self-spec",),
     "refs": "Liu et al. 2023 (Deja Vu); Song et al. 2023 (PowerInfer)"},
    {"key": "moe", "label": "Mixture of experts<br>(each token uses a few experts)",
     "group": "fewer parameters per token", "x": 0.2, "y": 0.22, "refs": "Shazeer et al. 2017; Fedus et al. 2022"},
    {"key": "speculative", "label": "Speculative decoding<br>(small draft model, one verify pass)",
     "group": "more tokens per forward", "x": 0.8, "y": 0.82, "feeds": ("self-spec",),
     "refs": "Leviathan et al. 2023; Chen et al. 2023"},
    {"key": "sampling", "label": "Speculative sampling<br>(lossless: accept with min(1, p/q))",
     "group": "more tokens per forward", "x": 0.8, "y": 0.62, "refs": "Leviathan et al. 2023; Chen et al. 2023"},
    {"key": "lookup", "label": "Prompt lookup<br>(draft copied from the context)",
     "group": "more tokens per forward", "x": 0.8, "y": 0.42, "refs": "Saxena 2023 (prompt lookup decoding)"},
    {"key": "parallel", "label": "Parallel decoding<br>(Jacobi, lookahead: no draft)",
     "group": "more tokens per forward", "x": 0.8, "y": 0.22,
     "refs": "Santilli et al. 2023; Fu et al. 2024 (lookahead)"},
    {"key": "self-spec",
     "label": "<b>Self-speculative<br>decoding</b><br>draft: fewer parameters<br>verify: many tokens / pass",
     "group": "both", "x": 0.5, "y": 0.62, "refs": "Zhang et al. 2023 (Draft & Verify)"},
    {"key": "plain", "label": "Plain decoding<br>(one token per full forward)",
     "group": "baseline", "x": 0.5, "y": 0.22, "refs": "the baseline every speedup is measured against"},
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
    {"number": "07", "title": "adaptive skip sets (which blocks, per context)", "method": "layer skip"},
    {"number": "08", "title": "saturation and early exit", "method": "early exit"},
    {"number": "09", "title": "choosing a drafter (the gate, every drafter)", "method": "speculative"},
    {"number": "12", "title": "width drafts (contextual sparsity, pruning)", "method": "sparsity"},
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


def _spread(row, column: str = "speedup") -> tuple[float, float] | None:
    """(min, max) of ``column`` over the interleaved repetitions, None when the row has no spread."""
    lo, hi = row.get(f"{column}_min", float("nan")), row.get(f"{column}_max", float("nan"))
    return None if lo is None or hi is None or math.isnan(lo) or math.isnan(hi) else (float(lo), float(hi))


def _beyond_noise(a, b, tol: float = 0.03, column: str = "speedup") -> int:
    """+1: a above b beyond the noise, -1: below, 0: within it (min–max ranges overlap; without ranges, within
    ``tol`` relative)."""
    sa, sb = _spread(a, column), _spread(b, column)
    if sa is not None and sb is not None:
        return 0 if overlaps(sa, sb) else (1 if a[column] > b[column] else -1)
    return _compare(float(a[column]), float(b[column]), tol)


def _x(row, digits: int = 2) -> str:
    """'1.23x (1.20–1.25)': a speedup with its min–max over repetitions when the row has one."""
    s = _spread(row)
    return f"{row['speedup']:.{digits}f}x" + (f" ({s[0]:.{digits}f}–{s[1]:.{digits}f})" if s else "")


def _digits(*rows) -> int:
    """2, or 3 where two ranges that do not overlap would print as touching at 2 decimals (1.43–1.55 against
    1.55–1.57 read as overlapping while the verdict says 'beyond the noise')."""
    spreads = [sp for sp in (_spread(r) for r in rows) if sp is not None]
    for a in spreads:
        for b in spreads:
            if a is not b and a[1] < b[0] and round(a[1], 2) >= round(b[0], 2):
                return 3
    return 2


def fastest_sentence(table: pd.DataFrame) -> str:
    rows = _rows(table).sort_values("speedup", ascending=False)
    best = rows.iloc[0]
    if best["speedup"] < 1.0:
        return (f"No drafter beats plain decoding on these prompts: the best, {best['drafter']}, runs at "
                f"{_x(best)}.")
    runner = rows.iloc[1] if len(rows) > 1 else None
    tail = ""
    if runner is not None:
        tied = _beyond_noise(best, runner, 0.0) == 0
        tail = (f", but {runner['drafter']} ({_x(runner)}) is within the noise of it" if tied else
                f", ahead of {runner['drafter']} ({_x(runner)}) beyond the noise")
    return (f"{best['drafter']} is the fastest on these prompts: {_x(best)} plain decoding "
            f"(acceptance {_pct(best['acceptance'])}, {best['tokens_per_step']:.2f} tokens per step){tail}.")


def early_exit_vs_skip_sentence(table: pd.DataFrame, n_layers: int, tol: float = 0.03) -> str:
    rows = _rows(table)
    rows = rows[rows["gate"].isna()]
    skip = rows[rows["family"] == "layer skip"]
    exits = rows[rows["family"] == "early exit"]
    if skip.empty or exits.empty:
        return "Early exit and layer skip were not both measured."
    s, e = skip.iloc[0], exits.sort_values("speedup", ascending=False).iloc[0]
    verdict = {1: "layer skip is faster beyond the noise", -1: "early exit is faster beyond the noise",
               0: "the two are within measurement noise"}[_beyond_noise(s, e, tol)]
    n_s, n_e = drafted_tokens(s), drafted_tokens(e)
    if math.isnan(difference_se(s["acceptance"], n_s, e["acceptance"], n_e)):      # no counts: a tolerance
        acc, noise = {1: "higher", -1: "lower", 0: "about the same"}[_compare(s["acceptance"], e["acceptance"],
                                                                              0.02)], ""
    else:                 # two standard errors of the difference of the two shares
        moved = proportions_differ(s["acceptance"], n_s, e["acceptance"], n_e)
        acc = ("higher" if s["acceptance"] > e["acceptance"] else "lower") if moved else "about the same"
        noise = (f" ({'beyond' if moved else 'within'} the sampling noise of about {n_s:.0f} and {n_e:.0f} drafted "
                 f"tokens)")
    ties = sorted(int(r["exit_layer"]) for _, r in exits.iterrows()
                  if int(r["exit_layer"]) != int(e["exit_layer"]) and _beyond_noise(e, r, tol) == 0)
    tied = (f"; E={join([str(x) for x in ties])} {'is' if len(ties) == 1 else 'are'} within its noise, so the "
            f"repetitions cannot rank {'it' if len(ties) == 1 else 'them'} below E={int(e['exit_layer'])}"
            if ties else "")
    which = (f"the fastest early exit by median, E={int(e['exit_layer'])} of {n_layers} layers," if len(exits) > 1
             else f"early exit at E={int(e['exit_layer'])} of {n_layers} layers")
    return (f"{s['drafter']} reaches {_x(s)} at acceptance {_pct(s['acceptance'])}; {which} reaches {_x(e)} at "
            f"acceptance "
            f"{_pct(e['acceptance'])}{tied}: {verdict}, with {acc} acceptance for layer skip{noise}.")


def memory_sentence(table: pd.DataFrame, target_parameters: int) -> str:
    rows = _rows(table)
    rows = rows[rows["gate"].isna()]
    sep = rows[rows["family"] == "separate model"]
    selfish = rows[rows["extra_parameters"] == 0]
    if sep.empty:
        return "Every drafter measured here reuses the target's own weights: no extra parameters."
    m, best_self = sep.iloc[0], selfish.sort_values("speedup", ascending=False).iloc[0]
    how = {1: "and is faster, beyond the noise, than", -1: "yet is slower, beyond the noise, than",
           0: "and is within the noise of"}[_beyond_noise(m, best_self)]
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
        return f"Prompt lookup alone runs at {_x(alone)}."
    best = combos.sort_values("speedup", ascending=False).iloc[0]
    partner = best.name.replace("lookup + ", "")
    parts = [alone] + ([rows.loc[partner]] if partner in rows.index else [])
    best_part = max(parts, key=lambda r: r["speedup"])
    partner_speed = _x(rows.loc[partner]) if partner in rows.index else "not measured"
    verdicts = [_beyond_noise(best, part) for part in parts]
    named = f"{best_part.name}, {best_part['speedup']:.2f}x"
    how = ("beats both parts alone beyond the noise" if all(v == 1 for v in verdicts) else
           f"is within the noise of its best part alone ({named})" if _beyond_noise(best, best_part) == 0 else
           f"does not beat its best part alone ({named})" if _beyond_noise(best, best_part) < 0 else
           "beats its best part alone beyond the noise but not its other part")
    return (f"Prompt lookup costs nothing to draft: alone it runs at {_x(alone)}; in front of a model "
            f"drafter the best combination, {best.name}, runs at {_x(best)} ({partner} alone: "
            f"{partner_speed}), so the combination {how}.")


def gate_control_sentences(control: pd.DataFrame) -> list[str]:
    """Per prompt set and threshold: the gate against no gate and against its random control (the same fraction of
    steps made plain at random), each verdict beyond or within the noise (min–max over interleaved repetitions)."""
    out = []
    for prompts, sel in control.groupby("prompts", sort=False):
        base = sel[sel["arm"] == "no gate"]
        if base.empty:
            continue
        b = base.iloc[0]
        for t in sel.loc[sel["arm"] == "gate", "threshold"]:
            g = sel[(sel["arm"] == "gate") & (sel["threshold"] == t)].iloc[0]
            r = sel[(sel["arm"] == "random control") & (sel["threshold"] == t)]
            vs_base = {1: "faster than no gate beyond the noise", -1: "slower than no gate beyond the noise",
                       0: "within the noise of no gate"}[_beyond_noise(g, b)]
            r = r.iloc[0] if not r.empty else None
            k = _digits(g, b, *([] if r is None else [r]))
            text = (f"On this machine, on {prompts} prompts, the gate at {t:g} decoded {g['gated_fraction']:.0%} of "
                    f"steps plainly (acceptance {_pct(b['acceptance'])} ungated, {_pct(g['acceptance'])} gated) and "
                    f"ran at {_x(g, k)}: {vs_base} ({_x(b, k)})")
            if r is not None:
                vs_random = {1: "beat chance beyond the noise", -1: "did worse than chance beyond the noise",
                             0: "is within the noise of chance"}[_beyond_noise(g, r)]
                text += (f". Its random control, plain on {r['gated_fraction']:.0%} of steps at random, ran at "
                         f"{_x(r, k)}: the gate's choice of steps {vs_random}")
            if g["gated_fraction"] > 0.5:
                text += "; the gate mostly switched speculation off"
            out.append(text + ".")
    return out


def which_one_when(table: pd.DataFrame, control: pd.DataFrame | None, *, n_layers: int,
                   target_parameters: int) -> list[str]:
    """The conclusion, one sentence per question, every clause chosen by the numbers (and their noise):
    ``table`` from :func:`~labkit.measure.comparisons.drafters.compare_drafters`, ``control`` from
    :func:`~labkit.measure.signals.gate.gate_control` (None: no gate sentences)."""
    out = [fastest_sentence(table), early_exit_vs_skip_sentence(table, n_layers), lookup_sentence(table),
           memory_sentence(table, target_parameters)]
    if control is not None:
        out.extend(gate_control_sentences(control))
    return out


def saturation_sentence(sats: dict[str, Saturation], layer: int) -> str:
    """How many tokens each model already gets right after ``layer`` of its layers, the earliest first."""
    parts = sorted(((float(sat.fraction_saturated()[sat.layer_stage(layer)]), name, sat.n_layers)
                    for name, sat in sats.items()), reverse=True)
    text = "; ".join(f"{name}: {frac:.0%}" for frac, name, _ in parts)
    head = (f"After {layer} of {parts[0][2]} layers the logit lens already gives the final token for {text}")
    if len(parts) > 1:
        gap = parts[0][0] - parts[-1][0]
        points = round(100 * parts[0][0]) - round(100 * parts[-1][0])   # the difference of the percentages shown
        head += (f": {parts[0][1]}'s first {layer} layers are already right for {points} percentage points more "
                 f"tokens than {parts[-1][1]}'s" if gap > 0.02 else ", about the same")
    return head + "."


def roc_sentence(rocs: dict[str, dict[str, dict]]) -> list[str]:
    """Per model: CALM's signals ranked by AUC; the best is "ahead" only where its bootstrap interval does not
    overlap the runner-up's (else "within the noise"); whether the worst is better than a coin flip."""
    out = []
    for name, signals in rocs.items():
        ranked = sorted(signals.items(), key=lambda kv: kv[1]["auc"], reverse=True)
        (best, b), worst = ranked[0], ranked[-1]

        def auc(r):
            lo, hi = r.get("auc_low", float("nan")), r.get("auc_high", float("nan"))
            return f"AUC {r['auc']:.2f}" + ("" if math.isnan(lo) else f", interval {lo:.2f}–{hi:.2f}")

        text = f"{name}: the {best} predicts best ({auc(b)})"
        if len(ranked) > 1:
            second, s = ranked[1]
            both = all(not math.isnan(r.get(k, float("nan"))) for r in (b, s) for k in ("auc_low", "auc_high"))
            tied = (overlaps((b["auc_low"], b["auc_high"]), (s["auc_low"], s["auc_high"])) if both
                    else abs(b["auc"] - s["auc"]) <= 0.02)
            text += (f", but the {second} ({auc(s)}) is within the noise of it" if tied else
                     f", ahead of the {second} ({auc(s)}) beyond the noise")
        a, lo, hi = worst[1]["auc"], worst[1].get("auc_low", float("nan")), worst[1].get("auc_high", float("nan"))
        if not (math.isnan(lo) or math.isnan(hi)):       # the interval decides: 0.5 inside it is a coin flip
            coin = ("worse than a coin flip (0.5) beyond the noise" if hi < 0.5 else
                    "better than a coin flip (0.5) beyond the noise" if lo > 0.5 else
                    "within the noise of a coin flip (0.5)")
        else:
            coin = ("worse than a coin flip (0.5)" if a < 0.45 else "close to a coin flip (0.5)" if a < 0.55 else
                    "better than a coin flip")
        out.append(text + f"; the {worst[0]} is worst ({auc(worst[1])}, {coin}).")
    return out


def profile_sentences(profiles: dict[str, dict], ours: str = "labkit", theirs: str = "transformers") -> list[str]:
    """Why the two early-exit implementations differ, from their profiles (see labkit.measure.signals.early_exit)."""
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
    gaps = {"verifying (and prefill)": verify_b - verify_a,
            "the decoding loop outside model calls": b["outside_ms_per_token"] - a["outside_ms_per_token"]}
    largest = max(gaps, key=lambda k: abs(gaps[k]))
    out.append(f"On this machine, verifying (and prefill) cost {verify_b:.2f} ms per token in {theirs} against "
               f"{verify_a:.2f} in {ours}, and the loop outside model calls {b['outside_ms_per_token']:.2f} against "
               f"{a['outside_ms_per_token']:.2f}: the larger gap is {largest} ({abs(gaps[largest]):.2f} ms per token).")
    faster = theirs if b["ms_per_token"] < a["ms_per_token"] else ours
    sa, sb = _spread(a, "ms"), _spread(b, "ms")

    def ms(p, s):
        return f"{p['ms_per_token']:.2f}" + (f" (min–max {s[0]:.2f}–{s[1]:.2f})" if s else "")

    if sa is not None and sb is not None:
        n = len(a.get("ms_each", [])) or "several"
        verdict = (f"the two are within the noise ({n} interleaved repetitions each: their ranges overlap)"
                   if overlaps(sa, sb) else f"{faster} is faster beyond the noise ({n} interleaved repetitions each)")
    else:
        verdict = f"{faster} is faster on this single run (no repetitions: the noise is unknown)"
    out.append(f"On this machine, in all, {ms(b, sb)} ms per token in {theirs} and {ms(a, sa)} in {ours}: {verdict}.")
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


def _below_chance(auc: float) -> str:
    return (" (below 0.5: here low confidence goes with accepted drafts, so a gate turns the wrong steps plain)"
            if auc < 0.5 else "")


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
                                          readout_format=".2f", continuous_update=True,
                                          layout=widgets.Layout(width="420px"))
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
        if "arm" in measured:                                        # the random control is not a gate setting
            measured = measured[measured["arm"] != "random control"]
        nearest = measured.iloc[int(np.argmin(np.abs(measured["threshold"].fillna(0.0).to_numpy() - t)))]
        label = "no gate" if math.isnan(nearest["threshold"]) else f"gate {nearest['threshold']:g}"
        self.readout.value = (
            f"A gate at {t:.2f} would decode {preview['gated_fraction']:.0%} of these steps plainly; "
            f"the drafts it keeps had acceptance {_pct(preview['acceptance_kept'])}, "
            f"those it drops {_pct(preview['acceptance_gated'])} "
            f"({preview['accepted_tokens_lost']:.0%} of all accepted tokens). "
            f"The previous token's confidence predicts the "
            f"first drafted token's acceptance with AUC {preview['auc']:.2f}{_below_chance(preview['auc'])}. "
            f"Measured nearest setting ({label}): "
            f"{nearest['speedup']:.2f}x, acceptance {_pct(nearest['acceptance'])}.")
        self.last_update_ms = 1e3 * (time.perf_counter() - t0)
