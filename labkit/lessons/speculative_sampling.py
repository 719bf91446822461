"""Notebook 05's glue: which real position to open on, the explorer (position and temperature → p, q,
min(1, p/q), the residual, and the temperature sweep), the Monte-Carlo panel (rule, sample size, draw again),
and the sentences that say what the numbers say, written from the numbers.

Notation: p target, q draft, α = Σ min(p, q) = 1 − TV(p, q), γ drafted tokens per step,
E = (1 − α^(γ+1)) / (1 − α) tokens per step.
"""
from __future__ import annotations

import math

import torch

from ..measure.comparisons.speculative_sampling import RULES, SampledPosition, monte_carlo
from ..measure.costs.analytic import expected_tokens_per_step
from ..measure.reference.loader import SAMPLING_METHODS
from ..viz.sampling import (
    CURRENT_T,
    distribution_title,
    distribution_view,
    distributions_figure,
    monte_carlo_figure,
    monte_carlo_view,
    temperature_figure,
)
from ..viz.style import FIGURE_WIDTH
from ..viz.widgets import as_widget, update_widget
from .notebook import reference_or_none

__all__ = ["default_position", "position_label", "describe_trend", "alpha_sentence", "monte_carlo_sentence",
           "rejection_rate_line", "multi_token_sentence", "alpha_shape_sentence", "sweep_sentences",
           "SamplingExplorer", "MonteCarloPanel", "reference_sampling", "reference_sampling_sentence"]


def default_position(positions: list[SampledPosition], top_mass: float = 0.5) -> int:
    """Where the notebook opens: the first rejected drafted token (the residual was really drawn from there) whose
    p puts at least ``top_mass`` on its 8 most likely tokens (so the bars are readable); else the rejected one with
    the most concentrated p; else the first position."""
    if not positions:
        raise ValueError("no positions: the run drafted nothing")
    concentration = [float(torch.topk(pos.p, min(8, pos.p.shape[0])).values.sum()) for pos in positions]
    rejected = [i for i, pos in enumerate(positions) if not pos.accepted]
    if not rejected:
        return 0
    return next((i for i in rejected if concentration[i] >= top_mass), max(rejected, key=lambda i: concentration[i]))


def position_label(pos: SampledPosition, labels: dict[int, str]) -> str:
    verdict = "accepted" if pos.accepted else "rejected"
    token = labels.get(pos.token, pos.token)
    return (f"step {pos.step}, draft slot {pos.slot + 1} · position {pos.position} · drafted ‘{token}’ ({verdict}) · "
            f"α = {pos.alpha:.2f}")


def _fmt_p(p_value: float) -> str:
    if math.isnan(p_value):
        return "untestable (too few tokens with enough mass)"
    return f"p-value {p_value:.3g}" if p_value >= 1e-4 else "p-value < 1e-4"


def _monotone(ys: list[float], eps: float) -> int:
    """+1 never falling, -1 never rising (changes within ``eps`` ignored), 0 neither."""
    steps = [b - a for a, b in zip(ys, ys[1:])]
    if all(d >= -eps for d in steps):
        return 1
    if all(d <= eps for d in steps):
        return -1
    return 0


def describe_trend(xs, ys, what: str, *, x_name: str = "T", fmt: str = ".2f", tol: float = 0.02) -> str:
    """A clause chosen by the data: '<what> rises/falls from a at x0 to b at x1', 'stays at about a', or, when it
    turns, 'falls from a to m at xm, then rises to b'. Changes within ``tol`` (relative to 1) count as flat."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if not math.isnan(float(y))]
    if len(pairs) < 2:
        return f"{what} is measured at fewer than two values of {x_name}"
    xv, yv = [x for x, _ in pairs], [y for _, y in pairs]
    eps = tol * max(1.0, abs(yv[0]))
    at = lambda i: f"{yv[i]:{fmt}} at {x_name} = {xv[i]:g}"                   # noqa: E731
    if max(yv) - min(yv) <= eps:
        return f"{what} stays at about {yv[0]:{fmt}} from {x_name} = {xv[0]:g} to {xv[-1]:g}"
    direction = _monotone(yv, eps)
    if direction:
        verb = "rises" if direction > 0 else "falls"
        if any((b - a) * direction < 0 for a, b in zip(yv, yv[1:])):       # a step back, within the tolerance
            lo = yv.index(min(yv)) if direction > 0 else yv.index(max(yv))
            return f"{what} {verb} overall from {at(0)} to {at(-1)}, not steadily ({at(lo)})"
        return f"{what} {verb} from {at(0)} to {at(-1)}"
    turns = [i for i in (yv.index(max(yv)), yv.index(min(yv))) if 0 < i < len(yv) - 1]
    if not turns:
        verb = "rises" if yv[-1] > yv[0] else "falls"
        return f"{what} {verb} overall from {at(0)} to {at(-1)}, not steadily"
    m = max(turns, key=lambda i: abs(yv[i] - yv[0]) + abs(yv[i] - yv[-1]))
    first, second = ("rises", "falls") if yv[m] > yv[0] else ("falls", "rises")
    wiggle = "" if _monotone(yv[: m + 1], eps) and _monotone(yv[m:], eps) else " (with ups and downs in between)"
    return f"{what} {first} from {at(0)} to {at(m)}, then {second} to {at(-1)}{wiggle}"


def alpha_sentence(view: dict, gamma: int) -> str:
    """What α means at this position, with Leviathan's E for γ drafts."""
    a = view["alpha"]
    return (f"Here α = Σ min(p, q) = {a:.3f}: a token drafted from q is accepted with probability {a:.0%}, and a "
            f"step that drafts γ = {gamma} such tokens would emit E = (1 − α^{gamma + 1}) / (1 − α) = "
            f"{expected_tokens_per_step(a, gamma):.2f} tokens on average (at most {gamma + 1}).")


def monte_carlo_sentence(rows: list[dict]) -> str:
    """Which rules the test finds consistent with p, and which it rejects, at this sample size."""
    if not rows:
        raise ValueError("no Monte-Carlo rows")
    ok = [r for r in rows if r["consistent_with_p"]]
    bad = [r for r in rows if not r["consistent_with_p"]]
    part = lambda sel: ", ".join(f"{r['rule']} ({_fmt_p(r['p_value'])})" for r in sel)        # noqa: E731
    head = f"With n = {rows[0]['n']:,} draws and a test at level {rows[0]['level']}, "
    if ok and bad:
        verb = "is" if len(bad) == 1 else "are"
        return head + f"the output of {part(ok)} is consistent with p; {part(bad)} {verb} not distributed as p."
    if ok:
        return head + f"every rule's output is consistent with p: {part(ok)} (the test cannot tell them apart here)."
    return head + f"no rule's output passes: {part(bad)}."


def rejection_rate_line(row: dict) -> str:
    """How often the test at this n rejects the rule: its *power* when the rule is wrong, its *false-alarm rate*
    (≈ the level: a rejection of an exact rule is a false alarm) when the rule's output is exactly p."""
    rate, n = row["rejection_rate"], row["n"]
    if row["exact"]:
        return (f"{row['rule']}: exact (its output is p), so the test's rejection rate at n = {n:,} is its "
                f"false-alarm rate, {rate:.3f} (the level {row['level']})")
    return (f"{row['rule']}: wrong (its output is {row['tv_to_p']:.3f} from p in TV); the test's power against it at "
            f"n = {n:,}, the probability that it rejects the rule, is {rate:.3f}")


def multi_token_sentence(rows: list[dict]) -> str:
    """Which ways of finishing a step keep the first two emitted tokens distributed as p's joint, with each
    empirical TV beside the TV that n draws straight from p leave (the noise floor)."""
    if not rows:
        raise ValueError("no rows")
    noise = rows[0]["tv_noise"]
    parts = []
    for r in rows:
        beside = ("within the noise" if r["tv"] <= 2 * noise else f"{r['tv'] / noise:.0f}× the noise")
        verdict = "consistent with p's joint" if r["consistent_with_p"] else "NOT distributed as p's joint"
        parts.append(f"{r['rule']}: TV {r['tv']:.4f} ({beside}), {_fmt_p(r['p_value'])}, {verdict}")
    return (f"Over n = {rows[0]['n']:,} two-token runs, n draws straight from p's joint are {noise:.4f} from it in "
            f"TV (the noise). " + ". ".join(parts) + ".")


def alpha_shape_sentence(frame, low_t_alpha: float | None = None) -> str:
    """Where the measured α is lowest across the sweep, and whether both ends lie above that minimum by more than
    the binomial noise (2 standard errors of each acceptance count); ``low_t_alpha``: the argmax agreement of the
    run's positions, the α that T → 0 tends to."""
    t = [float(v) for v in frame["temperature"]]
    a = [float(v) for v in frame["measured_alpha"]]
    n = [max(1, int(v)) for v in frame["tested"]]
    se = [math.sqrt(max(x * (1 - x), 1e-12) / k) for x, k in zip(a, n)]
    m = min(range(len(a)), key=a.__getitem__)
    above = lambda i: a[i] - a[m] > 2 * (se[i] + se[m])                       # noqa: E731
    at = lambda i: f"{a[i]:.2f} at T = {t[i]:g}"                               # noqa: E731
    tail = ("" if low_t_alpha is None else f" As T → 0 both become point masses on their argmax, so α tends to the "
            f"share of positions where those agree: {low_t_alpha:.2f} at the positions of section 1 (where the dotted "
            f"curve heads; the sweep's prompts are other contexts, so its low-T α can differ).")
    if 0 < m < len(a) - 1 and above(0) and above(len(a) - 1):
        return (f"The measured α is lowest in the middle of the sweep ({at(m)}) and higher at both ends ({at(0)}, "
                f"{at(-1)}; both beyond 2 standard errors of the counts): a U. At low T p and q each concentrate "
                f"on their top token, so they agree wherever their argmaxes agree; at high T both flatten toward "
                f"uniform and Σ min(p, q) rises again; in between they are spread differently and disagree most."
                + tail)
    where = "inside the sweep" if 0 < m < len(a) - 1 else "at an end of the sweep"
    return (f"The measured α is lowest {where} ({at(m)}; ends {at(0)} and {at(-1)}), but this run does not show a U "
            f"beyond the noise (2 standard errors of the counts): no claim about its shape here." + tail)


def rule_sentence(row: dict) -> str:
    """The verdict on the rule shown: its test against p at this sample size, and how far its exact output is from p."""
    verdict = "consistent with p" if row["consistent_with_p"] else "not distributed as p"
    return (f"Shown: <b>{row['rule']}</b>: chi-square {row['statistic']:.1f} on {row['df']} degrees of freedom, "
            f"{_fmt_p(row['p_value'])}, so its output is {verdict} at level {row['level']}; its exact output is "
            f"{row['tv_to_p']:.3f} away from p in total variation.")


def reference_sampling(name: str = "summary", source: str = "stdlib", folder=None) -> tuple[dict, object]:
    """({temperature: reference row} of speculative sampling against plain sampling, the machine they ran on) from
    the committed reference run (``source``'s rows, else the first source that has them); ({}, None) when no
    reference file is committed: the notebook then says so rather than compare live numbers."""
    reference = reference_or_none(name, folder)
    if reference is None:
        return {}, None
    found = {}
    for t, label, _ in SAMPLING_METHODS:
        rows = [r for r in reference.select() if r.method == label]
        rows.sort(key=lambda r: r.source != source)
        if rows:
            found[t] = rows[0]
    return found, (reference.machine_for(next(iter(found.values()))) if found else reference.machine)


def reference_sampling_sentence(rows: dict, machine) -> str:
    """Speculative sampling's speedup over plain sampling in the reference run, per temperature, and whether the
    temperatures differ beyond the repetitions' min-max (the one answer 03, 05 and the README give)."""
    if not rows:
        where = ("No reference run is committed" if machine is None else
                 f"The reference run ({machine.describe()}) has no speculative-sampling rows")
        return f"{where} (`python -m labkit reference --only summary`): nothing here compares speeds."
    parts = [f"{r.speedup.text('x')} at T = {t:g}" for t, r in sorted(rows.items())]
    text = (f"The reference run ({machine.describe()}) measured speculative sampling at {' and '.join(parts)} "
            f"against plain sampling at the same temperature")
    if len(rows) < 2:
        return text + "."
    (t0, a), (t1, b) = sorted(rows.items())[0], sorted(rows.items())[-1]
    if a.speedup.overlaps(b.speedup):
        return text + f": T = {t0:g} and T = {t1:g} are within the noise of each other."
    return text + f": {'higher' if b.speedup.median > a.speedup.median else 'lower'} at T = {t1:g}, beyond the noise."


def sweep_sentences(frame) -> list[str]:
    """What the temperature sweep shows: the trend of α (seeded counts), the live speedup's trend (a line that says
    "this machine": it checks, the reference compares), how well α and E are predicted."""
    t = list(frame["temperature"])
    out = [describe_trend(t, frame["measured_alpha"], "The measured α") + ".",
           "On this machine " + describe_trend(t, frame["measured_speedup"], "the speedup over plain sampling")
           + f" ({_spread_clause(frame)})."]
    gaps = (frame["measured_alpha"] - frame["predicted_alpha"]).abs()
    worst = int(gaps.idxmax())
    out.append(f"The α that the same decisions' p and q predict (mean Σ min(p, q)) is within {gaps.max():.3f} of the "
               f"measured acceptance at every temperature (largest gap at T = {frame['temperature'][worst]:g}, over "
               f"{int(frame['tested'][worst])} tested tokens).")
    over = frame["expected_tokens_per_step"] > frame["tokens_per_step"]
    n_over, n = int(over.sum()), len(frame)
    side = ("overestimates" if n_over > n / 2 else "underestimates" if n_over < n / 2 else "over- and underestimates")
    ratio = (frame["expected_tokens_per_step"] / frame["tokens_per_step"]).mean()
    out.append(f"Leviathan's E {side} the measured tokens per step ({n_over} of {n} temperatures above; on average "
               f"E / measured = {ratio:.2f}).")
    below = int((frame["speedup_max"] < frame["predicted_speedup"]).sum())
    lo, hi = frame["c_v"].min(), frame["c_v"].max()
    cost = ("more than one" if lo > 1 else "less than one" if hi < 1 else "about one")
    gap = (frame["measured_speedup"] - frame["predicted_speedup_cv"]).abs().max()
    out.append(f"On this machine the speedup is below Leviathan's E / (γc + 1) beyond its spread at {below} of {n} "
               f"temperatures; that formula "
               f"charges a verify step as one plain step, and here one costs c_v = {lo:.2f}–{hi:.2f} plain steps "
               f"({cost}). With the measured c_v, E / (γc + c_v) is within {math.ceil(gap * 100) / 100:.2f} "
               f"of the measured speedup at every temperature.")
    return out


def _spread_clause(frame) -> str:
    """Whether the speedup's highest and lowest temperatures differ by more than their repetitions' spread."""
    ranges = [(float(a), float(b)) for a, b in zip(frame["speedup_min"], frame["speedup_max"])]
    if all(a == b for a, b in ranges):
        return "one repetition, so no spread: a change of a few percent may be noise"
    speedups = [float(v) for v in frame["measured_speedup"]]
    lowest, highest = speedups.index(min(speedups)), speedups.index(max(speedups))
    if ranges[lowest][1] < ranges[highest][0]:
        return "the highest and the lowest differ by more than their repetitions' min–max"
    return "within the noise: the highest and the lowest overlap within their repetitions' min–max"


def _figure_widget(fig):
    """A FigureWidget when a widget frontend is available, else the static figure (still updated in place)."""
    try:
        return as_widget(fig)
    except Exception:  # no anywidget / widget frontend
        return fig


class SamplingExplorer:
    """Choose a real position and a temperature: p and q re-warped there, min(1, p/q), the residual, α and E, and a
    marker on the temperature sweep. Display it as the last expression of a cell; ``update()`` redraws."""

    def __init__(self, positions: list[SampledPosition], labels: dict[int, str], sweep_view: dict, *, gamma: int,
                 start: int | None = None, k: int = 8, width: int = FIGURE_WIDTH):
        import ipywidgets as widgets

        if not positions:
            raise ValueError("no positions: the run drafted nothing")
        self.positions, self.labels, self.gamma, self.k = positions, labels, gamma, k
        t = sweep_view["temperature"]
        self.position = widgets.Dropdown(options=[(position_label(p, labels), i) for i, p in enumerate(positions)],
                                         value=default_position(positions) if start is None else start,
                                         description="position", layout=widgets.Layout(width="720px"))
        self.temperature = widgets.FloatSlider(value=positions[0].temperature, min=min(t), max=max(t), step=0.05,
                                               description="temperature", continuous_update=False,
                                               style={"description_width": "initial"},
                                               layout=widgets.Layout(width="520px"))
        self.readout = widgets.HTML()
        self.figure = _figure_widget(distributions_figure(self.view(), where=self.where(), width=width))
        self.sweep = _figure_widget(temperature_figure(sweep_view, gamma=gamma, current=self.temperature.value,
                                                       width=width))
        self.position.observe(lambda _: self.update(), names="value")
        self.temperature.observe(lambda _: self.update(), names="value")
        children = [self.position, self.temperature, self.readout]
        children += [f for f in (self.figure, self.sweep) if isinstance(f, widgets.DOMWidget)]
        self.widget = widgets.VBox(children)
        self.update()

    def distributions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(p, q) at the chosen position and temperature."""
        return self.positions[self.position.value].at(self.temperature.value)

    def view(self) -> dict:
        p, q = self.distributions()
        return distribution_view(p, q, self.labels, k=self.k, drafted=self.positions[self.position.value].token)

    def where(self) -> str:
        return f"position {self.positions[self.position.value].position}, T = {self.temperature.value:.2f}"

    def update(self) -> None:
        view = self.view()
        fig, t = self.figure, float(self.temperature.value)
        traces = {i: {"x": view["x"], "y": view[key]} for i, key in enumerate(("p", "q", "accept", "residual"))}
        for i in (0, 1):
            traces[i]["marker.line.width"] = view["outline"]
        update_widget(fig, traces, layout={"title.text": distribution_title(view, self.where())})
        for shape in self.sweep.layout.shapes:
            if shape.name == CURRENT_T:
                shape.x0 = shape.x1 = t
                shape.visible = True
        self.readout.value = alpha_sentence(view, self.gamma)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
        for fig in (self.figure, self.sweep):
            if fig not in self.widget.children:                        # static fallback
                display(fig)


class MonteCarloPanel:
    """The Monte-Carlo of one acceptance rule at the explorer's position and temperature: choose the rule, the
    sample size, draw again. The panel title carries the chi-square test against p."""

    def __init__(self, explorer: SamplingExplorer, *, n: int, level: float = 0.01, seed: int = 0,
                 sizes=(1_000, 5_000, 20_000, 100_000), width: int = FIGURE_WIDTH):
        import ipywidgets as widgets

        self.explorer, self.level, self.seed = explorer, level, seed
        self.rule = widgets.ToggleButtons(options=list(RULES), value="speculative", description="rule")
        self.n = widgets.Dropdown(options=sorted(set(sizes) | {n}), value=n, description="draws n")
        self.again = widgets.Button(description="draw again", tooltip="new random draws (next seed)")
        self.readout = widgets.HTML()
        self.rows = self.run()
        self.figure = _figure_widget(monte_carlo_figure(*self._figure_args(), width=width, height=430))
        for control in (self.rule, self.n):
            control.observe(lambda _: self.update(), names="value")
        explorer.position.observe(lambda _: self.update(), names="value")
        explorer.temperature.observe(lambda _: self.update(), names="value")
        self.again.on_click(lambda _: self.draw_again())
        children = [widgets.HBox([self.rule]), widgets.HBox([self.n, self.again]), self.readout]
        if isinstance(self.figure, widgets.DOMWidget):
            children.append(self.figure)
        self.widget = widgets.VBox(children)
        self.update()

    def run(self) -> list[dict]:
        p, q = self.explorer.distributions()
        return monte_carlo(p, q, int(self.n.value), seed=self.seed, level=self.level)

    def _figure_args(self):
        p, _ = self.explorer.distributions()
        return p, [r for r in self.rows if r["rule"] == self.rule.value], self.explorer.labels

    def draw_again(self) -> None:
        self.seed += 1
        self.update()

    def update(self) -> None:
        self.rows = self.run()
        p, rows, labels = self._figure_args()
        view = monte_carlo_view(p, rows[0], labels, k=self.explorer.k)
        fig = self.figure
        update_widget(fig, {0: {"x": view["x"], "y": view["zero"], "error_y.array": view["noise"]},
                            1: {"x": view["x"], "y": view["deviation"],
                                "customdata": [[a, b] for a, b in zip(view["empirical"], view["p"])]}},
                      layout={"title.text": f"{int(self.n.value):,} Monte-Carlo runs of one drafted slot, tested "
                                            f"against p at level {self.level} (seed {self.seed})"})
        fig.layout.annotations[0].text = view["title"]
        self.readout.value = rule_sentence(rows[0]) + "<br>" + monte_carlo_sentence(self.rows)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
        if self.figure not in self.widget.children:
            display(self.figure)
