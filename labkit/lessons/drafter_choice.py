"""Notebook 09's answer to "which drafter when", read from the committed reference runs, with this machine's live
run shown only as a check against them.

A live FAST run (a few prompts, a few dozen tokens) names winners that flip between runs; the reference runs
(:mod:`~labkit.measure.reference.loader`: quiet, at least 5 interleaved repetitions, the machine recorded) do not.
So every comparative sentence here reads a :class:`~labkit.measure.reference.loader.Reference`, and a live row
appears only beside its reference row, in a line that says "this machine"
(:func:`~labkit.measure.reference.loader.live_vs_reference`).

- :func:`reference_sentences`: the fastest drafter on each prompt kind and who is within the noise of it
  (:func:`labkit.lessons.reference_claims.fastest_on`), what prompt lookup adds in front of the shipped draft on
  each kind, and the noise floor (the A/A pair), each under 50 words;
- :func:`live_checks`: each live drafter of 09's comparison beside the reference row of the same configuration;
- :data:`LIVE_TO_REFERENCE`: which live drafter is which reference row.
"""
from __future__ import annotations

import pandas as pd

from ..measure.reference.loader import AA, SOURCES, Reference, Spread, aa_sentence
from .reference_claims import group_sentences, live_beside_reference

__all__ = ["LIVE_TO_REFERENCE", "reference_sentences", "live_checks", "lookup_gain_sentence"]

#: 09's live drafter labels (labkit.measure.comparisons.drafters) and the reference rows measuring the same
#: configuration (group "summary"); an early-exit label carries its exit layer, so it is matched by prefix.
LIVE_TO_REFERENCE = {"layer skip (best draft)": "shipped configuration",
                     "lookup + layer skip (best draft)": "shipped + prompt lookup",
                     "separate model": "separate draft model", "early exit": "early exit"}


def lookup_gain_sentence(reference: Reference, sources, group: str = "summary",
                         draft: str = "shipped configuration", combined: str = "shipped + prompt lookup") -> str:
    """What prompt lookup in front of the shipped draft adds on each prompt kind, from the reference rows."""
    parts = []
    for source in sources:
        try:
            a, b = reference.row(draft, source, group).speedup, reference.row(combined, source, group).speedup
        except LookupError:
            continue
        word = "within the noise" if a.overlaps(b) else ("more" if b.low > a.high else "less")
        parts.append(f"{source} {a.median:.2f}× → {b.median:.2f}× ({word})")
    if not parts:
        return "The reference run has no lookup rows."
    return "Prompt lookup in front of the shipped draft, reference run: " + "; ".join(parts) + "."


def reference_sentences(reference: Reference | None, sources=None, group: str = "summary") -> list[str]:
    """09's "which one when", from the reference run only: the fastest per prompt kind (and who ties it), what
    lookup adds, and the noise floor of the reference run (its A/A pair, when it has one). ``sources``: None, every
    prompt kind the run measured (in :data:`~labkit.measure.reference.loader.SOURCES`' order). ``reference`` None
    (no run
    committed yet): one line saying so and which command writes it."""
    out = group_sentences(reference, group, sources)
    measured = {r.source for r in reference.select(group)} if reference is not None else set()
    sources = [s for s in (sources or SOURCES) if s in measured]
    if not sources:
        return out
    out.append(lookup_gain_sentence(reference, sources, group))
    try:
        aa = reference.row(AA, sources[0], group)
        out.append(aa_sentence(aa.speedup, "the plain loop", live=False))
    except LookupError:
        pass
    return out


def _reference_label(live: str) -> str | None:
    for prefix, label in LIVE_TO_REFERENCE.items():
        if live == prefix or (prefix == "early exit" and live.startswith("early exit")):
            return label
    return None


def live_checks(table: pd.DataFrame, reference: Reference | None, source: str = "stdlib",
                group: str = "summary") -> list[str]:
    """Each live drafter (``table``: compare_drafters' frame, indexed by drafter) that the reference run also
    measured, beside its reference row: one "this machine" line each, never a ranking (none without a reference)."""
    live = {str(label): Spread(float(row["speedup"]), float(row["speedup_min"]), float(row["speedup_max"]))
            for label, row in table.iterrows()}
    return live_beside_reference(live, reference, group, source, _reference_label)
