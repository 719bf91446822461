"""Notebook 13's glue: batched plain and self-speculative decoding from the committed reference group ``13``
(tokens per second and per-token latency against batch size, where speculation stops paying, the calibration's
prediction beside the measurement, the load policy against always on and always off), the live check on this
machine beside it, and the γ explorer (the predicted speedup S(B, γ) of one γ against batch size).

Every comparison in words reads the reference rows (:func:`measured_rows` of :func:`load_batches`); a live row is
only ever set beside its reference row in a line that says "this machine". Speculation *pays* at a batch size when
its speedup's min-max range lies above 1, *loses* when it lies below, and is *within the noise* of the plain loop
otherwise. Notation (docs/notation.md): γ the most tokens drafted per step, c and c_v the draft and verify costs in
plain steps at that batch size, α the per-token acceptance probability, S(B, γ) = E(α, γ) / (γ c(B) + c_v(B, γ)).
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.batch_decoding import LoadPolicy
from ..measure.comparisons.batches import (
    batch_label,
    pack_rows,
    plain_batch_decoder,
    policy_batch_decoder,
    speculative_batch_decoder,
)
from ..measure.costs.batch_costs import costs_from_dict, crossing_batch, policy_rows, predicted_speedup
from ..measure.harness import run_interleaved, summarise
from ..measure.reference.loader import PLAIN, Spread, live_vs_reference, load_reference
from ..viz.batches import gamma_data, gamma_figure
from ..viz.widgets import as_widget, update_widget
from .claims import join, num

__all__ = ["METHODS", "POLICY_TOLERANCE", "BatchReference", "load_batches", "measured_rows", "verdict_of",
           "throughput_sentence", "crossover_sentence", "prediction_sentence", "policy_sentence", "policy_table",
           "live_sweep", "live_lines", "GammaExplorer"]

#: the three rows of every batch size, in the order the figures draw them
METHODS = (PLAIN, "always on", "load policy")
#: how far below the better of always on and always off the load policy may fall (the issue's target: 5 %)
POLICY_TOLERANCE = 0.05
_LABEL = re.compile(r"^(?P<method>.+), batch (?P<batch>\d+)$")


@dataclass
class BatchReference:
    """The reference group 13: its rows (:func:`measured_rows`), the calibration it recorded (the c(B), c_v(B, γ),
    α and load policy the policy rows ran with) and where it ran (``machine``, a loader Machine)."""

    rows: list[dict]
    calibration: dict
    machine: object
    predicted: list[dict] = field(default_factory=list)

    @property
    def costs(self):
        return costs_from_dict(self.calibration["costs"])

    @property
    def alpha(self) -> float:
        return float(self.calibration["alpha"])

    @property
    def policy(self) -> LoadPolicy:
        p = self.calibration["policy"]
        return LoadPolicy(tuple(p["batch_sizes"]), tuple(p["max_draft"]))


def measured_rows(rows) -> list[dict]:
    """Reference or live rows (ReferenceRow objects, or harness summary dicts labelled 'method, batch B') as plain
    dicts: batch, method, tokens per second (the batch's) with its min-max, the ms per token of one row (the
    batch's ms per token × B), the speedup over the batched plain loop with its min-max, accepted / drafted, and
    whether its tokens were the plain loop's."""
    out = []
    for r in rows:
        label = r["method"] if isinstance(r, dict) else r.method
        match = _LABEL.match(label)
        if not match:
            continue
        batch = int(match["batch"])
        if isinstance(r, dict):
            ms, speedup = Spread(r["ms_per_token"], r["ms_min"], r["ms_max"]), Spread(
                r["speedup"], r["speedup_min"], r["speedup_max"])
            acceptance, identical = r.get("acceptance", float("nan")), r.get("identical")
        else:
            ms, speedup, acceptance, identical = r.ms_per_token, r.speedup, r.acceptance, r.identical
        out.append({"batch": batch, "method": match["method"], "tokens_per_s": 1e3 / ms.median,
                    "low": 1e3 / ms.high, "high": 1e3 / ms.low, "latency_ms": ms.median * batch,
                    "speedup": speedup.median, "speedup_low": speedup.low, "speedup_high": speedup.high,
                    "acceptance": acceptance, "identical": identical})
    return sorted(out, key=lambda r: (r["batch"], METHODS.index(r["method"]) if r["method"] in METHODS else 9))


def load_batches(folder=None) -> BatchReference | None:
    """The committed reference group 13 (``data/reference/13.json``), or None when none is committed yet."""
    try:
        reference = load_reference("13", folder)
    except FileNotFoundError:
        return None
    detail = json.loads(reference.paths[0].read_text()).get("detail", {})
    calibration = detail.get("calibration")
    if not calibration:
        raise ValueError(f"{reference.paths[0]} records no calibration: run `python -m labkit reference --only 13`")
    out = BatchReference(measured_rows(reference.rows), calibration, reference.machine)
    out.predicted = policy_rows(out.costs, out.alpha)
    return out


def _of(rows: Sequence[dict], method: str) -> list[dict]:
    return [r for r in rows if r["method"] == method]


def verdict_of(row: dict) -> str:
    """'pays', 'loses' or 'within the noise': where a row's speedup range lies against 1."""
    if row["speedup_low"] > 1.0:
        return "pays"
    return "loses" if row["speedup_high"] < 1.0 else "within the noise"


def throughput_sentence(rows: Sequence[dict]) -> str:
    """How the batch's tokens per second and one row's ms per token move from the smallest to the largest batch."""
    plain, on = _of(rows, PLAIN), _of(rows, "always on")
    if not plain or not on:
        return "The reference run has no batch rows to compare."
    first, last = plain[0], plain[-1]
    return (f"From batch {first['batch']} to {last['batch']} the plain loop's throughput goes from "
            f"{first['tokens_per_s']:.0f} to {last['tokens_per_s']:.0f} tokens/s and always on's from "
            f"{on[0]['tokens_per_s']:.0f} to {on[-1]['tokens_per_s']:.0f}, while one row waits "
            f"{first['latency_ms']:.1f} → {last['latency_ms']:.1f} ms per token (plain).")


def crossover_sentence(rows: Sequence[dict]) -> str:
    """Where always on pays, is within the noise of the plain loop, or loses, and where its speedup crosses 1."""
    on = _of(rows, "always on")
    if not on:
        return "The reference run has no always-on rows."
    groups = {v: [str(r["batch"]) for r in on if verdict_of(r) == v] for v in ("pays", "within the noise", "loses")}
    parts = [f"{word} at batch {join(sizes)}" for word, sizes in groups.items() if sizes]
    cross = crossing_batch([r["batch"] for r in on], [r["speedup"] for r in on])
    where = (f"its median speedup falls to 1 at batch ≈ {cross:.1f}" if cross is not None
             else f"its median speedup stays above 1 up to batch {on[-1]['batch']}")
    return f"Always on {'; '.join(parts)}; {where}."


def prediction_sentence(rows: Sequence[dict], predicted: Sequence[dict]) -> str:
    """The calibration's crossover (where the best S(B, γ) falls to 1) beside always on's measured one, and where the
    load policy's measured speedup was furthest from the S predicted for the γ it ran (S = 1 at γ = 0)."""
    on = {r["batch"]: r for r in _of(rows, "always on")}
    policy = {r["batch"]: r for r in _of(rows, "load policy")}
    pred = [p for p in predicted if p["batch"] in policy]
    if not on or not pred:
        return "The calibration and the measured rows share no batch size."
    p_cross = crossing_batch([p["batch"] for p in predicted], [p["speedup"] for p in predicted])
    m_cross = crossing_batch(sorted(on), [on[b]["speedup"] for b in sorted(on)])

    def where(x, last):
        return f"at batch ≈ {x:.1f}" if x is not None else f"beyond batch {last}"

    def expected(p):
        return p["speedup"] if p["policy_gamma"] else 1.0
    worst = max(pred, key=lambda p: abs(expected(p) / policy[p["batch"]]["speedup"] - 1))
    measured = policy[worst["batch"]]["speedup"]
    return (f"The calibration puts the crossover {where(p_cross, predicted[-1]['batch'])}, the measurement "
            f"{where(m_cross, max(on))}. The policy's speedup is furthest from its prediction at batch "
            f"{worst['batch']}: {expected(worst):.2f} predicted, {measured:.2f}x measured "
            f"({100 * (expected(worst) / measured - 1):+.0f} %).")


def policy_sentence(rows: Sequence[dict], tolerance: float = POLICY_TOLERANCE) -> str:
    """Whether the load policy stayed within ``tolerance`` of the better of always on and always off (speedup 1)."""
    on = {r["batch"]: r for r in _of(rows, "always on")}
    worse = []
    for r in _of(rows, "load policy"):
        best = max(1.0, on[r["batch"]]["speedup"]) if r["batch"] in on else 1.0
        if r["speedup"] < (1 - tolerance) * best:
            worse.append(f"batch {r['batch']} ({r['speedup']:.2f}x against {best:.2f}x)")
    if not _of(rows, "load policy"):
        return "The reference run has no load-policy rows."
    if not worse:
        return (f"The load policy is never more than {100 * tolerance:.0f} % below the better of always on and "
                f"always off at any batch size measured.")
    return (f"The load policy falls more than {100 * tolerance:.0f} % below the better of always on and always off "
            f"at {join(worse)}.")


def policy_table(rows: Sequence[dict], predicted: Sequence[dict]) -> list[dict]:
    """Per batch size: the policy's γ cap (0: off), tokens per second of the plain loop, the speedups of always on
    and of the policy with their ranges, and the calibration's best S(B, γ)."""
    pred = {p["batch"]: p for p in predicted}
    out = []
    for plain in _of(rows, PLAIN):
        b = plain["batch"]
        on = next((r for r in _of(rows, "always on") if r["batch"] == b), None)
        pol = next((r for r in _of(rows, "load policy") if r["batch"] == b), None)

        def text(r):
            return "–" if r is None else Spread(r["speedup"], r["speedup_low"], r["speedup_high"]).text("x")
        out.append({"batch": b, "γ cap (0: off)": pred[b]["policy_gamma"] if b in pred else "–",
                    "plain loop tokens/s": round(plain["tokens_per_s"]), "always on": text(on),
                    "load policy": text(pol), "predicted S (best γ)": num(pred[b]["speedup"]) if b in pred else "–"})
    return out


def live_sweep(model, config, prompts: Sequence[list[int]], batches: Sequence[int], *, tokens: int,
               repeats: int, policy: LoadPolicy, n_prompts: int = 8) -> list[dict]:
    """This machine's check: at every batch size B of ``batches``, the batched plain loop, always on and ``policy``
    interleaved through the harness on the first max(B, ``n_prompts``) of ``prompts`` (in blocks of B): rows as
    :func:`measured_rows` gives them."""
    rows = []
    for b in batches:
        if len(prompts) < b:
            raise ValueError(f"prompts: batch size {b} needs at least {b} prompts, got {len(prompts)}")
        decoders = [plain_batch_decoder(model, batch_label(PLAIN, b)),
                    speculative_batch_decoder(model, config, batch_label("always on", b)),
                    policy_batch_decoder(model, config, policy, batch_label("load policy", b))]
        blocks = pack_rows(list(prompts)[:max(b, n_prompts)], b)
        runs = run_interleaved(decoders, blocks, max_new_tokens=tokens, repeats=repeats, warmup_tokens=4,
                               progress=False)
        rows += summarise(runs, decoders[0].method)
    return measured_rows(rows)


def live_lines(live: Sequence[dict], reference: BatchReference | None) -> list[str]:
    """One line per live always-on and load-policy row: beside its reference row when there is one (always "this
    machine"), else the live speedup alone."""
    lines = []
    ref = {(r["batch"], r["method"]): r for r in (reference.rows if reference else [])}
    for r in live:
        if r["method"] == PLAIN:
            continue
        spread = Spread(r["speedup"], r["speedup_low"], r["speedup_high"])
        label = f"{r['method']} at batch {r['batch']}"
        other = ref.get((r["batch"], r["method"]))
        if other is None:
            lines.append(f"On this machine {label} measured {spread.text('x')} (no reference row at this batch size).")
        else:
            lines.append(live_vs_reference(label, spread, Spread(other["speedup"], other["speedup_low"],
                                                                 other["speedup_high"]), reference.machine))
    return lines


class GammaExplorer:
    """A γ slider over the reference calibration: the predicted S(B, γ) of that γ against batch size, beside the
    best γ's and the measured always-on speedup; the readout says up to which batch size that γ is predicted to pay.
    Everything is precomputed from the committed reference (no live timing). ``.widget``."""

    def __init__(self, reference: BatchReference, gamma: int | None = None):
        import ipywidgets as widgets

        costs, alpha = reference.costs, reference.alpha
        self.batches = list(costs.batch_sizes)
        self.predicted = {g: [predicted_speedup(costs, alpha, i, g) for i in range(len(self.batches))]
                          for g in costs.gammas}
        self.measured = reference.rows
        first = gamma if gamma in self.predicted else costs.gammas[0]
        self.slider = widgets.SelectionSlider(options=list(self.predicted), value=first, description="γ",
                                              continuous_update=True, layout=widgets.Layout(width="380px"))
        self.figure = as_widget(gamma_figure(self.traces()))
        self.readout = widgets.HTML()
        self.last_update_ms = float("nan")
        self.slider.observe(lambda change: self.update(), names="value")
        self.widget = widgets.VBox([self.slider, self.figure, self.readout])
        self.update()

    def traces(self) -> list[dict]:
        return gamma_data(self.predicted, self.batches, int(self.slider.value), self.measured)

    def update(self) -> None:
        t0 = time.perf_counter()
        traces = self.traces()
        update_widget(self.figure, {i: {"x": t["x"], "y": t["y"], "name": t["name"]} for i, t in enumerate(traces)},
                      layout={"title.text": traces[0]["name"]})
        gamma = int(self.slider.value)
        cross = crossing_batch(self.batches, self.predicted[gamma])
        where = (f"pays up to batch ≈ {cross:.1f}" if cross is not None and cross > self.batches[0]
                 else "pays at no batch size" if cross is not None
                 else f"pays at every batch size up to {self.batches[-1]}")
        self.readout.value = (f"Drafting γ = {gamma} tokens per step, the reference calibration predicts that "
                              f"speculation {where}; S at batch {self.batches[0]}: "
                              f"{self.predicted[gamma][0]:.2f}, at batch {self.batches[-1]}: "
                              f"{self.predicted[gamma][-1]:.2f}.")
        self.last_update_ms = 1e3 * (time.perf_counter() - t0)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
