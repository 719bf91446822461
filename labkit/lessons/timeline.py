"""Notebook 03's glue: the step replayer (◀ ▶ and a slider over a real trace), the skip set it drafts with,
one prompt drafted two ways, repetitive against novel text, and the sentences that describe the runs
(written from their numbers; notation: docs/notation.md)."""
from __future__ import annotations

import contextlib
import copy
import dataclasses

import numpy as np
import torch

from ..artifacts.prompts import repeated_share
from ..artifacts.results import skip_set_for, trained_draft_path
from ..core.decoding import autoregressive_generate, speculative_generate
from ..core.policies import AdaptiveThreshold
from ..core.skip import SkipSet
from ..measure.harness import Decoder, Method, frame, run_interleaved, summarise
from ..measure.reference.loader import Spread, live_vs_reference
from ..viz.timeline import HIGHLIGHT_NAME, as_trace, highlight_shape, step_times, timeline_figure
from ..viz.trace import step_html
from .stepper import live_figure, step_controls, stepper_box

__all__ = ["TraceReplayer", "demo_skip_set", "compare_drafters", "confidence_band_sentence", "stop_sentence",
           "verify_cost_sentence",
           "sampling_sentence", "sampling_speed_line", "drafters_sentence", "repetition_contrast",
           "repetition_sentence", "speed_sentence",
           "starting_threshold", "measure_once", "median_run", "row_speed_sentence", "carry_threshold",
           "threshold_step",
           "carry_sentence"]


class TraceReplayer:
    """Replays a trace step by step: ◀ ▶ buttons, a slider over steps, the growing text, and the
    timeline with the current step framed (the view follows the step).

    ``run``: a GenerationResult (its prompt is shown) or a Trace. Display it in a notebook as the
    last expression of a cell (or ``display(replayer)``); ``update()`` redraws for the slider value.
    """

    def __init__(self, run, tokenizer, *, window_steps: int = 8, draft_label: str = "skipped layers",
                 width: int | None = None, figure_widget: bool = True):
        import ipywidgets as widgets

        self.trace = as_trace(run)
        self.tokenizer = tokenizer
        self.prompt_ids = (run.sequences[0, :run.prompt_length].tolist() if hasattr(run, "sequences") else None)
        self.n_steps = len(self.trace.steps)
        self.times = step_times(self.trace)
        last = max(self.n_steps - 1, 0)
        window = (0, min(window_steps, self.n_steps) - 1) if self.n_steps else None
        fig = timeline_figure(self.trace, tokenizer, steps=window, draft_label=draft_label, width=width,
                              highlight_step=0 if self.n_steps else None)
        self._span_ms = fig.layout.xaxis.range[1] - fig.layout.xaxis.range[0]
        self.figure = live_figure(fig) if figure_widget else fig
        self.controls = step_controls("step", self.update, (0, 0, last), disabled=self.n_steps == 0)
        self.slider, self.prev_button, self.next_button = (self.controls.slider, self.controls.prev_button,
                                                           self.controls.next_button)
        self.html = widgets.HTML()
        self.widget = stepper_box([self.controls.row, self.html], self.figure)
        self.update()

    @property
    def step(self) -> int:
        return int(self.slider.value)

    def step_by(self, delta: int) -> None:
        self.controls.step_by(delta)

    def update(self) -> None:
        """Redraw the text and frame the current step in the timeline (panning the view to it)."""
        if self.n_steps == 0:
            self.html.value = "<i>the trace has no steps (nothing was generated)</i>"
            return
        step = self.step
        self.html.value = step_html(self.trace, self.tokenizer, step, self.prompt_ids)
        row = self.times.iloc[step]
        lo, hi = self.figure.layout.xaxis.range
        if row.draft_start_ms < lo or row.verify_end_ms > hi:     # follow the step, keeping the zoom
            lo = max(row.draft_start_ms - 0.25 * self._span_ms, -0.01 * self._span_ms)
            hi = lo + self._span_ms
        shapes = ([s for s in self.figure.layout.shapes if s.name != HIGHLIGHT_NAME]
                  + [highlight_shape(self.times, step)])
        batch = getattr(self.figure, "batch_update", None)
        with (batch() if batch else contextlib.nullcontext()):
            self.figure.layout.shapes = shapes
            self.figure.layout.xaxis.range = [lo, hi]

    def highlighted(self) -> tuple[float, float] | None:
        """(x0, x1) in ms of the frame around the current step in the figure."""
        for s in self.figure.layout.shapes:
            if s.name == HIGHLIGHT_NAME:
                return float(s.x0), float(s.x1)
        return None

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
        if self.widget.children[-1] is not self.figure:       # static figure fallback
            display(self.figure)


def demo_skip_set(model, name: str = "default", verbose: bool = True) -> SkipSet:
    """The skip set notebook 03 drafts with: :func:`labkit.artifacts.results.skip_set_for` (the searched best,
    else the model card's, else a fixed set of late blocks), said aloud."""
    n_layers = int(model.config.num_hidden_layers)
    skip, source = skip_set_for(name, n_layers)
    if skip in trained_draft_path(name).values():        # the search rediscovered it (notebook 02, section 8)
        source = "the trained draft path (the blocks training built in; the priced search in data/search chose it too)"
    if verbose:
        print(f"skip set for {name!r}: {source}: {skip} ({skip.ratio(n_layers):.0%} of blocks)")
    return skip


def compare_drafters(model, input_ids, *, skip: SkipSet, draft_model, max_new_tokens: int, policy_factory=None,
                     labels: tuple[str, str] = ("self-draft (skipped layers)", "separate draft model")) -> dict:
    """Greedy runs of the same prompt drafted by ``model`` minus ``skip`` and by ``draft_model``
    (each with a fresh policy, after a short warm-up): ``{label: GenerationResult}``."""
    policy_factory = policy_factory or AdaptiveThreshold
    speculative_generate(model, input_ids, draft_model=draft_model, policy=policy_factory(),
                         max_new_tokens=min(4, max_new_tokens))                      # warm-up: first-call costs
    runs = {}
    runs[labels[0]] = speculative_generate(model, input_ids, skip=skip, policy=policy_factory(),
                                           max_new_tokens=max_new_tokens)
    runs[labels[1]] = speculative_generate(model, input_ids, draft_model=draft_model, policy=policy_factory(),
                                           max_new_tokens=max_new_tokens)
    return runs



# -- notebook 03's sentences and the repetitive-vs-novel contrast (see labkit.lessons.claims) -----------------
def confidence_band_sentence(run, lo: float = 0.2, hi: float = 0.6) -> str:
    """How the draft's top-1 probabilities spread: what the threshold cuts into."""
    conf = np.array([c for s in as_trace(run).steps for c in s.confidence])
    if not len(conf):
        return "The run drafted nothing."
    below, band, above = (conf < lo).mean(), ((conf >= lo) & (conf < hi)).mean(), (conf >= hi).mean()
    return (f"Of the {len(conf)} tokens this run drafted, {band:.0%} had a top-1 probability between {lo:g} and "
            f"{hi:g}, {above:.0%} at least {hi:g} and {below:.0%} below {lo:g}: where the threshold sits in that "
            f"spread decides how long drafts run.")


def stop_sentence(run, steps: tuple[int, int] | None = None) -> str:
    """The ringed stops of the confidence figure (steps ``steps``, inclusive, as the figure shows them): how many of
    the tokens the draft stopped on were accepted anyway. Low confidence is a noisy guess of a wrong token; what the
    stopped draft would have proposed next, no run can tell."""
    trace = as_trace(run)
    first, last = steps if steps is not None else (0, len(trace.steps) - 1)
    window = trace.steps[max(0, first):last + 1]
    stops = [s for s in window if s.threshold is not None and s.n_drafted and s.confidence[-1] < s.threshold]
    if not stops:
        return "In the steps shown no draft stopped on low confidence."
    kept = sum(s.n_accepted == s.n_drafted for s in stops)
    text = (f"In the steps shown, {len(stops)} drafts stopped on a token below the threshold, and the target accepted "
            f"that token {kept} time{'s' if kept != 1 else ''}")
    if kept * 2 > len(stops):
        return text + (": confidence is a noisy guide here, and a lower threshold would have let those drafts run on "
                       "(whether their next tokens would have survived, this run cannot tell).")
    return text + ": most stops were on tokens the target rejected, as the threshold intends."


def verify_cost_sentence(run, plain_ms_per_token: float) -> str:
    """What a verify pass cost in this run, per step and against one plain token (c_v), and why it can be cheap."""
    s = as_trace(run).summary()
    c_v = s["verify_ms_per_step"] / plain_ms_per_token
    return (f"On this machine a verify pass of the greedy run checked d = {s['drafted_per_step']:.2f} drafted tokens "
            f"on average in {s['verify_ms_per_step']:.1f} ms, against {plain_ms_per_token:.1f} ms per plain token: "
            f"c_v = {c_v:.2f}. It stays near 1 while a forward's cost is what it pays once per call (Python and "
            f"framework work per module, reading the weights); arithmetic per token would make it about d + 1.")


def _versus(rows, a: str, b: str) -> str:
    """a against b from :func:`measure_once`'s rows: 'x ms/token against y', and slower / faster / within the noise
    by their min-max ms over the repetitions."""
    ra, rb = rows.loc[a], rows.loc[b]
    if ra["ms_min"] > rb["ms_max"]:
        verdict = "slower"
    elif ra["ms_max"] < rb["ms_min"]:
        verdict = "faster"
    else:
        verdict = "level within the noise"
    return (f"{ra['ms_per_token']:.1f} ms/token against {rb['ms_per_token']:.1f} (min–max {ra['ms_min']:.1f}–"
            f"{ra['ms_max']:.1f} and {rb['ms_min']:.1f}–{rb['ms_max']:.1f}): {verdict}")


def sampling_speed_line(rows, sampled: str, plain_sampled: str, reference=None, machine=None) -> str:
    """Speculative sampling against plain *sampling* at the same temperature (never against the greedy loop), as
    measured on this machine (:func:`measure_once`'s rows); beside its reference row when given
    (:func:`labkit.measure.reference.loader.live_vs_reference`), which alone may compare."""
    r = rows.loc[sampled]
    if reference is None:
        return (f"On this machine {sampled} ran at {r['speedup']:.2f}x plain sampling at the same temperature "
                f"({r['speedup_min']:.2f}–{r['speedup_max']:.2f} over the repetitions; {plain_sampled}: "
                f"{rows.loc[plain_sampled, 'ms_per_token']:.1f} ms/token).")
    return live_vs_reference(f"speculative sampling against {plain_sampled}",
                             Spread(r["speedup"], r["speedup_min"], r["speedup_max"]), reference, machine)


def sampling_sentence(greedy, sampled, policy=None) -> str:
    """Why sampling drafts less well than greedy here (counts of the seeded runs, no timing): accepted / drafted,
    d, the drafts wasted per emitted token, and how far the adaptive threshold moved."""
    g, s = as_trace(greedy).summary(), as_trace(sampled).summary()
    waste = lambda x: (x["drafted"] - x["accepted"]) / x["emitted"]               # noqa: E731
    moved = lambda a, b: "rose" if b > a else "fell" if b < a else "stayed"          # noqa: E731
    gd, sd = round(g["drafted_per_step"], 1), round(s["drafted_per_step"], 1)
    text = (f"Accepted / drafted {moved(round(g['acceptance_rate'], 2), round(s['acceptance_rate'], 2))} from "
            f"{g['acceptance_rate']:.0%} (greedy) to {s['acceptance_rate']:.0%} and d {moved(gd, sd)} from "
            f"{gd:.1f} to {sd:.1f}, leaving {waste(s):.2f} wasted drafts per emitted token (greedy: {waste(g):.2f})")
    text += (": a sampled draft survives with probability min(1, p/q), not whenever the argmax matches. "
             if waste(s) > waste(g) else "; sampling did not waste more drafts here. ")
    thresholds = [st.threshold for st in as_trace(sampled).steps if st.threshold is not None]
    if thresholds and policy is not None and hasattr(policy, "epsilon"):
        step = (1 - policy.beta2) * policy.epsilon
        text += (f"The adaptive threshold went from {thresholds[0]:.3f} to {thresholds[-1]:.3f} over "
                 f"{len(thresholds)} steps: one update moves it by at most (1 − β₂)·ε = {step:.3f} (section 9), too "
                 f"little to shorten drafts within one short generation.")
    return text


def drafters_sentence(runs: dict, rows=None) -> str:
    """Self-draft against a separate draft model on the same prompt: accepted / drafted, tokens per step, and the
    speed from ``rows`` (:func:`measure_once`, rows labelled as ``runs``) with its noise when given."""
    (a, ra), (b, rb) = runs.items()
    sa, sb = as_trace(ra).summary(), as_trace(rb).summary()
    text = (f"{a}: accepted / drafted {sa['acceptance_rate']:.0%}, {sa['tokens_per_step']:.2f} tokens per step; "
            f"{b}: {sb['acceptance_rate']:.0%}, {sb['tokens_per_step']:.2f}. ")
    if rows is not None:
        return text + f"On this machine the {b} against the {a} on this prompt: {_versus(rows, b, a)}."
    faster = a if sa["ms_per_token_with_prefill"] < sb["ms_per_token_with_prefill"] else b
    return text + f"On this prompt the {faster} was faster (one run each: a single prompt's ranking, not a benchmark)."


def repetition_contrast(model, tokenizer, skip: SkipSet, prompts: dict, max_new_tokens: int, lookup: int = 6,
                        initial_threshold: float = 0.6):
    """Greedy self-speculative decoding of each prompt ({label: Prompt}) without and with prompt lookup: tokens per
    step, accepted / drafted, the share of drafted tokens copied from the context (no timing: section 2 times
    once), and how
    repetitive the text is (share of new tokens completing a 4-gram seen before). A pandas DataFrame."""
    import pandas as pd

    rows = []
    for label, prompt in prompts.items():
        ids = tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        for n_lookup in (0, lookup):
            out = speculative_generate(model, ids, skip=skip, lookup=n_lookup, max_new_tokens=max_new_tokens,
                                       policy=AdaptiveThreshold(initial_threshold=initial_threshold))
            s, steps = out.trace.summary(), out.trace.steps
            copied = sum(st.n_drafted for st in steps if st.draft_source == "lookup")
            rows.append({"text": label, "prompt lookup": n_lookup, "tokens per step": s["tokens_per_step"],
                         "accepted / drafted": s["acceptance_rate"],
                         "copied share of drafts": copied / s["drafted"] if s["drafted"] else 0.0,
                         "repeated share": repeated_share(ids[0].tolist(), out.new_tokens)})
    return pd.DataFrame(rows).set_index(["text", "prompt lookup"])


def repetition_sentence(frame, lookup: int = 6) -> str:
    """What repetition does to tokens per step, and what prompt lookup did, from :func:`repetition_contrast`'s table."""
    texts = list(dict.fromkeys(frame.index.get_level_values(0)))
    by = {t: (frame.loc[(t, 0)], frame.loc[(t, lookup)]) for t in texts}
    loop = max(texts, key=lambda t: by[t][0]["repeated share"])
    novel = min(texts, key=lambda t: by[t][0]["repeated share"])
    lp, nv = by[loop], by[novel]
    text = (f"The {loop}'s text repeats itself ({lp[0]['repeated share']:.0%} of its new tokens complete a 4-gram "
            f"seen before, against {nv[0]['repeated share']:.0%} for the {novel}'s): self-drafting alone makes "
            f"{lp[0]['tokens per step']:.2f} tokens per step there against {nv[0]['tokens per step']:.2f}. ")
    moves = []
    for t in (loop, novel):
        off, on = by[t]
        verb = "rose" if on["tokens per step"] > off["tokens per step"] + 0.05 else (
            "fell" if on["tokens per step"] < off["tokens per step"] - 0.05 else "stayed")
        moves.append((t, verb, off, on))
    text += f"With prompt lookup ({lookup} tokens): " + "; ".join(
        f"on the {t}'s text {on['copied share of drafts']:.0%} of the drafted tokens were copied and tokens per step "
        f"{verb} ({off['tokens per step']:.2f} → {on['tokens per step']:.2f})" for t, verb, off, on in moves) + ". "
    if moves[0][1] == "fell":
        text += (f"Tokens per step fell on the loop because a copied draft is at most {lookup} tokens long, while the "
                 f"skipped model, with a low threshold, already drafts long runs through a loop it knows; a copied "
                 f"draft costs no draft forward, though, so fewer tokens per step can still be faster (section 2's "
                 f"interleaved table times prompt lookup on the showcase prompt; this table counts tokens, it does "
                 f"not time). ")
    return text + ("Tokens per step, and any speedup a benchmark reports, depend on how repetitive the text is: "
                   "measure on text like your users', and say which.")


def speed_sentence(speculative, plain) -> str:
    """One greedy run against the plain loop on the same prompt: faster or slower, and by how much."""
    a, b = speculative.ms_per_token, plain.ms_per_token
    verdict = "faster than" if a < 0.98 * b else "slower than" if a > 1.02 * b else "as fast as"
    return (f"On this prompt speculative decoding took {a:.1f} ms/token against {b:.1f} for the plain loop: "
            f"{verdict} plain decoding ({b / a:.2f}x; one run each, so read it as a sample, not a benchmark). "
            f"Section 8 shows how much this depends on how repetitive the text is.")


# -- one measurement of the run's drafters, the threshold's start and its carry-over (issue 28) -------------
def starting_threshold(grid, ratio: float, max_draft: int = 12) -> tuple[float, str]:
    """The adaptive threshold's start for notebook 03, read from notebook 04's grid (``grid``, a PlaygroundGrid):
    at the skip ratio nearest ``ratio``, adaptive policy, fp32 drafts, the threshold whose cell ran fastest
    (median of the repetitions), and a sentence naming which other thresholds its noise cannot tell from it and
    which ran slower beyond it."""
    setting = grid.nearest(ratio=ratio, max_draft=max_draft, policy="adaptive", draft_weights="fp32")
    speed, lo, hi = (grid.vs_threshold(m, setting) for m in ("speedup", "speedup_min", "speedup_max"))
    best = int(np.nanargmax(speed))
    tie = [t for i, t in enumerate(grid.thresholds) if i != best and hi[i] >= lo[best] and lo[i] <= hi[best]]
    slower = [t for i, t in enumerate(grid.thresholds) if hi[i] < lo[best]]
    text = (f"Notebook 04's grid (adaptive policy, skip ratio {setting.ratio:.3f}, max draft {setting.max_draft}) ran "
            f"fastest with the threshold starting at {grid.thresholds[best]:g} ({speed[best]:.2f}x the plain loop, "
            f"min–max {lo[best]:.2f}–{hi[best]:.2f})")
    if tie:
        text += f"; {', '.join(f'{t:g}' for t in tie)} within its noise"
    if slower:
        text += (f"; {', '.join(f'{t:g}' for t in slower)} slower beyond it "
                 f"({', '.join(f'{speed[grid.thresholds.index(t)]:.2f}x' for t in slower)})")
    return float(grid.thresholds[best]), text + ". This notebook starts there."


def measure_once(model, input_ids, *, skip: SkipSet, threshold: float, draft_model=None, lookup: int = 6,
                 temperature: float = 0.7, seed: int = 0, max_new_tokens: int = 48, repeats: int = 3):
    """Every way this notebook decodes its prompt, timed once: the plain loop, self-drafting (greedy, with prompt
    lookup in front, sampled), a separate draft model when given, and plain sampling (the sampled row's baseline:
    its speedup, c and c_v are against plain sampling, its ``baseline`` column says so), interleaved over
    ``repeats`` repetitions
    (labkit.measure.harness), each call with a fresh adaptive policy starting at ``threshold``. Returns
    (rows as a DataFrame indexed by label, the Runs: their traces for the figures)."""
    def spec(**kw):
        return lambda ids, n: speculative_generate(model, ids, policy=AdaptiveThreshold(initial_threshold=threshold),
                                                   max_new_tokens=n, **kw)

    decoders = [Decoder(Method("plain", "plain loop"), lambda ids, n: autoregressive_generate(model, ids, n)),
                Decoder(Method("self-spec", "self-draft (skipped layers)"), spec(skip=skip)),
                Decoder(Method("self-spec", f"self-draft + prompt lookup ({lookup})", lookup=lookup),
                        spec(skip=skip, lookup=lookup))]
    if draft_model is not None:
        decoders.append(Decoder(Method("separate model", "separate draft model"), spec(draft_model=draft_model)))
    sampled = Method("self-spec", f"self-draft, sampling T={temperature:g}", greedy=False)
    plain_sampled = Method("plain", f"plain sampling T={temperature:g}", greedy=False)
    decoders.append(Decoder(sampled, lambda ids, n: spec(skip=skip, do_sample=True, temperature=temperature,
                                                         generator=torch.Generator().manual_seed(seed))(ids, n)))
    decoders.append(Decoder(plain_sampled, lambda ids, n: autoregressive_generate(
        model, ids, n, do_sample=True, temperature=temperature, generator=torch.Generator().manual_seed(seed))))
    runs = run_interleaved(decoders, [input_ids], max_new_tokens=max_new_tokens, repeats=repeats, progress=False)
    rows = frame(summarise(runs))
    against = frame(summarise(runs, plain_sampled))          # sampling is timed against plain sampling
    ratios = ["speedup", "speedup_min", "speedup_max", "c", "c_v", "limit", "measured_over_limit"]
    for label in (sampled.label, plain_sampled.label):
        rows.loc[label, ratios] = against.loc[label, ratios]
    rows["baseline"] = ["plain loop"] * len(rows)
    rows.loc[[sampled.label, plain_sampled.label], "baseline"] = plain_sampled.label
    return rows, runs


def median_run(runs, method):
    """The run of ``method`` (one prompt) whose repetition's ms/token is the median of the repetitions (the lower
    middle for an even count): the repetition a figure should show beside :func:`measure_once`'s rows, whose
    ms/token is the median (the last repetition's need not be). Its trace carries the harness's timing of that call
    (the whole call, as the rows time it; the decoder's own clock starts a little later), so that the figure's
    ms/token and the sentence's are one number."""
    reps = runs.records[method]
    ms = [1e3 * sum(r.seconds for r in rep) / max(sum(r.n_new for r in rep), 1) for rep in reps]
    middle = sorted(range(len(ms)), key=ms.__getitem__)[(len(ms) - 1) // 2]
    record = reps[middle][0]
    out = record.result
    if getattr(out, "trace", None) is None:
        return out
    trace = copy.copy(out.trace)
    trace.total_s = record.seconds
    return dataclasses.replace(out, trace=trace, elapsed_s=record.seconds)


def row_speed_sentence(rows, label: str, repeats: int, reference: str = "plain loop") -> str:
    """One row of :func:`measure_once` against the plain loop: its speedup with the min-max over the ``repeats``
    repetitions, and "within the noise" when that range holds 1."""
    r, n = rows.loc[label], repeats
    if r["speedup_min"] > 1:
        verdict = "faster than the plain loop"
    elif r["speedup_max"] < 1:
        verdict = "slower than the plain loop"
    else:
        verdict = "level with the plain loop within the noise"
    return (f"{label}: {r['ms_per_token']:.1f} ms/token against {rows.loc[reference, 'ms_per_token']:.1f} for the "
            f"{reference}, {r['speedup']:.2f}x (min–max {r['speedup_min']:.2f}–{r['speedup_max']:.2f} over "
            f"{n} interleaved repetitions): {verdict} on this prompt, on this machine.")


def carry_threshold(model, tokenizer, skip: SkipSet, prompts, *, threshold: float, max_new_tokens: int) -> dict:
    """The paper's protocol against the lab's default: one AdaptiveThreshold carried across consecutive ``prompts``
    (speculative_generate keeps a given policy's state across calls) and a fresh one for every prompt.
    ``{label: [GenerationResult per prompt]}``."""
    carried = AdaptiveThreshold(initial_threshold=threshold)
    out = {"one policy carried across the prompts": [], "a fresh policy for every prompt": []}
    for prompt in prompts:
        ids = tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        for label, policy in zip(out, (carried, AdaptiveThreshold(initial_threshold=threshold))):
            out[label].append(speculative_generate(model, ids, skip=skip, policy=policy,
                                                   max_new_tokens=max_new_tokens))
    return out


def threshold_step(policy) -> float:
    """How far one update moves Draft & Verify's threshold: t ← β₂·t + (1 − β₂)·(t ± ε) = t ± (1 − β₂)·ε."""
    return (1 - policy.beta2) * policy.epsilon


def carry_sentence(runs: dict, policy) -> str:
    """What carrying the policy did: the threshold's start and end over all steps, AR against its target, and the
    steps one update of (1 − β₂)·ε needs to move the threshold by 0.1."""
    label = next(iter(runs))
    steps = [s for r in runs[label] for s in as_trace(r).steps]
    thr = [s.threshold for s in steps if s.threshold is not None]
    ar = steps[-1].policy_state.get("acceptance_rate") if steps else None
    step = threshold_step(policy)
    moved = thr[-1] - thr[0] if thr else 0.0
    diffs = [b - a for a, b in zip(thr, thr[1:])]
    down, up = sum(d < -step / 2 for d in diffs), sum(d > step / 2 for d in diffs)   # the moves, one per update
    n = down + up

    def balance(side: str, count: int, other: str, other_count: int) -> str:
        """How many updates had AR on each side of the target (the net move alone hides the mix)."""
        if other_count == 0:
            return f"AR was {side} the target at every one of the {n} updates, so"
        return f"AR was {side} the target at {count} of the {n} updates and {other} it at {other_count}, so on balance"

    where = (f"fell: {balance('above', down, 'below', up)} the rule let drafts run longer" if moved < -step else
             f"rose: {balance('below', up, 'above', down)} the rule stopped drafts earlier" if moved > step else
             "stayed where it started" + (f": AR was above the target at {down} of the {n} updates and below it at "
                                          f"{up}" if n else ""))
    text = (f"Carried across {len(runs[label])} prompts ({len(steps)} steps), the threshold went from {thr[0]:.3f} "
            f"to {thr[-1]:.3f} and {where} (AR {ar:.2f} at the end, target {policy.target:g}). "
            if thr and ar is not None else "")
    return text + (f"Each update moves it by at most (1 − β₂)·ε = ({1 - policy.beta2:g})·{policy.epsilon:g} = "
                   f"{step:.3f}, so moving by 0.1 takes at least {round(0.1 / step)} steps: a fresh policy for every "
                   f"prompt (the lab's default) restarts before it gets there; the paper carries one policy through a "
                   f"whole evaluation run.")
