"""Notebook 10's cascade section: sentences written from the measured rows (the harness's, with ``source``; see
:func:`labkit.measure.comparisons.cascades.compare_cascades`) and the per-level parts
(:func:`labkit.measure.comparisons.cascades.level_parts` with ``cascade`` set). A cascade is faster or slower than
the chain only when their min–max speedup ranges over the interleaved repetitions do not overlap; otherwise the
sentence says "within the noise".
"""
from __future__ import annotations

from ..measure.comparisons.cascades import CHAIN
from .claims import join, overlaps

__all__ = ["versus_chain", "cascades_sentence", "level_sentence", "pays_sentence"]


def _spread(r: dict) -> tuple[float, float]:
    return (r["speedup_min"], r["speedup_max"])


def _row(rows: list[dict], source: str, method: str) -> dict:
    return next(r for r in rows if r["source"] == source and r["method"] == method)


def _speed(r: dict) -> str:
    return f"{r['speedup']:.2f}× ({r['speedup_min']:.2f}–{r['speedup_max']:.2f})"


def versus_chain(row: dict, chain: dict) -> str:
    """'faster', 'slower' (min–max ranges apart) or 'within the noise' (they overlap)."""
    if overlaps(_spread(row), _spread(chain)):
        return "within the noise"
    return "faster" if row["speedup"] > chain["speedup"] else "slower"


def _phrase(verdict: str) -> str:
    return "within the noise of the chain" if verdict == "within the noise" else \
        f"{verdict} than the chain beyond the noise"


def cascades_sentence(rows: list[dict], source: str, chain: str = CHAIN) -> str:
    """Each cascade's speedup on ``source`` against the chain's, with the verdict."""
    c = _row(rows, source, chain)
    cascades = [r for r in rows if r["source"] == source and r["kind"] == "cascade"]
    parts = [f"{r['method']} {_speed(r)}, {_phrase(versus_chain(r, c))}" for r in cascades]
    return (f"On this machine, on {source} prompts, the chain ran at {_speed(c)} over the plain loop; "
            f"{'; '.join(parts)}.")


def level_sentence(parts: list[dict]) -> str:
    """What the helper levels of one cascade (``parts`` of one label) did: proposed, kept, cost per forward."""
    top = next(p for p in parts if p["is_top"])
    bits = []
    for p in parts:
        if p["is_top"]:
            continue
        unit = "call (no forward of the model)" if p["level"] == "lookup" else "forward"
        used = "" if p["used"] >= 0.995 else f" in {p['used']:.0%} of the steps (the controller's route)"
        kept = "n/a" if p["kept"] != p["kept"] else f"{p['kept']:.0%}"
        bits.append(f"{p['level']} proposed {p['proposed']:.2f} tokens per step{used}, of which the level above "
                    f"kept {kept}, at {p['ms_per_forward']:.2f} ms per {unit}")
    helpers = " ".join(f"On this machine, in {top['cascade']}, {bit}." for bit in bits)   # one sentence per level
    return (f"{helpers} In it the top ({top['level']}, {top['ms_per_forward']:.2f} ms per forward) drafted "
            f"{top['own']:.2f} tokens per step itself and the target kept {top['accepted']:.2f} per step.")


def pays_sentence(rows: list[dict], parts: list[dict], sources: tuple[str, ...], chain: str = CHAIN) -> str:
    """Which helper paid on this CPU: a cascade pays where it is faster than the chain beyond the noise on every
    source; the cheaper model level's kept share says why it does or does not."""
    verdicts = {r["method"]: [versus_chain(_row(rows, s, r["method"]), _row(rows, s, chain)) for s in sources]
                for r in rows if r["kind"] == "cascade" and r["source"] == sources[0]}

    def summary(method: str) -> str:
        v = verdicts[method]
        if len(set(v)) == 1:
            return f"{_phrase(v[0])} on {'every source' if len(v) > 1 else sources[0]}"
        return join([f"{_phrase(x)} on {s}" for x, s in zip(v, sources)])

    size = {label: sum(q["cascade"] == label for q in parts) for label in {q["cascade"] for q in parts}}
    two = [p for p in parts if not p["is_top"] and size[p["cascade"]] == 2]        # one helper under the top
    lookup = [p for p in two if p["level"] == "lookup"]
    model = [p for p in two if p["level"] != "lookup"]
    out = []
    for p in model:
        v = verdicts.get(p["cascade"], [])
        kept = "n/a" if p["kept"] != p["kept"] else f"{p['kept']:.0%}"
        if v and all(x == "faster" for x in v):
            out.append(f"the cheaper model level ({p['level']}) paid here: {p['cascade']} was {summary(p['cascade'])}, "
                       f"with {kept} of its proposals kept")
        else:
            out.append(f"the cheaper model level ({p['level']}) does not pay on this CPU: the shipped draft kept "
                       f"{kept} of its proposals, so its forwards ({p['ms_per_forward']:.2f} ms each) were mostly "
                       f"spent for nothing, and {p['cascade']} was {summary(p['cascade'])}")
    for p in lookup:
        v = verdicts.get(p["cascade"], [])
        if v and "faster" in v and "slower" not in v:
            paid = "what pays costs no forward"
        elif "slower" in v:
            paid = "lookup costs no forward, yet here it did not pay"
        else:
            paid = "lookup costs no forward, but here its gain stayed within the noise"
        out.append(f"{paid}: prompt lookup ({p['ms_per_forward']:.2f} ms per call) under the shipped draft was "
                   f"{summary(p['cascade'])}, {p['kept']:.0%} of its copied tokens kept")
    if not out:
        return "No two-level cascade was measured."
    return " ".join(f"On this machine, {part}." for part in out)          # one sentence per level judged
