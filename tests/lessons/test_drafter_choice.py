"""Notebook 09's reference-based "which one when": the fastest row and its ties turn with the reference numbers,
lookup's gain reads each prompt kind's rows, the A/A noise floor appears when the run has one, and live rows appear
only as "this machine" checks beside the reference row of the same configuration (fed live data inside and outside
the reference's noise)."""
import pandas as pd

from labkit.lessons import drafter_choice as dc
from labkit.lessons import reference_claims as rc
from labkit.measure.reference.loader import AA, PLAIN, Machine, Reference, ReferenceRow, Spread

MACHINE = Machine("Test CPU", 1, {}, (0.1, 0.1, 0.1), (0.1, 0.1, 0.1), "2026-11-28", False)


def row(method, speedup, source="stdlib"):
    return ReferenceRow(group="summary", method=method, kind="x", source=source, prompts=12, tokens=128,
                        repetitions=5, ms_per_token=Spread(3.0, 2.9, 3.1), speedup=Spread(*speedup))


def reference(rows):
    return Reference(rows, {"summary": MACHINE})


def test_fastest_turns_with_the_numbers_and_names_the_ties():
    apart = reference([row(PLAIN, (1, 1, 1)), row("shipped configuration", (1.4, 1.35, 1.45)),
                       row("shipped + prompt lookup", (1.9, 1.85, 1.95))])
    text = rc.fastest_on(apart)
    assert "fastest is shipped + prompt lookup at 1.90×" in text and "beyond the noise" in text
    lookup = row("shipped + prompt lookup", (1.9, 1.85, 1.95))
    close = reference([row("shipped configuration", (1.8, 1.7, 1.9)), lookup])
    assert "shipped configuration is within the noise of it" in rc.fastest_on(close)
    flipped = reference([row("shipped configuration", (2.1, 2.0, 2.2)), lookup])
    assert "fastest is shipped configuration" in rc.fastest_on(flipped)
    assert "no drafter rows on stubs" in rc.fastest_on(apart, "stubs")
    assert all(len(s.split()) <= 50 for s in dc.reference_sentences(apart))


def test_lookup_gain_and_the_noise_floor():
    ref = reference([row("shipped configuration", (1.4, 1.35, 1.45)), row("shipped + prompt lookup", (1.9, 1.8, 2.0)),
                     row("shipped configuration", (1.3, 1.2, 1.4), "stubs"),
                     row("shipped + prompt lookup", (1.35, 1.3, 1.5), "stubs"), row(AA, (1.0, 0.97, 1.03))])
    text = dc.lookup_gain_sentence(ref, ("stdlib", "stubs"))
    assert "stdlib 1.40× → 1.90× (more)" in text and "stubs 1.30× → 1.35× (within the noise)" in text
    lines = dc.reference_sentences(ref)
    assert "In the reference run the plain loop" in lines[-1] and "0.97" in lines[-1]
    assert any("on stubs prompts" in line for line in lines)       # every prompt kind the run measured


def test_live_rows_are_checks_beside_their_reference_row():
    ref = reference([row("shipped configuration", (1.4, 1.35, 1.45)), row("early exit", (0.9, 0.85, 0.95))])
    live = pd.DataFrame({"speedup": [1.0, 1.42, 0.5, 1.2], "speedup_min": [1.0, 1.30, 0.45, 1.1],
                         "speedup_max": [1.0, 1.50, 0.55, 1.3]},
                        index=["plain", "layer skip (best draft)", "early exit E=7", "prompt lookup"])
    lines = dc.live_checks(live, ref)
    assert len(lines) == 2 and all("this machine" in s for s in lines)
    assert "agrees within the noise" in lines[0] and "Test CPU" in lines[0]
    assert "gains less than the reference" in lines[1]            # 0.45-0.55 against 0.85-0.95


def test_without_a_reference_run_nothing_is_ranked():
    assert dc.reference_sentences(None) == [rc.NO_REFERENCE]
    assert dc.live_checks(pd.DataFrame({"speedup": [1.2], "speedup_min": [1.1], "speedup_max": [1.3]},
                                       index=["layer skip (best draft)"]), None) == []
    only_stdlib = reference([row("shipped configuration", (1.4, 1.35, 1.45))])
    assert len(dc.reference_sentences(only_stdlib)) == 2            # stdlib's fastest, lookup's gain: no stubs line
