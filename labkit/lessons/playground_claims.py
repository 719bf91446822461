"""Notebook 04's sentences, written from the grid's numbers (see :mod:`labkit.lessons.claims`).

Each answer to a guiding question, the "best found" label, the live-run comparison and the summary are
chosen by the data: a peak inside the range or at an edge, curves rising, falling or flat, two cells
told apart or within the noise (the min-max of the speedup over the grid's repetitions), and which draft
weights (fp32 or int8) the fastest cell reads. Every answer about a slice reads the setting's draft weights. Notation:
docs/notation.md (accepted / drafted is the measured acceptance rate; α is reserved for the per-token
acceptance probability).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..measure.bench.results import is_number, upgrade_row
from ..measure.grid.results import PlaygroundGrid, Setting, regenerate_command
from .claims import direction, is_missing, join, num, overlaps, peak, trend

__all__ = ["guiding_answers", "peak_answer", "threshold_answer", "threshold_ties", "twin_answer", "peak_ratios",
           "best_found_sentence", "live_sentence", "live_verdict", "verify_cost_sentence", "weights_sentence",
           "weights_answer",
           "summary", "bench_sentence"]


def _range(grid: PlaygroundGrid, setting: Setting) -> tuple[float, float]:
    cell = grid.cell(setting)
    return cell["speedup_min"], cell["speedup_max"]


def peak_ratios(grid: PlaygroundGrid, setting: Setting) -> list[float]:
    """The skip ratios (on ``setting``'s slice) whose speedup range overlaps the peak's: where the peak may be,
    given the noise."""
    sp, lo, hi = (grid.vs_ratio(m, setting) for m in ("speedup", "speedup_min", "speedup_max"))
    i, _ = peak(grid.ratios, sp)
    return [r for j, r in enumerate(grid.ratios) if not is_missing(sp[j]) and overlaps((lo[j], hi[j]), (lo[i], hi[i]))]


def _peak_place(grid: PlaygroundGrid, s: Setting, i: int, where: str) -> str:
    sp, lo, hi = (grid.vs_ratio(m, s) for m in ("speedup", "speedup_min", "speedup_max"))
    text = (f"the speedup peaks at skip ratio {grid.ratios[i]:.3f} ({num(sp[i])}×, min–max {num(lo[i])}–"
            f"{num(hi[i])} over the repetitions; {where})")
    tied = [r for r in peak_ratios(grid, s) if r != grid.ratios[i]]
    if tied:
        text += (f"; the speedups at {join([f'{r:.3f}' for r in tied])} overlap that range, so within the noise "
                 f"the peak could be there too")
    return text


def peak_answer(grid: PlaygroundGrid, s: Setting) -> str:
    """Q1: where the speedup peaks along the skip ratio, and why it rises and falls (c against accepted / drafted)."""
    sp, acc, c = (grid.vs_ratio(m, s) for m in ("speedup", "acceptance_rate", "c"))
    ratios = grid.ratios
    i, where = peak(ratios, sp)
    c_why = {-1: "skipped blocks are not computed",
             0: "a forward of this model is mostly fixed overhead, so skipping blocks saves little",
             1: "skipping saved no measurable time here"}[direction(c[0], c[-1])]
    a_why = {-1: "the draft drifts further from the full model", 0: "the draft stays close to the full model",
             1: "the searched sets at higher ratios happen to agree better"}[direction(acc[0], acc[-1])]
    head = acc[: i + 1]
    if 0 < i < len(ratios) - 1 and max(head) - min(head) <= 0.1 and acc[-1] < min(head) - 0.1:   # a plateau, a cliff
        acc_text = (f"accepted / drafted stays between {num(min(head))} and {num(max(head))} up to {ratios[i]:.3f}, "
                    f"then falls to {num(acc[-1])} at {ratios[-1]:.3f}")
    else:
        acc_text = trend(acc[0], acc[-1], "accepted / drafted")
    text = (f"With the {s.policy} policy, threshold {s.threshold:g} and max draft {s.max_draft}, "
            f"{_peak_place(grid, s, i, where)}. Going right, {trend(c[0], c[-1], 'the draft cost c')} ({c_why}) and "
            f"{acc_text} ({a_why}).")
    if 0 < i < len(ratios) - 1:
        gain = "the cheaper drafts" if direction(c[0], c[-1]) < 0 else "what skipping saves"
        text += (f" Past {ratios[i]:.3f} the tokens lost to rejected drafts outweigh {gain}, and the speedup drops "
                 f"to {num(sp[-1])}× at {ratios[-1]:.3f}.")
    elif i == len(ratios) - 1:
        text += " Within the grid's range the cheaper drafts still pay for the lost acceptance: no fall yet."
    else:
        text += " Every extra skipped block costs more acceptance than it saves in draft cost: no rise."
    limit = grid.vs_ratio("analytic_speedup", s)
    if not np.all(np.isnan(limit)):
        ia = int(np.nanargmax(limit))
        text += (" The dashed analytic limit, built from the same c, c_v and tokens per step, peaks at the same "
                 "skip ratio." if ia == i else
                 f" The dashed analytic limit, built from the same c, c_v and tokens per step, "
                 f"peaks at {ratios[ia]:.3f}.")
    return text


def threshold_answer(grid: PlaygroundGrid, s: Setting) -> str:
    """Q2: what a higher threshold does to accepted / drafted, drafted per step, tokens per step and speed."""
    th = grid.thresholds
    acc, tps, d, sp = (grid.vs_threshold(m, s) for m in
                       ("acceptance_rate", "tokens_per_step", "drafted_per_step", "speedup"))
    j, ja = int(np.nanargmax(sp)), int(np.nanargmax(acc))
    text = (f"At skip ratio {s.ratio:.3f}, raising the threshold from {th[0]:g} to {th[-1]:g}: "
            f"{trend(acc[0], acc[-1], 'accepted / drafted')}")
    text += ", because the draft stops before the tokens it is unsure of. " if direction(acc[0], acc[-1]) > 0 else ". "
    text += (f"{trend(d[0], d[-1], 'The drafted tokens per step d')} and "
             f"{trend(tps[0], tps[-1], 'the tokens per step')}")
    text += ", so each verify pass buys fewer tokens. " if direction(tps[0], tps[-1]) < 0 else ". "
    lo, hi = grid.vs_threshold("speedup_min", s), grid.vs_threshold("speedup_max", s)
    ties = threshold_ties(grid, s)
    text += (f"The speedup is highest at threshold {th[j]:g} ({num(sp[j])}×, min–max {num(lo[j])}–{num(hi[j])})"
             + (f"; the speedup at {_thresholds([th[k] for k in ties])} overlaps that range, so within the noise "
                f"{'it is' if len(ties) == 1 else 'they are'} as fast" if ties else ""))
    if abs(acc[j] - acc[ja]) <= 0.01:
        above = [k for k in range(j + 1, len(th))]
        last = len(th) - 1
        drop = (f"the speedup drops to {num(sp[-1])}× (min–max {num(lo[-1])}–{num(hi[-1])}, below the peak's beyond "
                f"the noise)" if last not in ties else
                f"the speedup ends at {num(sp[-1])}× (min–max {num(lo[-1])}–{num(hi[-1])}, within the noise of the "
                f"peak)")
        text += (f". Threshold {th[j]:g} is also (within 0.01) where accepted / drafted is highest ({num(acc[ja])})"
                 + (f". Above it accepted / drafted no longer rises ({num(acc[j])} → {num(acc[-1])}) while d keeps "
                    f"falling ({num(d[j])} → {num(d[-1])}) and {drop}: past that point a higher threshold only "
                    f"shortens the drafts." if above else "."))
    elif ja in threshold_ties(grid, s):
        text += (f"; at threshold {th[ja]:g}, where accepted / drafted is highest ({num(acc[ja])} against "
                 f"{num(acc[j])}), the speedup's range overlaps it: within the noise the two are equally fast.")
    else:
        text += (f", not where accepted / drafted is highest ({num(acc[ja])} at threshold {th[ja]:g}, against "
                 f"{num(acc[j])} at {th[j]:g}): the extra acceptance there does not pay for the shorter drafts.")
    return text


def threshold_ties(grid: PlaygroundGrid, s: Setting) -> list[int]:
    """Indexes of the thresholds (on ``s``'s slice) other than the fastest whose speedup range overlaps the
    fastest's: the noise cannot rank them."""
    sp, lo, hi = (grid.vs_threshold(m, s) for m in ("speedup", "speedup_min", "speedup_max"))
    j = int(np.nanargmax(sp))
    return [k for k in range(len(sp)) if k != j and not is_missing(sp[k]) and overlaps((lo[k], hi[k]), (lo[j], hi[j]))]


def _thresholds(values) -> str:
    """'threshold 0.4' / 'thresholds 0.2 and 0.4'."""
    return f"threshold{'s' if len(values) > 1 else ''} {join([f'{v:g}' for v in values])}"


def verify_cost_sentence(grid: PlaygroundGrid, draft_weights: str | None = None) -> str:
    """What a verify pass costs in this grid (the cells with ``draft_weights`` if given), in plain tokens (c_v),
    measured and from forward passes only."""
    cv, cvf = grid.values("c_v", draft_weights), grid.values("c_v_forward", draft_weights)
    where = "this grid" if draft_weights is None else f"this grid's {draft_weights} cells"
    text = (f"In {where} a verify pass costs c_v = {num(np.nanmin(cv))}–{num(np.nanmax(cv))} plain tokens "
            f"(median {num(np.nanmedian(cv))})")
    if not np.all(np.isnan(cvf)):
        text += f"; counting forward passes only, c_v = {num(np.nanmin(cvf))}–{num(np.nanmax(cvf))}"
    if np.nanmin(cv) < 0.99:                        # (printed to 2 decimals: 0.99x is 'below 1')
        text += (". A measured c_v below 1 does not mean a verify pass is cheaper than a plain step: it is a ratio of "
                 "two wall-clock timings taken at different moments, and noise on a busy machine moves it (a forward "
                 "over several tokens never costs less than a one-token forward)")
    return text + ". Either way a step pays about one c_v however few tokens it drafted, so very short drafts " \
                  "spend close to a verify pass per token even when all of them are accepted."


def twin_answer(grid: PlaygroundGrid, other: PlaygroundGrid, s: Setting) -> str:
    """Q3: where the twin peaks, how high, and why lower (its accepted / drafted from the first skipped blocks)."""
    so = other.nearest(threshold=s.threshold, max_draft=s.max_draft, policy=s.policy, draft_weights=s.draft_weights)
    sp, acc = grid.vs_ratio("speedup", s), grid.vs_ratio("acceptance_rate", s)
    sp_o, acc_o = other.vs_ratio("speedup", so), other.vs_ratio("acceptance_rate", so)
    i, io = int(np.nanargmax(sp)), int(np.nanargmax(sp_o))
    lo_o, hi_o = _range(other, replace(so, ratio=other.ratios[io]))
    text = (f"For {other.name!r} on the same slice, accepted / drafted is {num(acc_o[0])} at skip ratio "
            f"{other.ratios[0]:.3f} (vs {num(acc[0])} for {grid.name!r} at {grid.ratios[0]:.3f}) and "
            f"{num(acc_o[-1])} at {other.ratios[-1]:.3f} (vs {num(acc[-1])} at {grid.ratios[-1]:.3f}). Its speedup "
            f"peaks at {other.ratios[io]:.3f} with {num(sp_o[io])}× (min–max {num(lo_o)}–{num(hi_o)}), against "
            f"{num(sp[i])}× at {grid.ratios[i]:.3f} for {grid.name!r}. ")
    if hi_o < 1.0:
        text += ("Even its best cell on this slice stays below 1 beyond the noise: its drafts do not pay for "
                 "themselves here. ")
    elif lo_o <= 1.0:
        text += "Its best cell on this slice is within the noise of plain decoding (its range contains 1). "
    else:
        text += "Its best cell on this slice beats plain decoding beyond the noise. "
    lower = float(np.nanmean(acc_o)) < float(np.nanmean(acc)) - 0.05
    text += (f"Averaged over the skip ratios its accepted / drafted is {num(np.nanmean(acc_o))} against "
             f"{num(np.nanmean(acc))}: " + ("it keeps less of its agreement once blocks are skipped, which caps its "
                                           "tokens per step and so its peak." if lower else
                                           "about as high, so the difference in speed comes from elsewhere."))
    return text


def guiding_answers(grid: PlaygroundGrid, other: PlaygroundGrid | None = None,
                    setting: Setting | None = None) -> list[dict]:
    """The guiding questions, where to look in the plots, and the answer in this grid's numbers (on ``setting``'s
    slice, its draft weights included; a fourth on the draft weights when the grid has both)."""
    s = setting or grid.nearest()
    out = [
        {"question": "At what skip ratio does speedup peak, and why does it fall after?",
         "look_at": "top row: speedup vs skip ratio, beside accepted / drafted and the draft cost c",
         "answer": peak_answer(grid, s)},
        {"question": "Why does a higher threshold raise acceptance but not always speed?",
         "look_at": "bottom row: accepted / drafted, tokens per step, d and speedup vs threshold",
         "answer": threshold_answer(grid, s) + " " + verify_cost_sentence(grid, s.draft_weights)},
    ]
    if other is not None:
        out.append({"question": f"Where does the {other.name!r} twin peak, and why lower?",
                    "look_at": "the model toggle, or the side-by-side figure: "
                               "accepted / drafted and speedup vs skip ratio",
                    "answer": twin_answer(grid, other, s)})
    if len(grid.draft_weights) > 1:
        out.append({"question": "What do int8 draft weights change, and does the fastest cell use them?",
                    "look_at": "the draft weights toggle: the draft cost c and the speedup move, accepted / drafted "
                               "barely",
                    "answer": weights_answer(grid, s)})
    return out


def best_found_sentence(grid: PlaygroundGrid) -> str:
    """The best cell, its noise, how many cells (of either draft weights) the noise cannot tell apart from it,
    and, when the grid has both, the fastest fp32 cell against the fastest int8 one."""
    setting, cell = grid.best()
    near = grid.within_noise(setting, any_weights=True)
    text = (f"Best found in the grid of {grid.name!r}: {setting.describe()}. It ran at {num(cell['speedup'])}× (median "
            f"of {len(cell['speedup_repeats'])} repetitions, min–max {num(cell['speedup_min'])}–"
            f"{num(cell['speedup_max'])}). ")
    if not near:
        text += "No other cell's range reaches it: it is ahead beyond the noise."
    else:
        ratios = sorted({s.ratio for s in near})
        text += (f"{len(near)} other cell(s) have overlapping ranges (at skip ratios "
                 f"{join([f'{r:.3f}' for r in ratios])}): read it as one of the best settings, not the best.")
    return text + (" " + weights_sentence(grid) if len(grid.draft_weights) > 1 else "")


def _fastest_by_weights(grid: PlaygroundGrid) -> str:
    """The fastest fp32 cell against the fastest int8 cell: which weights the faster one reads, or that their
    min-max ranges overlap (within the noise)."""
    best = {w: grid.best(w) for w in ("fp32", "int8")}
    win = "int8" if best["int8"][1]["speedup"] > best["fp32"][1]["speedup"] else "fp32"
    lose = "fp32" if win == "int8" else "int8"
    (ws, wc), (_, lc) = best[win], best[lose]
    spread = {w: f"min–max {num(c['speedup_min'])}–{num(c['speedup_max'])}" for w, (_, c) in best.items()}
    if overlaps(_range(grid, ws), _range(grid, best[lose][0])):
        return (f"The fastest {win} cell ({num(wc['speedup'])}×, {spread[win]}) and the fastest {lose} cell "
                f"({num(lc['speedup'])}×, {spread[lose]}) are within the noise of each other: their ranges overlap, "
                f"so the grid cannot say which draft weights are faster at their best.")
    return (f"The fastest cell reads {win} draft weights: {num(wc['speedup'])}× ({spread[win]}; {ws.describe()}) "
            f"vs {num(lc['speedup'])}× with {lose} ({spread[lose]}), beyond the noise.")


def _int8_effect(grid: PlaygroundGrid, s: Setting) -> str:
    """What int8 draft weights do at ``s``'s knobs against fp32: the draft cost c and accepted / drafted."""
    f, i = (grid.cell(replace(s, draft_weights=w)) for w in ("fp32", "int8"))
    change = direction(f.get("c"), i.get("c"))
    text = (f"int8 draft weights {'cut' if change < 0 else 'raise' if change > 0 else 'leave'} the draft cost c "
            + (f"at about {num(f.get('c'))}" if change == 0 else f"from {num(f.get('c'))} to {num(i.get('c'))}")
            + " of a plain step")
    text += {-1: ". int8 shrinks the matrix products only, not the per-module framework work that is most of "
                 "this small model's step (notebook 11)",
             0: " (here the int8 drafts were not measurably cheaper)",
             1: " (in this grid the int8 kernel cost more than the bytes it saves)"}[change]
    fa, ia = f["acceptance_rate"], i["acceptance_rate"]
    text += (f". Accepted / drafted stays about the same ({num(fa)} with fp32, {num(ia)} with int8)"
             if direction(fa, ia) == 0 and not (is_missing(fa) or is_missing(ia)) else
             f". {trend(fa, ia, 'Accepted / drafted')}")
    if i.get("identical_to_plain") is True:
        text += "; the output stays token-identical to plain decoding (verification reads the model's own weights)"
    return text + "."


def weights_sentence(grid: PlaygroundGrid) -> str:
    """fp32 against int8 draft weights at their best cells, and why (c and accepted / drafted at the int8 best)."""
    if len(grid.draft_weights) < 2:
        return (f"The grid of {grid.name!r} holds {join(grid.draft_weights)} draft weights only, so it cannot "
                f"compare fp32 and int8 drafts: `{regenerate_command(grid.data['model'])}` measures both.")
    return (f"{_fastest_by_weights(grid)} At the fastest int8 cell's knobs, "
            f"{_int8_effect(grid, grid.best('int8')[0])}")


def weights_answer(grid: PlaygroundGrid, s: Setting) -> str:
    """Q4: int8 against fp32 draft weights at ``s``'s knobs (c, accepted / drafted, the speedups and whether the
    noise separates them), then at the two weights' best cells."""
    at_fp32, at_int8 = (replace(s, draft_weights=w) for w in ("fp32", "int8"))
    f, i = grid.cell(at_fp32), grid.cell(at_int8)
    text = (f"At skip ratio {s.ratio:.3f}, {s.policy} policy, threshold {s.threshold:g} and max draft {s.max_draft}, "
            f"{_int8_effect(grid, s)} The speedup is {num(i['speedup'])}× with int8 against {num(f['speedup'])}× "
            f"with fp32")
    text += (": within the noise (the min–max ranges overlap). "
             if overlaps(_range(grid, at_fp32), _range(grid, at_int8))
             else f": {'int8' if i['speedup'] > f['speedup'] else 'fp32'} is faster beyond the noise. ")
    return text + _fastest_by_weights(grid)


LIVE_WIDE = 0.25      # a live range wider than this share of its speedup cannot place a cell


def live_verdict(live: dict, cell: dict) -> str:
    """A live run beside the grid's cell, both with their min-max ranges, and what the ranges allow: agreement
    within the noise, a difference beyond both ranges, or a live range too wide (wider than ``LIVE_WIDE`` of its
    speedup and than twice the grid's) to separate the cell from the grid's value. Never ranks cells."""
    v, lo, hi = live["speedup"], live["speedup_min"], live["speedup_max"]
    g, glo, ghi = cell["speedup"], cell["speedup_min"], cell["speedup_max"]
    head = (f"this machine measured {num(v)}x ({num(lo)}–{num(hi)}), the grid {num(g)}x "
            f"({num(glo)}–{num(ghi)})")
    if any(is_missing(x) for x in (v, lo, hi, g, glo, ghi)):
        return head + ": a value is missing, nothing to compare"
    if not overlaps((lo, hi), (glo, ghi)):
        return head + f": this machine runs the cell {'faster' if lo > ghi else 'slower'}, beyond both ranges"
    if hi - lo > max(LIVE_WIDE * v, 2 * (ghi - glo)):
        return head + ": this run's range is too wide to separate the cell from the grid's value"
    return head + ": this machine agrees with the grid within the noise"


def live_sentence(live: dict, cell: dict) -> str:
    """The live run against the grid's cell (:func:`live_verdict`), and the plain loop's speed on both machines."""
    verdict = live_verdict(live, cell)
    return (f"{verdict[:1].upper()}{verdict[1:]}. The plain loop took {num(live['plain_ms_per_token'])} ms/token "
            f"on this machine, {num(cell['plain_ms_per_token'])} in the grid.")


def summary(grid: PlaygroundGrid, other: PlaygroundGrid | None, s: Setting) -> list[str]:
    """The notebook's closing bullets, each built from the grid (markdown strings)."""
    sp = grid.vs_ratio("speedup", s)
    i, where = peak(grid.ratios, sp)
    th, acc_t, sp_t = grid.thresholds, grid.vs_threshold("acceptance_rate", s), grid.vs_threshold("speedup", s)
    j, ja = int(np.nanargmax(sp_t)), int(np.nanargmax(acc_t))
    bullets = [f"Speedup is a ratio, (A + 1) / (d·c + c_v): skipping more lowers the draft cost c and accepted / "
               f"drafted together. On the paper's slice of `{grid.name}` the speedup peaks at skip ratio "
               f"{grid.ratios[i]:.3f} ({where}), where the cheaper drafts stop paying for the lost acceptance."]
    if abs(acc_t[j] - acc_t[ja]) <= 0.01:
        ties = threshold_ties(grid, s)
        tied = f", {_thresholds([th[k] for k in ties])} within its noise" if ties else ""
        bullets.append(f"The threshold trades acceptance against draft length. Here the fastest threshold "
                       f"({th[j]:g}{tied}) is also the one with the highest accepted / drafted; above it only the "
                       f"drafts shrink.")
    elif ja in threshold_ties(grid, s):
        bullets.append(f"The threshold trades acceptance against draft length: the fastest threshold here ({th[j]:g}) "
                       f"and the one with the highest accepted / drafted ({th[ja]:g}) are within the noise of each "
                       f"other.")
    else:
        bullets.append(f"The threshold trades acceptance against draft length: the fastest threshold here ({th[j]:g}) "
                       f"is not the one with the highest accepted / drafted ({th[ja]:g}).")
    if other is not None:
        so = other.nearest(threshold=s.threshold, max_draft=s.max_draft, policy=s.policy, draft_weights=s.draft_weights)
        bullets.append(f"Training sets how much a model can skip: `{other.name}` peaks at "
                       f"{num(np.nanmax(other.vs_ratio('speedup', so)))}× on the same slice, `{grid.name}` at "
                       f"{num(np.nanmax(sp))}×.")
    if len(grid.draft_weights) > 1:
        bullets.append(f"int8 draft weights change only what a draft costs and how often it is right, never the "
                       f"output. {_fastest_by_weights(grid)}")
    bullets.append(f"Every speedup in the grid carries its noise (a cell's min–max over repetitions is "
                   f"{100 * grid.data['noise']['median_relative_spread']:.0f} % wide at the median): rank two "
                   f"settings only when their ranges do not overlap. The **run live** button checks a setting on "
                   f"your machine; `{grid.data['command']}` regenerates the grid.")
    return bullets


def bench_sentence(rows: list[dict]) -> str:
    """The benchmark against the lab's plain loop: how `generate` compares with it (why the figure measures against
    the loop), the fastest row, and where self-drafting with the adaptive threshold stands, from its committed rows."""
    timed = [r for r in map(upgrade_row, rows) if is_number(r.get("speedup"))]
    fastest = max(timed, key=lambda r: r["speedup"])
    text = f"The fastest row is {fastest['method']} ({fastest['speedup']:.2f}x the lab's plain loop)"
    runner = max((r for r in timed if r is not fastest), key=lambda r: r["speedup"], default=None)
    spread = lambda r: (r.get("ms_min", r["ms_per_token"]), r.get("ms_max", r["ms_per_token"]))     # noqa: E731
    if runner is not None and "ms_per_token" in fastest and "ms_per_token" in runner \
            and overlaps(spread(fastest), spread(runner)):
        text += f", level within the noise with {runner['method']} ({runner['speedup']:.2f}x)"
    ours = [r for r in timed if r["family"] == "labkit" and "adaptive" in r["method"] and "lookup" not in r["method"]
            and r["model"] == "default"]
    if ours:
        text += f"; {ours[0]['method']} reaches {ours[0]['speedup']:.2f}x"
    generate = [r for r in timed if r["method"].endswith("HF generate") and r["model"] == "default"]
    if generate:
        text += (f". `generate` itself runs at {generate[0]['speedup']:.2f}x the plain loop, so a speedup over "
                 f"`generate` would flatter every row by {1 / generate[0]['speedup'] - 1:.0%}: the figure measures "
                 f"against the loop")
    return text + (". The benchmark decodes other prompts than the grid, and longer generations: a speedup depends on "
                   "the text, so compare settings within one table, not across them. Its prompts and machine are in "
                   "`data/bench/`; rerun it for yours.")


def break_even_sentence(cell: dict, alpha_star: float, gamma: int) -> str:
    """Where a grid cell stands against its break-even α (exercise 5): its measured accepted / drafted (which sits
    below the per-token α, docs/notation.md) against α*, and whether its speedup range (min-max over the
    repetitions) lies above 1, below it, or holds it (within the noise)."""
    rate, lo, hi = cell.get("acceptance_rate"), cell.get("speedup_min"), cell.get("speedup_max")
    if is_missing(alpha_star):
        head = (f"With c = {num(cell.get('c'), '.3f')} and c_v = {num(cell.get('c_v'))} no α pays at γ = {gamma}: "
                f"even a draft that is always right costs more per step than it emits.")
    else:
        side = "above" if not is_missing(rate) and rate > alpha_star else "below"
        head = (f"A fixed draft of γ = {gamma} at this cell's c and c_v breaks even at α = {alpha_star:.2f}; the "
                f"cell's measured accepted / drafted is {num(rate)}, {side} it (α itself is higher still: tokens "
                f"drafted after a rejection count as drafted, never as accepted).")
    if is_missing(lo) or is_missing(hi):
        return head
    verdict = ("faster than the plain loop" if lo > 1 else "slower than the plain loop" if hi < 1 else
               "level with the plain loop within the noise")
    return (head + f" Its measured speedup, {num(cell.get('speedup'))}x (min–max {num(lo)}–{num(hi)} over the "
                   f"repetitions), is {verdict}.")
