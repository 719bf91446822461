"""Notebook 11's glue: which regime a block runs in, and every sentence the notebook writes from its numbers (the
roofs, the blocks on the roofline, c against the blocks kept, c_v against the tokens verified, the analytic limit,
the calibration's prediction against its measurement and where it went), and the limit explorer (a regime and α:
the analytic limit against γ for each fraction of blocks kept, beside the memory-bound ideal).

A block is *memory-bound* when it streams its bytes at half or more of the memory roof that applies (the cache's
when the model's weights fit the largest cache, else memory's), *compute-bound* when it reaches half or more of the
compute roof, and *below both roofs* otherwise: then neither its bytes nor its FLOPs set its time, but the work
around them (per-call overhead, a kernel that does not stream). A difference is "within the noise" when the
ranges of the per-round ratios (or of the repetitions) overlap. Notation (docs/notation.md): c the cost of one
drafted token and c_v of one verify forward in plain decoding steps, α the per-token acceptance probability, γ the
tokens drafted per step, E(α, γ) the expected tokens per step.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

from ..measure.costs.analytic import best_limit, interpolate_cv
from ..measure.costs.step_anatomy import ARITHMETIC, PARTS, crossover_width, int8_bound, predicted_c
from ..measure.reference.loader import load_reference
from ..viz.regime import limit_gamma_data, limit_gamma_figure
from ..viz.widgets import as_widget, update_widget
from .claims import is_missing, join, num

__all__ = ["BOUND_SHARE", "PAPER", "bound_of", "ceiling_sentence", "regime_sentence", "fixed_share",
           "draft_cost_sentence", "verify_cost_sentence", "kernel_sentence", "paper_sentence", "limit_sentence",
           "calibration_sentence", "budget_sentence", "LimitExplorer", "PAPER_POINT", "anatomy_sentences",
           "anatomy_table", "operating_point_rows", "lab_operating_point", "operating_point_sentence", "LARGE_WIDTH"]

#: The share of a roof a block must reach to be called bound by it.
BOUND_SHARE = 0.5
#: Draft & Verify's LLaMA-2-13B, as the lab's reading notes give it: a plain step, the fraction of the model the
#: draft keeps, what a draft would take if time fell in proportion, and what it took.
PAPER = {"step_ms": 56.3, "kept": 0.425, "predicted_ms": 23.9, "draft_ms": 25.5}
#: Draft & Verify's operating point as Zhang et al. 2023 (arXiv 2309.08168) report it and the lab's notes carry it
#: (None: a quantity the lab's notes do not carry, never guessed; "alpha" is the measured accepted / drafted):
#: LLaMA-2-13B on an A100 GPU in fp16, the adaptive threshold with up to 12 drafted tokens; blocks kept and c are
#: the reading notes' 13B example (:data:`PAPER`: the draft keeping 0.425 of the model at 25.5 of 56.3 ms).
PAPER_POINT = {"model": "LLaMA-2-13B (13 B parameters, 40 layers × 5120)", "hardware": "A100 GPU, fp16",
               "blocks kept": PAPER["kept"], "c": PAPER["draft_ms"] / PAPER["step_ms"], "c_v": None, "alpha": None,
               "gamma": "adaptive threshold, up to 12", "speedup": "up to 1.99× (LLaMA-2 family)"}
#: The hidden width of the paper's 13B model, for what the step's anatomy predicts at that size.
LARGE_WIDTH = 5120


def bound_of(point: dict, ceiling, working_bytes: float) -> dict:
    """Which roof bounds a measured block (a row of :func:`labkit.measure.costs.roofline.roofline_points`) when the
    model's weights take ``working_bytes``: {``verdict``, ``roof`` ("cache" or "memory"), ``roof_gbs``,
    ``memory_share`` (achieved GB/s ÷ that roof), ``compute_share`` (achieved GFLOP/s ÷ the compute roof)}."""
    roof_gbs = ceiling.memory_roof(working_bytes)
    memory, compute = point["gb_per_s"] / roof_gbs, point["gflop_per_s"] / ceiling.gflops
    if compute >= BOUND_SHARE and compute >= memory:
        verdict = "compute-bound"
    elif memory >= BOUND_SHARE:
        verdict = "memory-bound"
    else:
        verdict = "below both roofs"
    return {"verdict": verdict, "roof": "cache" if roof_gbs == ceiling.cache_gbs else "memory", "roof_gbs": roof_gbs,
            "memory_share": memory, "compute_share": compute}


def _crossing(ceiling) -> float:
    """Tokens per forward at which a decoder block's intensity (about 2 FLOPs per weight per token) reaches the
    ridge: T* = ridge × bytes per weight / 2."""
    size = {"float32": 4, "bfloat16": 2, "float16": 2}.get(ceiling.dtype, 4)
    return ceiling.ridge * size / 2


def ceiling_sentence(ceilings: Mapping[str, object]) -> str:
    """The roofs of each precision (``{label: Ceiling}``), the ridge and the token count that reaches it."""
    parts = []
    for label, c in ceilings.items():
        parts.append(f"in {label} it copies at {c.bandwidth_gbs:.1f} GB/s from memory and {c.cache_gbs:.1f} GB/s "
                     f"within its {c.cache_bytes / 2 ** 20:.0f} MB cache, and multiplies matrices at {c.gflops:.0f} "
                     f"GFLOP/s: the ridge lies at {c.ridge:.1f} FLOP per byte, which a forward over about "
                     f"{_crossing(c):.0f} tokens reaches (2 FLOPs per weight per token)")
    first = next(iter(ceilings.values()))
    return f"On {first.threads} thread(s) of this {first.device.upper()}:\n" + "\n".join(f"* {p}." for p in parts)


def regime_sentence(label: str, points: Sequence[dict], ceiling, working_bytes: float) -> str:
    """What ``label``'s MLP block did (its rows of ``points``): time, bytes, achieved rates against the roofs, the
    verdict at its first and its last token count, and how its time grew with the tokens."""
    mine = sorted((p for p in points if p["regime"] == label and p["block"] == "mlp"), key=lambda p: p["tokens"])
    if not mine:
        return f"{label}: no MLP block measured."
    first, last = mine[0], mine[-1]
    b = bound_of(first, ceiling, working_bytes)
    where = (f"the whole model's {working_bytes / 2 ** 20:.0f} MB fit the cache" if b["roof"] == "cache" else
             f"the model's {working_bytes / 2 ** 20:.0f} MB stream from memory")
    text = (f"{label}: an MLP block ({first['bytes'] / 2 ** 20:.1f} MB) takes {first['ms']:.3f} ms at T = "
            f"{first['tokens']}, {first['gb_per_s']:.1f} GB/s ({b['memory_share']:.2f} of the {b['roof']} roof: "
            f"{where}) and {first['gflop_per_s']:.1f} GFLOP/s ({b['compute_share']:.2f} of the compute roof): "
            f"{b['verdict']}")
    if last is not first:
        growth, flops = last["ms"] / first["ms"], last["flops"] / first["flops"]
        lb = bound_of(last, ceiling, working_bytes)
        text += (f"; at T = {last['tokens']} it takes {growth:.1f}× as long for {flops:.0f}× the FLOPs, "
                 f"{last['gflop_per_s']:.1f} GFLOP/s ({lb['compute_share']:.2f} of the compute roof): "
                 f"{lb['verdict']}")
    return text + "."


def fixed_share(rows: Sequence[dict]) -> float:
    """Where a straight line through (kept, c) of the uniform skips meets kept = 0 (least squares): the part of a
    step that skipping blocks cannot remove (embedding, final norm, LM head, per-call work)."""
    pts = [(r["kept"], r["c"]) for r in rows if r["label"].startswith("kept")]
    if len(pts) < 2:
        return float("nan")
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else float("nan")
    return my - slope * mx


def _uniform(rows: Sequence[dict]) -> list[dict]:
    return sorted((r for r in rows if r["label"].startswith("kept") and r["kept"] < 1.0), key=lambda r: -r["kept"])


def draft_cost_sentence(curves: Mapping[str, Sequence[dict]], band: float = 0.1) -> str:
    """For each model (``{label: draft-cost rows}``): c at each fraction kept, its largest distance from the
    diagonal (within ``band`` or not, and whether within the noise of it) and the fixed share of a step."""
    parts = []
    for label, rows in curves.items():
        mine = _uniform(rows)
        worst = max(mine, key=lambda r: abs(r["c"] - r["kept"]))
        gap = worst["c"] - worst["kept"]
        noise = worst["c_min"] <= worst["kept"] <= worst["c_max"]
        verdict = (f"within {band} of it everywhere" if abs(gap) <= band else
                   f"{'above' if gap > 0 else 'below'} it by more than {band}")
        parts.append(f"{label}: c = {' / '.join(num(r['c']) for r in mine)} with "
                     f"{' / '.join(num(r['kept']) for r in mine)} of the blocks kept; the farthest from the diagonal "
                     f"is {num(gap, '+.2f')} at {num(worst['kept'])} kept ({verdict}"
                     f"{', and the diagonal lies inside its per-round range' if noise else ''}); a line through the "
                     f"points leaves {num(fixed_share(rows))} of a step at zero blocks kept")
    return "\n".join(f"* {p}." for p in parts)          # a Markdown list: one model per item


def verify_cost_sentence(curves: Mapping[str, Sequence[dict]], cheap: float = 1.5) -> str:
    """For each model (``{label: verify-cost rows}``): c_v at 2 tokens, at the widest verify measured, and the
    widest verify that stays at or below ``cheap`` plain steps."""
    parts = []
    for label, rows in curves.items():
        rows = sorted(rows, key=lambda r: r["tokens"])
        cheap_up_to = None
        for r in rows:
            if r["c_v"] > cheap:
                break
            cheap_up_to = r["tokens"]
        two = min(rows, key=lambda r: abs(r["tokens"] - 2))
        widest = rows[-1]
        reach = (f"at or below {cheap} plain steps up to {cheap_up_to} tokens" if cheap_up_to and cheap_up_to > 1
                 else f"above {cheap} plain steps from {rows[1]['tokens'] if len(rows) > 1 else 2} tokens on")
        parts.append(f"{label}: c_v = {num(two['c_v'])} for {two['tokens']} tokens and {num(widest['c_v'])} for "
                     f"{widest['tokens']}, {reach}")
    return "\n".join(f"* {p}." for p in parts)          # a Markdown list: one model per item


def kernel_sentence(points: Sequence[dict], labels: Sequence[str], block: str = "mlp") -> str:
    """One ``block`` of each model in ``labels`` for 1 token and for the next token count measured: the same bytes
    either way, so a memory-bound kernel takes about as long for both; the ratio says how far each is from that."""
    parts = []
    for label in labels:
        mine = sorted((p for p in points if p["regime"] == label and p["block"] == block), key=lambda p: p["tokens"])
        if len(mine) < 2:
            continue
        one, two = mine[0], mine[1]
        parts.append(f"{label}: {one['ms']:.3f} ms for T = {one['tokens']} and {two['ms']:.3f} ms for T = "
                     f"{two['tokens']} (×{two['ms'] / one['ms']:.2f}; {one['gb_per_s']:.1f} and "
                     f"{two['gb_per_s']:.1f} GB/s of the same weights)")
    return (f"One {'MLP' if block == 'mlp' else block} block, {join(parts, 'and')}." if parts else
            "No model has two token counts measured.")


def paper_sentence(rows: Sequence[dict], label: str) -> str:
    """The paper's 13B draft (its c over the fraction it keeps) beside ``label``'s uniform skip nearest to it."""
    paper_c = PAPER["draft_ms"] / PAPER["step_ms"]
    mine = min(_uniform(rows), key=lambda r: abs(r["kept"] - PAPER["kept"]))
    return (f"The paper's 13B draft: {PAPER['kept']} × {PAPER['step_ms']} ms ≈ {PAPER['predicted_ms']} ms predicted, "
            f"{PAPER['draft_ms']} ms measured, so c = {paper_c:.3f}, {paper_c - PAPER['kept']:+.3f} over the fraction "
            f"kept. {label} here: c = {mine['c']:.3f} with {mine['kept']:.3f} of the blocks kept, "
            f"{mine['c'] - mine['kept']:+.3f} over it (per-round range {mine['c_min']:.3f}–{mine['c_max']:.3f}).")


def limit_sentence(regimes: Mapping[str, tuple[Sequence[dict], Sequence[dict]]], kept: float, alpha: float) -> str:
    """The best analytic limit of each regime at ``alpha`` with the uniform skip nearest ``kept`` (its measured c
    and c_v), beside the memory-bound ideal (c = kept, c_v = 1)."""
    parts = []
    for label, (draft, verify) in regimes.items():
        row = min(_uniform(draft), key=lambda r: abs(r["kept"] - kept))
        b = best_limit(alpha, row["c"], verify)
        parts.append(f"{label} {b['limit']:.2f}× (γ = {b['gamma']}: c = {row['c']:.2f}, c_v = "
                     f"{interpolate_cv(verify, b['gamma'] + 1):.2f})")
    ideal = best_limit(alpha, kept, [{"tokens": 1, "c_v": 1.0}, {"tokens": 2, "c_v": 1.0}])
    return (f"At α = {alpha:.2f} with {kept:.2f} of the blocks kept the analytic limit is {join(parts)}; the "
            f"memory-bound ideal would allow {ideal['limit']:.2f}× (γ = {ideal['gamma']}).")


def calibration_sentence(label: str, cal, target: float = 0.1) -> str:
    """The calibration's prediction against its measurement: the relative error, the ``target`` and the noise."""
    m = cal.measured
    inside = cal.within_noise
    met = abs(cal.error) <= target
    return (f"{label}: predicted {cal.predicted_speedup:.2f}× at γ = {cal.gamma} (α = {cal.alpha:.2f}, c = "
            f"{cal.c:.2f}), measured {cal.measured_speedup:.2f}× ({m['speedup_min']:.2f}–{m['speedup_max']:.2f} over "
            f"{cal.repeats} interleaved repetitions): the prediction is {abs(cal.error):.0%} "
            f"{'above' if cal.error > 0 else 'below'} the measurement, "
            f"{'within' if met else 'outside'} {target:.0%}, and "
            f"{'inside the measured range (within the noise)' if inside else 'outside the measured range'}.")


def budget_sentence(label: str, cal) -> str:
    """Which predicted quantity, replaced by what the run measured, moves the prediction most (and in which
    direction), and the next one."""
    rows = sorted(cal.budget(), key=lambda r: -abs(r["speedup_if"] - cal.predicted_speedup))
    def one(r):
        return (f"{r['quantity']} (predicted {r['predicted']:.2f}, measured {r['measured']:.2f}: with it alone the "
                f"prediction would read {r['speedup_if']:.2f}×)")
    r = cal.run
    later = (f" and a later one, given the one before it was, {r['later_acceptance']:.2f}"
             if not is_missing(r["later_acceptance"]) else " (with one token per draft there is no later one)")
    return (f"{label}: of the prediction's parts, {one(rows[0])} moved it most, then {one(rows[1])}; the "
            f"measurement was {cal.measured_speedup:.2f}×. In the run a step's first drafted token was accepted "
            f"{r['first_acceptance']:.2f} of the time (teacher-forced α {cal.alpha:.2f}){later}.")


class LimitExplorer:
    """A regime dropdown and an α slider over measured costs: the analytic limit E(α, γ) / (γ·c + c_v(γ + 1))
    against γ for each fraction of blocks kept (solid), and the memory-bound ideal c = kept, c_v = 1 (dashed); the
    readout names the best of each. ``regimes``: {label: (draft-cost rows, verify-cost rows)}. ``.widget``."""

    def __init__(self, regimes: Mapping[str, tuple[Sequence[dict], Sequence[dict]]], *,
                 kept: Sequence[float] = (0.75, 0.5, 0.25), gammas: Sequence[int] = tuple(range(1, 9)),
                 alpha: float = 0.8):
        import ipywidgets as widgets

        if not regimes:
            raise ValueError("give at least one regime")
        self.regimes, self.kept, self.gammas = dict(regimes), tuple(kept), tuple(gammas)
        self.choice = widgets.Dropdown(options=list(self.regimes), description="regime",
                                       layout=widgets.Layout(width="440px"))
        self.slider = widgets.FloatSlider(value=alpha, min=0.3, max=0.99, step=0.01, description="α",
                                          readout_format=".2f", continuous_update=True,
                                          layout=widgets.Layout(width="380px"))
        self.figure = as_widget(limit_gamma_figure(self.traces()))
        self.readout = widgets.HTML()
        self.last_update_ms = float("nan")
        for control in (self.choice, self.slider):
            control.observe(lambda change: self.update(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.choice, self.slider]), self.figure, self.readout])
        self.update()

    def traces(self) -> list[dict]:
        draft, verify = self.regimes[self.choice.value]
        return limit_gamma_data(draft, verify, float(self.slider.value), self.kept, self.gammas)

    def update(self) -> None:
        t0 = time.perf_counter()
        traces = self.traces()
        update_widget(self.figure, {i: {"x": t["x"], "y": t["y"], "name": t["name"]} for i, t in enumerate(traces)},
                      layout={"title.text": f"{self.choice.value}: analytic limit at α = {self.slider.value:.2f}"})
        half = len(traces) // 2
        measured = max(traces[:half], key=lambda t: max(t["y"]))
        ideal = max(traces[half:], key=lambda t: max(t["y"]))

        def best(t):
            i = max(range(len(t["y"])), key=lambda j: t["y"][j])
            return f"{t['y'][i]:.2f}× ({t['name']}, γ = {t['x'][i]})"
        self.readout.value = (f"At α = {self.slider.value:.2f} the measured costs of <b>{self.choice.value}</b> "
                              f"give a fixed-length draft with an evenly spread skip an analytic limit of "
                              f"{best(measured)}; the memory-bound ideal {best(ideal)}. A trained skip set, a draft "
                              f"head or prompt lookup drafts at another α and is not on these curves.")
        self.last_update_ms = 1e3 * (time.perf_counter() - t0)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


# -- one step taken apart (labkit.measure.costs.step_anatomy), and the paper's operating point beside the lab's ---
def _arithmetic(anatomy: dict) -> float:
    return sum(anatomy["parts"][p] for p in ARITHMETIC)


def _c_text(anatomy: dict) -> str:
    """c of a breakdown, timed in the same rounds as the full step: '0.58 (0.55–0.63)' (without it: the ratio of
    two separately timed steps is not a cost, so 'n/a')."""
    if "c" not in anatomy:
        return "n/a"
    value, low, high = anatomy["c"]
    return f"{value:.2f} ({low:.2f}–{high:.2f})"


def anatomy_table(anatomies: Mapping[str, dict]) -> list[dict]:
    """One row per part of a step (ms per step), one column per configuration, and the total."""
    rows = [{"part": part, **{label: a["parts"][part] for label, a in anatomies.items()}} for part in PARTS]
    rows.append({"part": "total (hooked forward)", **{label: a["hooked_ms"] for label, a in anatomies.items()}})
    return rows


def anatomy_sentences(full: dict, draft: dict, draft_int8: dict | None = None) -> list[str]:
    """The regime story from one breakdown of each configuration, measured here: what a step is made of, why c
    follows the blocks kept, how far int8 can go, and how much wider a block must be before its bytes set the step.
    Every sentence names "this machine" (a live measurement) and stays under about 50 words."""
    share = _arithmetic(full) / full["hooked_ms"]
    bound = "its calls, not its weights or FLOPs" if share < 0.5 else "its arithmetic"
    out = [f"On this machine one step of the full model took {full['step_ms']:.2f} ms ({full['hooked_ms']:.2f} with "
           f"the timing hooks: the table's total); its arithmetic (matrix products, attention kernel, cache updates, "
           f"LM head) was {share:.0%} of the hooked step: the step is bound by {bound}."]
    kept = draft["blocks"] / full["blocks"]
    out.append(f"On this machine one block took {1e3 * full['per_block_ms']:.0f} µs, "
               f"{1e3 * full['per_block_arithmetic_ms']:.0f} µs of it arithmetic; a draft keeping {draft['blocks']} of "
               f"{full['blocks']} blocks drops whole blocks and keeps the rest, so c ≈ {predicted_c(full, kept):.2f} "
               f"is predicted; measured {_c_text(draft)}.")
    if draft_int8 is not None:
        floor = int8_bound(draft)
        out.append(f"On this machine int8 weights took the draft's matrix products and LM head from "
                   f"{draft['parts']['matrix products'] + draft['parts']['LM head']:.2f} to "
                   f"{draft_int8['parts']['matrix products'] + draft_int8['parts']['LM head']:.2f} ms; even free "
                   f"they would leave {floor:.0%} of the draft step; c measured {_c_text(draft)} in fp32, "
                   f"{_c_text(draft_int8)} in int8.")
    width = crossover_width(full)
    if not is_missing(width):
        out.append(f"On this machine a block's arithmetic would match its per-call work at a width of about "
                   f"{width:.0f} (this model: {full['hidden_size']}); a {LARGE_WIDTH}-wide 13B block holds "
                   f"{(LARGE_WIDTH / full['hidden_size']) ** 2:.0f}× its weights, so there the bytes set the step: "
                   f"c ≈ blocks kept, and int8 reads a quarter of them.")
    return out


def operating_point_rows(lab: Mapping[str, object], lab_label: str) -> list[dict]:
    """The paper's operating point (:data:`PAPER_POINT`) beside the lab's (``lab``: the same keys, from the reference
    run), one row per quantity; a value the lab's notes do not carry reads "not in the lab's notes"."""
    def show(v, missing):
        if v is None or is_missing(v):
            return missing
        return f"{v:.2f}" if isinstance(v, float) else str(v)
    return [{"quantity": key, "Draft & Verify (Zhang et al. 2023)": show(PAPER_POINT[key], "not in the lab's notes"),
             lab_label: show(lab.get(key), "awaits the reference run")} for key in PAPER_POINT]


def lab_operating_point(skip, n_layers: int, group: str = "summary", method: str = "paper's recipe",
                        source: str = "stdlib") -> tuple[dict, str]:
    """The lab's operating point from the committed reference run (``group``'s ``method`` row on ``source``) with
    the skip set's fraction of blocks kept: ({quantity: value}, the column's label). Without a reference file the
    measured quantities are None and the label says which command writes it."""
    kept = 1 - (len(skip.attention) + len(skip.mlp)) / (2 * n_layers) if skip is not None else math.nan
    point = {"model": "the lab's default (7.4 M parameters, 8 layers × 256)", "blocks kept": kept,
             "gamma": "adaptive threshold, up to 12", "c": None, "c_v": None, "alpha": None, "speedup": None}
    try:
        reference = load_reference(group)
        row = reference.row(method, source)
    except (FileNotFoundError, LookupError):
        point["hardware"] = "no reference run yet: `python -m labkit reference`"
        return point, "this lab"
    point.update({"hardware": reference.machine_for(row).describe(), "c": row.c, "c_v": row.c_v,
                  "alpha": row.acceptance, "speedup": row.speedup.text("×")})
    return point, f"this lab ({method}, {source} prompts, reference run)"


def operating_point_sentence(lab: Mapping[str, object]) -> str:
    """Why the lab's draft costs more per block kept than the paper's: c over the fraction kept, for both."""
    paper = PAPER_POINT["c"] / PAPER_POINT["blocks kept"]
    c, kept = lab.get("c"), lab.get("blocks kept")
    if c is None or is_missing(c) or is_missing(kept) or not kept:
        return (f"The paper's draft costs {paper:.2f}× the fraction of blocks it keeps; the lab's side waits for "
                f"its reference run.")
    mine = c / kept
    why = ("the per-call floor (LM head, norms, the rest of the forward) that skipping cannot remove" if mine > paper
           else "no more than the paper pays")
    return (f"The paper's draft costs {paper:.2f}× the fraction of blocks it keeps, the lab's {mine:.2f}×: {why}; "
            f"the lower c is, the more tokens per step a given acceptance buys.")
