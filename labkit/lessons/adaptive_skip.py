"""Notebook 07's glue: the sentences written from the measured numbers, and the explorer widget.

Every comparative sentence is chosen by the data it describes (which source is higher, which method wins,
whether a target is met), so it stays true in FAST mode, in full mode and after any rerun; the tests feed each
function numbers that reverse its claim.
"""
from __future__ import annotations

import math

import ipywidgets as widgets

from ..artifacts.models import load_draft_head
from ..measure.comparisons.adaptive import PLAIN, set_timeline
from ..viz.strategies import set_timeline_figure
from ..viz.widgets import as_widget, update_widget
from .claims import difference_se, drafted_tokens, join, overlaps, proportions_differ

__all__ = ["transfer_sentence", "acceptance_sentence", "acceptance_sentences", "winner_sentence", "overhead_sentence",
           "changes_sentence", "set_changes", "lever_sentence", "joined_timeline", "most_changes", "busiest_timeline",
           "state_lines",
           "with_int8_draft", "draft_weights_sentence", "draft_head_for", "with_draft_head", "draft_head_sentence",
           "choosing_cost_sentence", "faster_or_noise", "runtime_sentence", "sets_sentence", "SetExplorer"]


def _fmt(x: float, spec: str = ".2f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _value(frame, source: str, method: str, column: str) -> float:
    if column not in frame:
        return float("nan")
    row = frame[(frame["source"] == source) & (frame["method"] == method)]
    return float(row[column].iloc[0]) if len(row) else float("nan")


def _before_after(frame, source: str, before: str, after: str, *columns: str) -> list[tuple[float, float]]:
    """(value of ``before``, value of ``after``) on ``source`` for each column: the two rows a sentence compares."""
    return [(_value(frame, source, before, c), _value(frame, source, after, c)) for c in columns]


def _range(frame, source: str, method: str, column: str = "speedup") -> tuple[float, float] | None:
    """(min, max) of ``column`` over the interleaved repetitions, None without them."""
    lo, hi = _value(frame, source, method, f"{column}_min"), _value(frame, source, method, f"{column}_max")
    return None if math.isnan(lo) or math.isnan(hi) else (lo, hi)


def faster_or_noise(frame, source: str, a: str, b: str) -> int:
    """+1: ``a`` faster than ``b`` on ``source`` beyond the noise (their speedup min–max ranges do not overlap),
    -1: slower beyond it, 0: within the noise (or no ranges to tell)."""
    ra, rb = _range(frame, source, a), _range(frame, source, b)
    if ra is None or rb is None or overlaps(ra, rb):
        return 0
    return 1 if _value(frame, source, a, "speedup") > _value(frame, source, b, "speedup") else -1


def _x(frame, source: str, method: str) -> str:
    r = _range(frame, source, method)
    return f"{_fmt(_value(frame, source, method, 'speedup'))}×" + (f" ({_fmt(r[0])}–{_fmt(r[1])})" if r else "")


def runtime_sentence(seconds: float, fast: bool) -> str:
    """How long this run took, from its own clock (a stated runtime must be a measured one)."""
    return f"This run ({'FAST' if fast else 'full'} mode) took {seconds:.0f} s on this machine, kernel start excluded."


def _blocks(skip) -> set[str]:
    return {f"attention {i}" for i in skip.attention} | {f"MLP {i}" for i in skip.mlp}


def sets_sentence(sets: dict) -> str:
    """How the two shipped static sets relate (read from the sets, not assumed): the same set, one inside the other,
    or two different sets. When they are one set, their rows below are two measurements of it: their gap is noise."""
    if "trained draft path" not in sets:
        return f"This model ships only the searched set, {sets['searched set']}."
    searched, trained = _blocks(sets["searched set"]), _blocks(sets["trained draft path"])
    if searched == trained:
        return (f"Here the two are the same set, {sets['searched set']}: the search found the trained draft path "
                f"itself, so the two static rows below are two measurements of one set (any gap between them is "
                f"noise).")
    extra, missing = sorted(searched - trained), sorted(trained - searched)
    if not missing:
        return (f"The searched set extends the trained draft path by {len(extra)} block{'s' * (len(extra) != 1)} "
                f"({', '.join(extra)}).")
    if not extra:
        return (f"The searched set is the trained draft path less {len(missing)} block{'s' * (len(missing) != 1)} "
                f"({', '.join(missing)}).")
    return (f"The two sets differ: the searched set also skips {', '.join(extra)} and keeps {', '.join(missing)}, "
            f"which the trained draft path skips.")


def transfer_sentence(agreement, set_label: str, home: str = "stdlib", away: str = "packages") -> str:
    """Does ``set_label``'s agreement hold on the text it was not chosen on? (``agreement``: source, set, agreement,
    and n_positions where known: then a gap within two standard errors of the difference of the two shares is
    within the noise; without counts, a gap of 2 points or less is)."""
    table = agreement.rename(columns={"set": "method"})
    a_home, a_away = _value(table, home, set_label, "agreement"), _value(table, away, set_label, "agreement")
    if math.isnan(a_home) or math.isnan(a_away):
        return f"The {set_label} was not measured on both {home} and {away} prompts."
    n_home, n_away = _value(table, home, set_label, "n_positions"), _value(table, away, set_label, "n_positions")
    se = difference_se(a_home, n_home, a_away, n_away)
    gap = a_home - a_away
    within = abs(gap) <= 0.02 if math.isnan(se) else not proportions_differ(a_home, n_home, a_away, n_away)
    if within:
        noise = ("" if math.isnan(se) else f": the gap is within the noise ({n_home:.0f} and {n_away:.0f} "
                 f"positions, one standard error of the difference {_fmt(100 * se, '.1f')} points)")
        return (f"The {set_label} agrees about as well on {away} prompts ({_fmt(a_away)}) as on {home} prompts "
                f"({_fmt(a_home)}){noise}.")
    if gap > 0:
        return (f"The {set_label} agrees with the full model on {_fmt(a_home)} of positions on {home} prompts but "
                f"only {_fmt(a_away)} on {away} prompts: {_fmt(100 * gap, '.0f')} points lost on text it was not "
                f"chosen on.")
    return (f"The {set_label} agrees better on {away} prompts ({_fmt(a_away)}) than on {home} prompts "
            f"({_fmt(a_home)}): on these prompts it transfers.")


def _drafted(frame, source: str, method: str) -> float:
    """Drafted tokens behind one repetition's acceptance of ``method`` on ``source`` (NaN without the counts)."""
    row = frame[(frame["source"] == source) & (frame["method"] == method)]
    return drafted_tokens(row.iloc[0]) if len(row) else float("nan")


def acceptance_sentence(frame, method: str, home: str = "stdlib", away: str = "packages") -> str:
    """How the acceptance of ``method``'s drafts moves between the two sources: with the drafted-token counts
    (new_tokens, tokens_per_step, drafted_per_step), a move within two standard errors of the difference of the two
    shares stays within the noise; without them, a move of 0.01 or less."""
    a_home, a_away = _value(frame, home, method, "acceptance"), _value(frame, away, method, "acceptance")
    if math.isnan(a_home) or math.isnan(a_away):
        return f"{method} was not measured on both sources."
    n_home, n_away = _drafted(frame, home, method), _drafted(frame, away, method)
    se = difference_se(a_home, n_home, a_away, n_away)
    if math.isnan(se):
        moved = abs(a_away - a_home) > 0.01
        noise = ""
    else:
        moved = proportions_differ(a_home, n_home, a_away, n_away)
        noise = (f" (about {n_home:.0f} and {n_away:.0f} drafted tokens, one standard error of the difference "
                 f"{_fmt(100 * se, '.1f')} points)")
    if not moved:
        return (f"With {method}, the acceptance of drafted tokens is {_fmt(a_home, '.3f')} on {home} and "
                f"{_fmt(a_away, '.3f')} on {away} prompts: " + ("within the noise" + noise if noise else
                                                                "about the same") + ".")
    verb = "falls" if a_away < a_home else "rises"
    return (f"With {method}, the acceptance of drafted tokens {verb} from {_fmt(a_home)} to {_fmt(a_away)} from "
            f"{home} to {away} prompts{', beyond the noise' + noise if noise else ''}.")


def acceptance_sentences(frame, methods, home: str = "stdlib", away: str = "packages") -> list[str]:
    """:func:`acceptance_sentence` once per group of methods that drafted alike on both sources, "on this machine"
    (an adaptive strategy's sets follow its time budget, so groups and acceptance can move from run to run)."""
    groups: dict[tuple, list[str]] = {}
    for method in methods:
        key = tuple(_fmt(_value(frame, s, method, c), ".6f") for s in (home, away)
                    for c in ("acceptance", "tokens_per_step"))                 # NaN-safe: "n/a" equals "n/a"
        groups.setdefault(key, []).append(method)
    return [acceptance_sentence(frame, names[0], home, away).replace(f"With {names[0]},",
                                                                     f"On this machine, with {join(names)},", 1)
            for names in groups.values()]


def winner_sentence(frame, source: str, target: float | None = None, reference: str | None = None) -> str:
    """Which method is fastest on ``source``, against ``reference`` (a static row) and ``target`` (× the loop)."""
    rows = frame[(frame["source"] == source) & (frame["method"] != PLAIN)].dropna(subset=["speedup"])
    if rows.empty:
        return f"No method was measured on {source} prompts."
    best = rows.loc[rows["speedup"].idxmax()]
    spread = _range(frame, source, best["method"])             # with repetitions, every verdict reads the noise
    if spread is None:
        text = (f"On this machine, on {source} prompts, the highest speedup was {best['method']}'s, "
                f"{_fmt(best['speedup'])}×")
    else:
        text = (f"On this machine, on {source} prompts, the highest median was {best['method']}'s, "
                f"{_x(frame, source, best['method'])}")
    if reference is not None and reference != best["method"] and reference in set(rows["method"]):
        if spread is None or _range(frame, source, reference) is None:
            text += f" ({reference}: {_fmt(_value(frame, source, reference, 'speedup'))}×)"
        else:
            verdict = faster_or_noise(frame, source, best["method"], reference)
            text += (f" ({reference}: {_x(frame, source, reference)}, "
                     f"{'within the noise of it' if verdict == 0 else 'slower beyond the noise'})")
    if target is not None:
        if spread is None:
            text += (f", which meets the target of {target:g}×" if best["speedup"] >= target
                     else f", short of the target of {target:g}×")
        else:
            text += (f", which meets the target of {target:g}× beyond the noise" if spread[0] >= target else
                     f", short of the target of {target:g}× beyond the noise" if spread[1] < target else
                     f", within the noise of the target of {target:g}×")
    return text + "."


def overhead_sentence(frame, budget: float = 0.1) -> str:
    """The range of the time the adaptive rows booked as choosing, and whether every row meets ``budget``: only part
    of what choosing costs (:func:`choosing_cost_sentence` reads the rest from c, c_v and ms per token)."""
    rows = frame[(frame["method"] != PLAIN) & ~frame["method"].str.startswith("static")].dropna(subset=["select_share"])
    if rows.empty:
        return "No adaptive strategy was measured."
    lo, hi = rows.loc[rows["select_share"].idxmin()], rows.loc[rows["select_share"].idxmax()]
    text = (f"On this machine, the time the strategies booked as choosing is between "
            f"{_fmt(100 * lo['select_share'], '.1f')} % "
            f"({lo['method']}, {lo['source']} prompts) and {_fmt(100 * hi['select_share'], '.1f')} % ({hi['method']}, "
            f"{hi['source']} prompts) of decode time")
    over = rows[rows["select_share"] > budget]
    if over.empty:
        text += f": every strategy stays within the {100 * budget:g} % target"
    else:
        names = ", ".join(f"{r['method']} on {r['source']}" for _, r in over.iterrows())
        text += f": above the {100 * budget:g} % target for {names}"
    return text + " (bookkeeping inside the draft and verify phases is not booked: it shows in c and c_v)."


def set_changes(matrix) -> int:
    """How many times the drafted set changed between consecutive self-drafted steps of a timeline."""
    columns = [tuple(col) for col in zip(*matrix) if -1 not in col]
    return sum(a != b for a, b in zip(columns, columns[1:]))


def joined_timeline(results, n_layers: int) -> list[list[int]]:
    """The set timelines of several runs of one strategy, end to end (its state carries from run to run)."""
    rows = [[] for _ in range(2 * n_layers)]
    for result in results:
        for row, part in zip(rows, set_timeline(result, n_layers)[1]):
            row.extend(part)
    return rows


def most_changes(comparison, n_layers: int) -> tuple[str, str, int, int]:
    """(source, method, prompt index, set changes) of the adaptive run whose set changed most (first if none did)."""
    runs = [(set_changes(set_timeline(r, n_layers)[1]), source, method, i)
            for (source, method), results in comparison.results.items()
            if method != PLAIN and not method.startswith("static") for i, r in enumerate(results)]
    changes, source, method, index = max(runs, key=lambda run: run[0])
    return source, method, index, changes


def changes_sentence(method: str, matrix, source: str | None = None) -> str:
    """How often ``method`` changed its set in ``matrix``, "on this machine": a strategy chooses within a time
    budget, so its choices follow this machine's timings and can differ from run to run."""
    columns = [tuple(col) for col in zip(*matrix) if -1 not in col]
    n, distinct = set_changes(matrix), len(set(columns))
    head = f"On this machine{f', on {source} prompts,' if source else ''} {method}"
    if not columns:
        return f"{head} drafted no step with its own set."
    if n == 0:
        return f"{head} drafted all {len(columns)} self-drafted steps with one set."
    return (f"{head} changed its set {n} time{'s' if n != 1 else ''} over {len(columns)} self-drafted steps, "
            f"using {distinct} different sets.")


def busiest_timeline(comparison, n_layers: int) -> tuple[str, str, list[list[int]], list[int]]:
    """(source, method, matrix, prompt starts) of the adaptive strategy whose set changed most over one source's
    prompts end to end. Why: its state carries over, so one prompt alone can show only straight stripes."""
    keys = [k for k in comparison.results if k[1] != PLAIN and not k[1].startswith("static")]
    source, method = max(keys, key=lambda k: set_changes(joined_timeline(comparison.results[k], n_layers)))
    results = comparison.results[(source, method)]
    lengths = [len(result.trace.steps) for result in results]
    return source, method, joined_timeline(results, n_layers), [sum(lengths[:i]) for i in range(1, len(lengths))]


def state_lines(strategies: dict, source: str) -> list[str]:
    """One line per strategy run on ``source`` (``strategies``: {(source, method): strategy}): the set it ended
    on, what choosing cost, then its own bookkeeping (its estimates, e.g. a smoothed acceptance, not the measured
    rates of the tables)."""
    lines = []
    for (src, method), strategy in strategies.items():
        if src != source:
            continue
        state = dict(strategy.state())
        head = (f"{method}: ends on {state.pop('skip')} ({state.pop('n_skipped')} blocks skipped); on this machine "
                f"chose for "
                f"{_fmt(state.pop('select_ms'), '.1f')} ms = {_fmt(100 * state.pop('select_share'), '.1f')} % of "
                f"the decode time it saw (its own ledger, over every call; the table's share is per measured run)")
        state.pop("strategy", None)
        own = ", ".join(f"{k.replace('_', ' ')} {_fmt(v, '.3g') if isinstance(v, float) else v}"
                        for k, v in state.items())
        lines.append(head + (f"; its own state: {own}" if own else ""))
    return lines


def choosing_cost_sentence(frame, source: str, method: str, static: str) -> str:
    """What choosing cost ``method`` on ``source``, against ``static`` (a static row drafting with the set the
    strategy starts from): the draft cost c, the verify cost c_v and ms per token of both rows, and whether the
    ms-per-token difference exceeds the noise. The strategy's own select share is only the time it books as
    choosing; the rest of its overhead (its bookkeeping in the draft and verify phases) hides in c and c_v."""
    (c0, c1), (v0, v1), (m0, m1), (s0, s1) = _before_after(frame, source, static, method, "c", "c_v",
                                                           "ms_per_token", "select_share")
    if any(math.isnan(v) for v in (c0, c1, v0, v1, m0, m1)):
        return f"{method} on {source} prompts: no drafting steps to compare with {static}."
    r0, r1 = _range(frame, source, static, "ms"), _range(frame, source, method, "ms")
    tied = r0 is None or r1 is None or overlaps(r0, r1)
    delta = m1 - m0
    verdict = (f"within the noise (min–max {_fmt(r0[0])}–{_fmt(r0[1])} and {_fmt(r1[0])}–{_fmt(r1[1])} ms)" if tied
               and r0 and r1 else "within the noise" if tied else
               f"{'slower' if delta > 0 else 'faster'} beyond the noise (min–max {_fmt(r0[0])}–{_fmt(r0[1])} and "
               f"{_fmt(r1[0])}–{_fmt(r1[1])} ms)")
    return (f"On this machine, {source} prompts, {method} against {static}: c {_fmt(c0)} → {_fmt(c1)}, "
            f"c_v {_fmt(v0)} → {_fmt(v1)}, "
            f"{_fmt(m0)} → {_fmt(m1)} ms per token ({'+' if delta >= 0 else '−'}{_fmt(abs(delta))} ms, "
            f"{'+' if delta >= 0 else '−'}{_fmt(100 * abs(delta) / m0, '.0f')} %): {verdict}; the time it booked as "
            f"choosing was {_fmt(100 * s1, '.1f')} % of decode time.")


def lever_sentence(frame, source: str, method: str) -> str:
    """Which cost binds ``method`` on ``source``: per step it drafts d tokens at c each and verifies once at c_v
    (both in full steps) for A + 1 tokens; the analytic limit is (A + 1) / (d c + c_v)."""
    row = frame[(frame["source"] == source) & (frame["method"] == method)]
    if row.empty or math.isnan(float(row["limit"].iloc[0])):
        return f"{method} has no drafting steps on {source} prompts."
    r = row.iloc[0]
    drafting, verifying = r["drafted_per_step"] * r["c"], r["c_v"]
    bigger = (f"drafting ({_fmt(r['drafted_per_step'])} tokens × c = {_fmt(r['c'])} = {_fmt(drafting)} full steps) "
              f"costs more per step than verifying (c_v = {_fmt(verifying)})" if drafting > verifying else
              f"verifying (c_v = {_fmt(verifying)} full steps) costs more per step than drafting "
              f"({_fmt(r['drafted_per_step'])} tokens × c = {_fmt(r['c'])} = {_fmt(drafting)})")
    free = (r["accepted_per_step"] + 1) / verifying
    return (f"On this machine, {method} on {source} prompts emitted {_fmt(r['accepted_per_step'] + 1)} tokens "
            f"per step; {bigger}. Its "
            f"analytic limit is {_fmt(r['limit'])}× (measured {_fmt(r['speedup'])}×); with free drafts it would be "
            f"{_fmt(free)}×.")


def with_int8_draft(methods: dict) -> tuple[dict, dict, str, str]:
    """One static set (the trained draft path if the model has one, else the searched set) twice: with the
    model's own weights and with int8 draft weights. Returns (methods, {int8 label: "int8"}, the set's label, the
    int8 label): what :func:`~labkit.measure.comparisons.adaptive.compare_strategies` takes, and the two row names."""
    base = next((m for m in ("static: trained draft path", "static: searched set") if m in methods), None)
    if base is None:
        raise ValueError(f"no static set among the methods {sorted(methods)}")
    quantized = f"{base}, int8 draft"
    return {base: methods[base], quantized: methods[base]}, {quantized: "int8"}, base, quantized


def _acceptance_moved(frame, source: str, before: str, after: str) -> str:
    """'raised / lowered acceptance (a0 → a1)', or 'left acceptance at a0' when the two round alike; with the
    drafted-token counts, a move within two standard errors of the difference is said to be within the noise."""
    a0, a1 = _value(frame, source, before, "acceptance"), _value(frame, source, after, "acceptance")
    old, new = _fmt(a0, ".3f"), _fmt(a1, ".3f")
    if old == new:
        return f"left acceptance at {old}"
    points = f"{'+' if a1 > a0 else '−'}{_fmt(100 * abs(a1 - a0), '.1f')} points"
    verb = f"{'raised' if a1 > a0 else 'lowered'} acceptance"
    n0, n1 = _drafted(frame, source, before), _drafted(frame, source, after)
    if math.isnan(difference_se(a0, n0, a1, n1)):
        return f"{verb} ({old} → {new}, {points})"
    counts = f"the sampling noise of about {n0:.0f} and {n1:.0f} drafted tokens"
    if proportions_differ(a0, n0, a1, n1):
        return f"{verb} ({old} → {new}, {points}, beyond {counts})"
    return f"moved acceptance only within the noise ({old} → {new}, {points}; {counts})"


def draft_head_for(model_name):
    """The model's draft head (:func:`labkit.load_draft_head`), or None when it has none (a model of your own)."""
    try:
        return load_draft_head(model_name)
    except FileNotFoundError:
        return None


def with_draft_head(pair: dict, weights: dict, base: str, head, sets: dict) -> tuple[dict, dict, dict, str | None]:
    """Section 6's methods plus one row that drafts ``base``'s set with int8 weights *and* the model's draft head,
    when there is a head and it was fitted for that set (``sets``: label -> SkipSet, as ``reference_sets`` gives).
    Returns (methods, draft weights, {label: head}, the new label or None): what ``compare_strategies`` takes."""
    if head is None or head.skip != sets.get(base.removeprefix("static: ")):
        return pair, weights, {}, None
    headed = f"{base} + draft head, int8 draft"
    return {**pair, headed: lambda: head.skip}, {**weights, headed: "int8"}, {headed: head}, headed


def draft_head_sentence(frame, source: str, quantized: str, headed: str) -> str:
    """What the draft head changed on ``source`` against the same set's int8 draft without it: acceptance, tokens
    per step, verify cost, speed; each direction read from the numbers."""
    (a0, a1), (t0, t1), (v0, v1), (s0, s1) = _before_after(frame, source, quantized, headed, "acceptance",
                                                           "tokens_per_step", "c_v", "speedup")
    if any(math.isnan(v) for v in (a0, a1, t0, t1, s0, s1)):
        return f"{source} prompts: no drafting steps to compare."
    speed = {1: "faster beyond the noise", -1: "slower beyond the noise", 0: "within the noise of it without the head"}[
        faster_or_noise(frame, source, headed, quantized)]
    return (f"On this machine, {source} prompts: the draft head "
            f"{_acceptance_moved(frame, source, quantized, headed)}, tokens "
            f"per step went {_fmt(t0)} → {_fmt(t1)} and the verify cost c_v {_fmt(v0)} → {_fmt(v1)}; the same set "
            f"decoded at {_x(frame, source, quantized)} → {_x(frame, source, headed)} the plain loop, {speed}.")


def draft_weights_sentence(frame, source: str, base: str, quantized: str) -> str:
    """What int8 draft weights changed on ``source``: the draft cost c; the acceptance, which can move either way
    (rounded weights change the draft's q, never the verification); the speed against the noise, and its limit."""
    (c0, c1), (a0, a1), (s0, s1), (l0, l1) = _before_after(frame, source, base, quantized, "c", "acceptance",
                                                           "speedup", "limit")
    if any(math.isnan(v) for v in (c0, c1, a0, a1, s0, s1)):
        return f"{source} prompts: no drafting steps to compare."
    cost = "cut" if c1 < c0 else "did not cut"
    speed = {1: "faster beyond the noise", -1: "slower beyond the noise", 0: "within the noise of fp32"}[
        faster_or_noise(frame, source, quantized, base)]
    return (f"On this machine, {source} prompts: int8 weights {cost} the draft cost c ({_fmt(c0)} → {_fmt(c1)} of a "
            f"plain step); "
            f"rounding changes the draft's q, and here it {_acceptance_moved(frame, source, base, quantized)}; "
            f"the same set decoded at {_x(frame, source, base)} → "
            f"{_x(frame, source, quantized)} the plain loop, {speed} (analytic limit {_fmt(l0)}× → {_fmt(l1)}×).")


def distinct_methods(comparison, methods: list[str]) -> list[str]:
    """``methods`` less every static one whose set an earlier static method already drafts with (two names for one
    set, e.g. a searched set that is the trained draft path, would draw the same picture twice)."""
    seen, out = set(), []
    for method in methods:
        sets = {str(getattr(s, "initial", None)) for (_, name), s in getattr(comparison, "strategies", {}).items()
                if name == method and getattr(s, "name", "") == "static"}
        key = frozenset(sets)
        if sets and key in seen:
            continue
        if sets:
            seen.add(key)
        out.append(method)
    return out


class SetExplorer(widgets.VBox):
    """Pick a strategy and a prompt source (and a prompt): the picture of the sets it drafted with, step by step,
    and a sentence on how often the set changed. Trace data go to the FigureWidget as plain lists."""

    def __init__(self, comparison, n_layers: int, *, method: str | None = None, source: str | None = None,
                 prompt: int = 0):
        self.comparison, self.n_layers = comparison, n_layers
        keys = [k for k in comparison.results if k[1] != PLAIN]
        methods, sources = list(dict.fromkeys(m for _, m in keys)), list(dict.fromkeys(s for s, _ in keys))
        methods = distinct_methods(comparison, methods)
        self.method = widgets.Dropdown(options=methods, value=method or methods[0], description="strategy")
        self.source = widgets.Dropdown(options=sources, value=source or sources[0], description="prompts")
        n_prompts = len(next(iter(comparison.results.values())))
        self.prompt = widgets.IntSlider(value=prompt, min=0, max=max(0, n_prompts - 1), description="prompt #")
        self.note = widgets.HTML()
        steps, matrix = self._timeline()
        self.figure = as_widget(set_timeline_figure(steps, matrix, n_layers))
        for control in (self.method, self.source, self.prompt):
            control.observe(lambda _: self.refresh(), names="value")
        super().__init__([widgets.HBox([self.method, self.source, self.prompt]), self.figure, self.note])
        self.refresh()

    def _timeline(self):
        result = self.comparison.results[(self.source.value, self.method.value)][self.prompt.value]
        return set_timeline(result, self.n_layers)

    def refresh(self) -> None:
        steps, matrix = self._timeline()
        labels = {-1: "no self-draft", 0: "kept", 1: "skipped"}
        update_widget(self.figure, {0: {"x": list(steps), "z": [list(row) for row in matrix],
                                        "customdata": [[labels[v] for v in row] for row in matrix]}},
                      layout={"title.text": f"{self.method.value} on {self.source.value} prompt "
                                            f"#{self.prompt.value}: the blocks each step's draft skipped"})
        self.note.value = changes_sentence(self.method.value, matrix)
