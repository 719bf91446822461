"""A notebook's comparative sentences from a committed reference group, and its live rows put beside them.

Notebooks 06, 07, 09 and 10 compare methods; a short live run cannot rank them (its winners flip from run to run),
so the ranking comes from the reference run of the notebook's group (``data/reference/<group>.json``,
:mod:`labkit.measure.reference.loader`) and the live rows appear only as "this machine" checks:

- :func:`fastest_on`: the fastest row of a group on one prompt kind by median, and every row within the noise of
  it (overlapping min–max ranges), under 50 words;
- :func:`group_sentences`: that sentence for every prompt kind the group measured, or one line saying no reference
  run is committed (:data:`NO_REFERENCE`);
- :func:`ranked_sentence`: a chosen few rows of a group in the reference's order, saying which ones it cannot
  rank (overlapping ranges), under 50 words;
- :func:`live_beside_reference`: each live row whose label the reference also measured, in one
  :func:`~labkit.measure.reference.loader.live_vs_reference` line; :func:`live_spreads` reads those rows from a harness
  frame or row list.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ..measure.reference.loader import AA, PLAIN, SOURCES, Reference, Spread, live_vs_reference

__all__ = ["NO_REFERENCE", "fastest_on", "group_sentences", "live_beside_reference", "live_lines", "live_spreads",
           "ranked_sentence", "reference_spreads"]

#: What a notebook says before any reference run is committed.
NO_REFERENCE = ("No reference run is committed yet (`python -m labkit reference` writes `data/reference/`): until "
                "then this notebook ranks nothing.")


def _rows(reference: Reference, source: str, group: str) -> list:
    return [r for r in reference.select(group, source) if r.method not in (PLAIN, AA) and r.baseline == PLAIN
            and not math.isnan(r.speedup.median)]


def fastest_on(reference: Reference, source: str = "stdlib", group: str = "summary") -> str:
    """The fastest reference row on ``source`` by median, and every row whose min-max range overlaps it (so the
    reference run cannot rank them), in under 50 words."""
    rows = _rows(reference, source, group)
    if not rows:
        return f"The reference run has no drafter rows on {source} prompts."
    best = max(rows, key=lambda r: r.speedup.median)
    tied = [r for r in rows if r is not best and r.speedup.overlaps(best.speedup)]
    text = f"In the reference run on {source} prompts the fastest is {best.method} at {best.speedup.text('×')}"
    if not tied:
        return text + ", ahead of every other row beyond the noise."
    names = ", ".join(r.method for r in sorted(tied, key=lambda r: -r.speedup.median)[:3])
    more = f" and {len(tied) - 3} more" if len(tied) > 3 else ""
    return text + f"; {names}{more} {'is' if len(tied) == 1 else 'are'} within the noise of it."


def group_sentences(reference: Reference | None, group: str, sources=None) -> list[str]:
    """:func:`fastest_on` for every prompt kind ``group`` measured (``sources``: None, all of them in
    :data:`~labkit.measure.reference.loader.SOURCES`' order); :data:`NO_REFERENCE` without a reference."""
    if reference is None:
        return [NO_REFERENCE]
    measured = {r.source for r in reference.select(group)}
    chosen = [s for s in (sources or SOURCES) if s in measured]
    if not chosen:
        return [f"The reference run has no rows in group {group!r}."]
    return [fastest_on(reference, s, group) for s in chosen]


def ranked_sentence(reference: Reference | None, methods, source: str = "stdlib", group: str = "summary") -> str:
    """The reference rows named in ``methods`` on ``source``, fastest median first, each with its min-max range,
    and the neighbours whose ranges overlap (the reference cannot rank those). Why: a notebook that measures a few
    drafters live ranks them from the reference run only; the live rows go beside it (:func:`live_beside_reference`)."""
    if reference is None:
        return NO_REFERENCE
    rows = [r for r in _rows(reference, source, group) if r.method in set(methods)]
    if not rows:
        return f"The reference run has none of {', '.join(methods)} on {source} prompts."
    rows.sort(key=lambda r: -r.speedup.median)
    listed = ", ".join(f"{r.method} {r.speedup.text('×')}" for r in rows)
    ties = [f"{a.method} and {b.method}" for a, b in zip(rows, rows[1:]) if a.speedup.overlaps(b.speedup)]
    tail = (f"; within the noise of each other: {'; '.join(ties)}." if ties else
            ", each range apart from the next." if len(rows) > 1 else ".")
    return f"In the reference run on {source} prompts, fastest first: {listed}{tail}"


def live_beside_reference(live: Mapping[str, Spread], reference: Reference | None, group: str, source: str,
                          label_of: Callable[[str], str | None] = lambda label: label) -> list[str]:
    """For each live row ({label: speedup Spread}) whose reference label (``label_of``; None: not measured there)
    the group has on ``source``: one "this machine" line beside its reference row, never a ranking."""
    out = []
    if reference is None:
        return out
    for label, spread in live.items():
        name = label_of(label)
        if name is None or name in (PLAIN, AA):
            continue
        try:
            ref = reference.row(name, source, group)
        except LookupError:
            continue
        out.append(live_vs_reference(label, Spread.of(spread), ref, reference.machine_for(ref)))
    return out


def reference_spreads(reference: Reference | None, labels, group: str, source: str = "stdlib",
                      label_of: Callable[[str], str | None] = lambda label: label) -> dict[str, list[float]]:
    """{live label: [median, min, max] speedup of its reference row} for the ``labels`` the group measured on
    ``source`` (none without a reference): what a figure draws beside this machine's bars."""
    out = {}
    for label in labels:
        name = label_of(label)
        if reference is None or name is None or name in (PLAIN, AA):
            continue
        try:
            out[label] = reference.row(name, source, group).speedup.as_list()
        except LookupError:
            continue
    return out


def live_lines(frame, reference: Reference | None, group: str, sources,
               label_of: Callable[[str], str | None] = lambda label: label) -> list[str]:
    """:func:`live_beside_reference` for each of ``sources`` (a harness frame or row list with a ``source``
    column), each live label naming its prompt kind when there are several. Why: otherwise two kinds' lines read
    as one list with every method twice."""
    out = []
    for source in sources:
        spreads = live_spreads(frame, source)
        named = {(f"{m} ({source} prompts)" if len(sources) > 1 else m): m for m in spreads}
        out += live_beside_reference({n: spreads[m] for n, m in named.items()}, reference, group, source,
                                     lambda n, named=named: label_of(named[n]))
    return out


def live_spreads(rows, source: str | None = None) -> dict[str, Spread]:
    """{method: speedup Spread} from harness rows (a DataFrame with a ``method`` column or index, or a list of
    dicts) that have ``speedup``, ``speedup_min`` and ``speedup_max``; only ``source``'s rows when given."""
    records = rows if isinstance(rows, list) else [
        {"method": str(index), **record} for index, record in zip(rows.index, rows.to_dict("records"))]
    return {str(r.get("method")): Spread(float(r["speedup"]), float(r["speedup_min"]), float(r["speedup_max"]))
            for r in records if source is None or r.get("source", source) == source}
