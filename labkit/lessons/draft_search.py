"""Notebook 02, section 8: searching the whole draft on what decoding costs, and the sentences written from it.

The wall-clock rows come from :func:`labkit.measure.comparisons.adaptive.compare_configs` (one row per prompt source and
draft, each with its speedup's min-max over interleaved repeats). A draft's speedup over the sources is their
geometric mean, its range the geometric means of the per-source minima and maxima; two drafts whose ranges
overlap are "within the noise" of each other.
"""
from __future__ import annotations

import statistics

from .claims import num, overlaps, who_wins

__all__ = ["draft_summary", "searched_vs_handmade_sentence", "objectives_sentence", "bo_cost_sentence",
           "shipped_search_sentence"]


def draft_summary(frame) -> dict[str, dict]:
    """{draft label: {"speedup", "low", "high", "acceptance", "identical"}} over the sources of a comparison
    frame (the plain loop left out)."""
    rows = frame[frame["method"] != "plain loop"]
    out = {}
    for label, group in rows.groupby("method", sort=False):
        out[label] = {"speedup": statistics.geometric_mean(group["speedup"]),
                      "low": statistics.geometric_mean(group["speedup_min"]),
                      "high": statistics.geometric_mean(group["speedup_max"]),
                      "acceptance": float(group["acceptance"].mean()), "identical": bool(group["identical"].all())}
    return out


def searched_vs_handmade_sentence(summary: dict, searched: str, handmade: str) -> str:
    """Does the searched draft decode at least as fast as the best hand-made one, beyond the noise?"""
    s, h = summary[searched], summary[handmade]
    ratio = s["speedup"] / h["speedup"]
    head = (f"On held-out prompts {searched} ran at {num(s['speedup'])}x the plain loop ({num(s['low'])}–"
            f"{num(s['high'])}) and {handmade} at {num(h['speedup'])}x ({num(h['low'])}–{num(h['high'])}), "
            f"a ratio of {num(ratio)}")
    if overlaps((s["low"], s["high"]), (h["low"], h["high"])):
        return head + ": within the noise of each other."
    return head + (": the search's draft is faster beyond the noise." if ratio > 1
                   else ": the hand-made draft is faster beyond the noise.")


def objectives_sentence(summary: dict, predicted: dict[str, float]) -> str:
    """Each search's pick: what its objective predicted against what it measured on held-out prompts."""
    parts = [f"{label} predicted {num(predicted[label])}x, measured {num(summary[label]['speedup'])}x"
             for label in predicted if label in summary]
    best = who_wins({label: summary[label]["speedup"] for label in predicted if label in summary},
                    lower_is_better=False, what="measured speedup",
                    spreads={label: (summary[label]["low"], summary[label]["high"]) for label in predicted
                             if label in summary}, noise="the spread over repeats")
    n = sum(label in summary for label in predicted)
    if any(label not in predicted for label in summary):     # other rows of the table may be faster: say whose lead
        return "; ".join(parts) + f". Of these {n} picks, " + best
    return "; ".join(parts) + ". " + best[:1].upper() + best[1:]


def bo_cost_sentence(comparison: dict) -> str:
    """Where BO pays: the GP's own seconds per trial against an evaluation's, and the sampler verdict's spread."""
    seconds, trials = comparison["seconds"], comparison["trials"]
    per_trial = {s: statistics.median(v) / trials for s, v in seconds.items()}
    gp_overhead = per_trial["gp"] - per_trial["random"]
    finals = {("GP" if s == "gp" else "random search"): statistics.median(v) for s, v in comparison["final"].items()}
    spreads = {("GP" if s == "gp" else "random search"): (min(v), max(v)) for s, v in comparison["final"].items()}
    verdict = who_wins(finals, lower_is_better=True, what=f"median best priced ms/token after {trials} trials",
                       spreads=spreads, noise="the spread over seeds")
    return (f"{verdict} A random trial took {per_trial['random']:.2f} s (the evaluation alone); a GP trial "
            f"{per_trial['gp']:.2f} s, so the GP's own proposal cost {gp_overhead:.2f} s a trial: BO is worth it "
            f"where what it saves in trials outweighs that, which grows with the cost of one evaluation (minutes "
            f"of GPU time for a 13B model) and with the size of the space.")


def shipped_search_sentence(best: dict, n_trials: int, seconds: float | None) -> str:
    """What the committed search found and how it was chosen (best.json's overall entry)."""
    overall = best["overall"]
    how = ("the fastest on the wall clock of its top 5" if overall.get("chosen_by", "").startswith("wall clock")
           else "the lowest objective value")
    took = f" in {seconds / 60:.1f} minutes of search" if seconds else ""
    return (f"The shipped search ({best['objective']} objective, {n_trials} trials{took}) chose trial "
            f"#{overall['trial']} of {overall['study']}, {how}.")
