"""labkit.lessons.reference_claims: a group's sentences cover the prompt kinds it measured and say so without a
reference run; live rows appear only beside a reference row of the same label, in "this machine" lines whose
verdict turns with the live range (inside and outside the reference's noise). The fastest-row sentence's own
turns are tested with 09's use of it (tests/lessons/test_drafter_choice.py)."""
from labkit.lessons import reference_claims as rc
from labkit.measure.reference.loader import PLAIN, Machine, Reference, ReferenceRow, Spread

MACHINE = Machine("Test CPU", 1, {}, (0.1, 0.1, 0.1), (0.1, 0.1, 0.1), "2026-11-28", False)


def row(method, speedup, source="stdlib", group="07"):
    return ReferenceRow(group=group, method=method, kind="x", source=source, prompts=4, tokens=64, repetitions=5,
                        ms_per_token=Spread(3.0, 2.9, 3.1), speedup=Spread(*speedup))


REF = Reference([row(PLAIN, (1, 1, 1)), row("knapsack", (1.1, 1.0, 1.2)),
                 row("static: searched set", (1.3, 1.25, 1.35)), row("knapsack", (1.2, 1.1, 1.3), "packages")],
                {"07": MACHINE})


def test_group_sentences_cover_each_measured_kind():
    lines = rc.group_sentences(REF, "07")
    assert len(lines) == 2 and "on stdlib prompts the fastest is static: searched set at 1.30×" in lines[0]
    assert "ahead of every other row beyond the noise" in lines[0] and "on packages prompts" in lines[1]
    assert rc.group_sentences(None, "07") == [rc.NO_REFERENCE]
    assert "no rows in group '10'" in rc.group_sentences(REF, "10")[0]
    assert all(len(s.split()) <= 50 for s in lines)


def test_live_rows_only_beside_their_reference_row():
    live = {"plain loop": Spread(1, 1, 1), "knapsack": Spread(1.15, 1.05, 1.25), "in-context": Spread(1.0, 0.9, 1.1),
            "static: searched set": Spread(0.9, 0.85, 0.95)}
    lines = rc.live_beside_reference(live, REF, "07", "stdlib")
    assert len(lines) == 2 and all("this machine" in s and "Test CPU" in s for s in lines)
    assert "agrees within the noise" in lines[0] and "gains less than the reference" in lines[1]
    renamed = rc.live_beside_reference({"ks": Spread(1.1, 1.0, 1.2)}, REF, "07", "stdlib", {"ks": "knapsack"}.get)
    assert len(renamed) == 1 and renamed[0].startswith("On this machine ks measured")
    assert rc.live_beside_reference(live, None, "07", "stdlib") == []


def test_live_spreads_read_frames_and_row_lists():
    import pandas as pd

    frame = pd.DataFrame({"source": ["stdlib", "packages"], "method": ["knapsack", "knapsack"], "speedup": [1.1, 1.2],
                          "speedup_min": [1.0, 1.1], "speedup_max": [1.2, 1.3]})
    assert rc.live_spreads(frame, "packages") == {"knapsack": Spread(1.2, 1.1, 1.3)}
    indexed = pd.DataFrame({"speedup": [1.0], "speedup_min": [0.9], "speedup_max": [1.1]}, index=["jacobi, pad"])
    assert rc.live_spreads(indexed) == {"jacobi, pad": Spread(1.0, 0.9, 1.1)}
    assert rc.live_spreads([{"method": "chain", "speedup": 1.3, "speedup_min": 1.2, "speedup_max": 1.4}]) == {
        "chain": Spread(1.3, 1.2, 1.4)}


def test_ranked_sentence_orders_the_named_rows_and_names_the_ties():
    ref = Reference([row(PLAIN, (1, 1, 1), group="summary"), row("lookahead", (1.13, 1.10, 1.14), group="summary"),
                     row("token recycling", (1.82, 1.77, 1.86), group="summary"),
                     row("Medusa heads", (1.70, 1.67, 1.80), group="summary"),
                     row("draft head", (1.2, 1.18, 1.22), group="summary")], {"summary": MACHINE})
    text = rc.ranked_sentence(ref, ["lookahead", "token recycling", "Medusa heads"])
    assert text.index("token recycling 1.82×") < text.index("Medusa heads 1.70×") < text.index("lookahead 1.13×")
    assert "draft head" not in text and "within the noise of each other: token recycling and Medusa heads." in text
    apart = rc.ranked_sentence(ref, ["lookahead", "draft head"])
    assert apart.endswith("each range apart from the next.") and len(apart.split()) <= 50
    assert rc.ranked_sentence(None, ["lookahead"]) == rc.NO_REFERENCE
    assert "has none of prompt lookup" in rc.ranked_sentence(ref, ["prompt lookup"])


def test_live_lines_name_the_prompt_kind_when_there_are_several():
    import pandas as pd

    frame = pd.DataFrame({"source": ["stdlib", "packages"], "method": ["knapsack", "knapsack"],
                          "speedup": [1.1, 1.2], "speedup_min": [1.0, 1.1], "speedup_max": [1.2, 1.3]})
    lines = rc.live_lines(frame, REF, "07", ["stdlib", "packages"])
    assert len(lines) == 2 and lines[0].startswith("On this machine knapsack (stdlib prompts) measured 1.10x")
    assert "(packages prompts)" in lines[1] and all("agrees within the noise" in line for line in lines)
    assert rc.live_lines(frame, REF, "07", ["stdlib"])[0].startswith("On this machine knapsack measured")


def test_reference_spreads_only_for_measured_rows():
    spreads = rc.reference_spreads(REF, ["ks", "other", PLAIN], "07", "stdlib", {"ks": "knapsack"}.get)
    assert spreads == {"ks": [1.1, 1.0, 1.2]}
    assert rc.reference_spreads(None, ["knapsack"], "07") == {}
