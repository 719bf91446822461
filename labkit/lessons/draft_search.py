"""Notebook 02, section 8: searching the whole draft on what decoding costs, and the sentences written from it.

The wall-clock rows come from :func:`labkit.measure.comparisons.adaptive.compare_configs` (one row per prompt source and
draft, each with its speedup's min-max over interleaved repeats). A draft's speedup over the sources is their
geometric mean, its range the geometric means of the per-source minima and maxima; two drafts whose ranges
overlap are "within the noise" of each other. Those rows are a live check on the reader's machine: their
sentences say "this machine" and rank nothing.

The search told straight (:func:`search_story_sentence`, :func:`searches_frame`, :func:`untrained_search_sentence`):
on `default` the priced search rediscovered the draft path training built in, so its gain over the hand-made
draft is whatever else differs (the stop rule); `plain`, which has no trained path, is where the search has to
find the set itself.
"""
from __future__ import annotations

import statistics

from ..measure.reference.loader import Spread, live_vs_reference
from .claims import join, num, overlaps, who_wins

__all__ = ["draft_summary", "searched_vs_handmade_sentence", "objectives_sentence", "bo_cost_sentence",
           "shipped_search_sentence", "config_differences", "search_story_sentence", "searches_frame",
           "untrained_search_sentence", "reference_search_sentences", "held_out_checks"]


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
    """The live check of two drafts on held-out prompts: whether this machine tells them apart (their ranges over
    the repeats overlap or not). A check, not a ranking: it says "this machine"."""
    s, h = summary[searched], summary[handmade]
    head = (f"On this machine {searched} ran at {num(s['speedup'])}x ({num(s['low'])}–{num(s['high'])}) and "
            f"{handmade} at {num(h['speedup'])}x ({num(h['low'])}–{num(h['high'])})")
    if overlaps((s["low"], s["high"]), (h["low"], h["high"])):
        return head + ": this machine does not tell them apart (the ranges overlap)."
    faster = searched if s["speedup"] > h["speedup"] else handmade
    return head + f": on this machine {faster} is faster beyond the spread over repeats."


def objectives_sentence(summary: dict, predicted: dict[str, float]) -> str:
    """Each search's pick: what its objective predicted against what this machine measured on held-out prompts
    (a live check: no ranking)."""
    parts = [f"{label} predicted {num(predicted[label])}x, measured {num(summary[label]['speedup'])}x "
             f"({num(summary[label]['low'])}–{num(summary[label]['high'])})"
             for label in predicted if label in summary]
    return "On this machine: " + "; ".join(parts) + "."


def config_differences(a, b) -> list[str]:
    """What differs between two DraftConfigs, in words ('the skip set', 'the draft weights (int8 vs fp32)',
    'the stop rule (static 0.4 vs static 0.5)', 'the longest draft (12 vs 8)'); [] when they are equal."""
    out = []
    if a.skip != b.skip:
        out.append("the skip set")
    if a.weights_label != b.weights_label:
        out.append(f"the draft weights ({a.weights_label} vs {b.weights_label})")
    if (a.policy, a.threshold) != (b.policy, b.threshold):
        out.append(f"the stop rule ({a.policy} {a.threshold:g} vs {b.policy} {b.threshold:g})")
    if a.max_draft != b.max_draft:
        out.append(f"the longest draft ({a.max_draft} vs {b.max_draft})")
    return out


def search_story_sentence(searched, trained_path, handmade, searched_name: str = "the priced search") -> str:
    """What the search found, told straight: did it rediscover the trained draft path (the blocks the model was
    trained to skip), and what else separates its pick from the hand-made draft built on that path. No verdict on
    speed: a difference is not a gain until the reference run times both (:func:`reference_search_sentences`)."""
    if trained_path is None:
        return f"This model has no trained draft path: {searched_name} had to find the set itself."
    blocks = lambda k: {("attention", i) for i in k.attention} | {("mlp", i) for i in k.mlp}      # noqa: E731
    shared = len(blocks(searched.skip) & blocks(trained_path))
    if searched.skip == trained_path:
        head = (f"{searched_name[:1].upper()}{searched_name[1:]} rediscovered the trained draft path: the same "
                f"{trained_path.n_skipped} blocks the model was trained to skip")
    else:
        head = (f"{searched_name[:1].upper()}{searched_name[1:]} chose a set sharing {shared} of its "
                f"{searched.skip.n_skipped} blocks with the trained draft path ({trained_path.n_skipped} blocks)")
    rest = [d for d in config_differences(searched, handmade) if d != "the skip set"]
    if searched.skip != trained_path:
        return head + f". Its pick differs from the hand-made draft in {join(['the skip set', *rest])}."
    if not rest:
        return head + ", with the hand-made draft's weights and stop rule: it adds nothing beyond that path."
    return head + (f". Its pick differs from the hand-made draft on that path only in {join(rest)}; whether that "
                   f"pays is read from the reference run, which times both.")


def searches_frame(rows: dict):
    """One row per model's committed search, side by side (at most 7 columns): {model: {"config": DraftConfig,
    "trained_path": SkipSet | None, "speedup": the search's own wall-clock check, "n_layers": int}}."""
    import pandas as pd

    out = {}
    for model, r in rows.items():
        c, path = r["config"], r["trained_path"]
        out[model] = {"trained draft path": "none" if path is None else f"{path.n_skipped} blocks",
                      "blocks skipped": c.skip.n_skipped, "skip set": str(c.skip),
                      "= trained path": "n/a" if path is None else ("yes" if c.skip == path else "no"),
                      "draft weights": c.weights_label, "stop rule": f"{c.policy} {c.threshold:g}",
                      "search's wall-clock check": f"{num(r['speedup'])}x"}
    return pd.DataFrame(out).T


def untrained_search_sentence(name: str, config, speedup: float, n_layers: int, reference: str,
                              reference_speedup: float) -> str:
    """The search on a model with no trained path: what it found and what its own wall-clock check measured
    beside the trained model's (committed numbers, the same check for both)."""
    return (f"`{name}` has no trained path, so its search had to find one: it skips {config.skip.n_skipped} of "
            f"{2 * n_layers} blocks with {config.weights_label} weights and measured {num(speedup)}x in its "
            f"wall-clock check, against {num(reference_speedup)}x for `{reference}`.")


def bo_cost_sentence(comparison: dict) -> str:
    """Where BO pays: the GP's own seconds per trial against an evaluation's, and the sampler verdict's spread."""
    seconds, trials = comparison["seconds"], comparison["trials"]
    per_trial = {s: statistics.median(v) / trials for s, v in seconds.items()}
    gp_overhead = per_trial["gp"] - per_trial["random"]
    finals = {("GP" if s == "gp" else "random search"): statistics.median(v) for s, v in comparison["final"].items()}
    spreads = {("GP" if s == "gp" else "random search"): (min(v), max(v)) for s, v in comparison["final"].items()}
    verdict = who_wins(finals, lower_is_better=True, what=f"median best priced ms/token after {trials} trials",
                       spreads=spreads, noise="the spread over seeds")
    base = comparison.get("summary", {}).get("baseline_ms_per_token")
    if base:
        verdict += (" Against the plain loop's " + num(base) + " ms/token that is "
                    + join([f"{num(base / v)}x for {k}" for k, v in finals.items()]) + ".")
    return (f"{verdict} A random trial took {per_trial['random']:.2f} s (the evaluation alone), a GP trial "
            f"{per_trial['gp']:.2f} s: the GP's own proposal cost {gp_overhead:.2f} s a trial. BO is worth it where "
            f"the trials it saves outweigh that, which grows with the cost of one evaluation (minutes of GPU time "
            f"for a 13B model) and with the size of the space.")


def shipped_search_sentence(best: dict, n_trials: int, seconds: float | None) -> str:
    """What the committed search found and how it was chosen (best.json's overall entry)."""
    overall = best["overall"]
    how = ("the fastest on the wall clock of its top 5" if overall.get("chosen_by", "").startswith("wall clock")
           else "the lowest objective value")
    took = f" in {seconds / 60:.1f} minutes of search" if seconds else ""
    return (f"The shipped search ({best['objective']} objective, {n_trials} trials{took}) chose trial "
            f"#{overall['trial']} of {overall['study']}, {how}.")


def reference_search_sentences(reference, sources=("stdlib", "packages")) -> list[str]:
    """02's comparisons in words, from the reference run (group '02'): per prompt source, the shipped configuration
    beside the hand-made draft on the trained path (within the noise or apart), and `plain`'s own search against
    its plain loop. [] without a reference (the caller says so)."""
    if reference is None:
        return []
    out = []
    for source in sources:
        try:
            shipped, hand = (reference.row(m, source, "02")
                             for m in ("shipped configuration", "hand-made trained path"))
        except LookupError:
            continue
        tie = shipped.speedup.overlaps(hand.speedup)
        faster = "shipped configuration" if shipped.speedup.median > hand.speedup.median else "hand-made draft"
        verdict = "within the noise of each other" if tie else f"the {faster} is faster beyond the noise"
        out.append(f"Reference run, {source} prompts: the shipped configuration {shipped.speedup.text('x')}, the "
                   f"hand-made draft on the trained path {hand.speedup.text('x')}: {verdict}.")
        try:
            plain = reference.row("plain: shipped configuration", source, "02")
        except LookupError:
            continue
        side = ("within the noise of its plain loop" if plain.speedup.low <= 1 <= plain.speedup.high else
                "faster than its plain loop" if plain.speedup.low > 1 else "slower than its plain loop")
        out.append(f"`plain`'s searched draft there: {plain.speedup.text('x')}, {side}.")
    return out


def held_out_checks(frame, reference, labels: dict[str, str]) -> list[str]:
    """The held-out live rows of this machine beside their reference rows ({live label: reference label}), one
    line per source and draft (:func:`labkit.measure.reference.loader.live_vs_reference`: 'this machine' agrees within
    the noise or not, never a ranking)."""
    if reference is None:
        return []
    out = []
    for _, row in frame[frame["method"].isin(list(labels))].iterrows():
        try:
            ref = reference.row(labels[row["method"]], row["source"], "02")
        except LookupError:
            continue
        live = Spread(row["speedup"], row["speedup_min"], row["speedup_max"])
        out.append(live_vs_reference(f"{row['method']} ({row['source']})", live, ref, reference.machine_for(ref)))
    return out
