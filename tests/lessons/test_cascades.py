"""Notebook 10's cascade sentences turn with their data: inside the noise, outside it, either way."""
from labkit.lessons import cascades as lc
from labkit.measure.comparisons.cascades import CHAIN

LOOKUP, AGGR, DYN = "lookup > shipped", "aggressive int8 > shipped", "lookup > aggressive > shipped, dynamic"


def row(source, method, speedup, lo, hi, kind="cascade"):
    return {"source": source, "method": method, "kind": kind, "speedup": speedup, "speedup_min": lo,
            "speedup_max": hi}


def rows(lookup=(1.6, 1.55, 1.7), aggr=(0.7, 0.65, 0.8), dyn=(1.5, 1.35, 1.6)):
    out = []
    for s in ("stdlib", "packages"):
        out += [row(s, "plain loop", 1.0, 1.0, 1.0, "plain"), row(s, CHAIN, 1.4, 1.35, 1.45, "chain"),
                row(s, LOOKUP, *lookup), row(s, AGGR, *aggr), row(s, DYN, *dyn)]
    return out


def part(cascade, level, is_top, kept, proposed=5.0, ms=1.0, used=1.0, own=1.0):
    return {"cascade": cascade, "level": level, "is_top": is_top, "kept": kept, "proposed": proposed,
            "accepted": kept * proposed, "own": own, "ms_per_forward": ms, "used": used, "steps": 10}


def parts(aggr_kept=0.01):
    return [part(LOOKUP, "lookup", False, 0.56, ms=0.04), part(LOOKUP, "skip 8/16 int8", True, 0.86),
            part(AGGR, "skip 12/16 int8", False, aggr_kept, ms=0.7), part(AGGR, "skip 8/16 int8", True, 0.86),
            part(DYN, "lookup", False, 0.5, ms=0.04), part(DYN, "skip 12/16 int8", False, 0.06, used=0.09),
            part(DYN, "skip 8/16 int8", True, 0.86)]


def test_versus_chain_inside_and_outside_the_noise():
    chain = row("s", CHAIN, 1.4, 1.35, 1.45)
    assert lc.versus_chain(row("s", "x", 1.6, 1.5, 1.7), chain) == "faster"
    assert lc.versus_chain(row("s", "x", 0.7, 0.6, 0.8), chain) == "slower"
    assert lc.versus_chain(row("s", "x", 1.5, 1.44, 1.6), chain) == "within the noise"


def test_cascades_sentence_turns_with_the_ranges():
    text = lc.cascades_sentence(rows(), "stdlib")
    assert "the chain ran at 1.40× (1.35–1.45)" in text
    assert f"{LOOKUP} 1.60× (1.55–1.70), faster than the chain beyond the noise" in text
    assert f"{AGGR} 0.70× (0.65–0.80), slower than the chain beyond the noise" in text
    assert f"{DYN} 1.50× (1.35–1.60), within the noise of the chain" in text
    flipped = lc.cascades_sentence(rows(lookup=(1.2, 1.1, 1.3), aggr=(1.42, 1.3, 1.5)), "packages")
    assert f"{LOOKUP} 1.20× (1.10–1.30), slower" in flipped and f"{AGGR} 1.42× (1.30–1.50), within the noise" in flipped


def test_level_sentence_names_each_helper():
    text = lc.level_sentence([p for p in parts() if p["cascade"] == DYN])
    assert "lookup proposed 5.00 tokens per step, of which the level above kept 50%, at 0.04 ms per call" in text
    assert "skip 12/16 int8 proposed 5.00 tokens per step in 9% of the steps" in text
    assert "the top (skip 8/16 int8, 1.00 ms per forward)" in text
    assert all(len(sentence.split()) <= 50 for sentence in text.split(". "))        # one sentence per level


def test_pays_sentence_says_where_the_model_level_does_not_pay():
    text = lc.pays_sentence(rows(), parts(), ("stdlib", "packages"))
    assert "does not pay on this CPU: the shipped draft kept 1% of its proposals" in text
    assert "slower than the chain beyond the noise on every source" in text
    assert "what pays costs no forward: prompt lookup (0.04 ms per call)" in text
    assert DYN not in text                              # only the two-level cascades are judged
    assert text.count("On this machine, ") == 2 and all(len(t.split()) <= 50 for t in text.split("On this machine"))
    paid = lc.pays_sentence(rows(lookup=(1.4, 1.3, 1.5), aggr=(1.7, 1.6, 1.8)), parts(0.7), ("stdlib", "packages"))
    assert "On this machine, the cheaper model level (skip 12/16 int8) paid here" in paid
    assert "70% of its proposals kept" in paid
    assert "lookup costs no forward, but here its gain stayed within the noise" in paid
    assert "within the noise of the chain on every source" in paid
    mixed = rows()
    mixed[2] = row("stdlib", LOOKUP, 1.42, 1.3, 1.5)                # within the noise on one source, faster on one
    assert "what pays costs no forward" in lc.pays_sentence(mixed, parts(), ("stdlib", "packages"))
    worse = lc.pays_sentence(rows(lookup=(1.0, 0.9, 1.1)), parts(), ("stdlib", "packages"))
    assert "lookup costs no forward, yet here it did not pay" in worse
    assert lc.pays_sentence(rows(), [p for p in parts() if p["cascade"] == DYN], ("stdlib",)) == \
        "No two-level cascade was measured."
