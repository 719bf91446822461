"""Notebook 02, section 8: the sentences say what the numbers say, and "within the noise" when ranges overlap."""
import pandas as pd
import pytest

from labkit.lessons import draft_search


def frame(rows):
    out = [{"source": s, "method": "plain loop", "speedup": 1.0, "speedup_min": 1.0, "speedup_max": 1.0,
            "acceptance": float("nan"), "identical": True} for s in ("stdlib", "packages")]
    for method, values in rows.items():
        for source, (mid, lo, hi) in zip(("stdlib", "packages"), values):
            out.append({"source": source, "method": method, "speedup": mid, "speedup_min": lo, "speedup_max": hi,
                        "acceptance": 0.8, "identical": True})
    return pd.DataFrame(out)


def test_summary_is_the_geometric_mean_over_sources():
    summary = draft_search.draft_summary(frame({"a": [(2.0, 1.8, 2.2), (0.5, 0.4, 0.6)]}))
    assert list(summary) == ["a"]                                            # the plain loop left out
    assert summary["a"]["speedup"] == pytest.approx(1.0)
    assert summary["a"]["low"] == pytest.approx((1.8 * 0.4) ** 0.5) and summary["a"]["identical"]


@pytest.mark.parametrize("searched, expected", [
    ([(1.6, 1.55, 1.65)] * 2, "on this machine searched is faster beyond the spread over repeats"),
    ([(1.2, 1.15, 1.25)] * 2, "on this machine hand is faster beyond the spread over repeats"),
    ([(1.42, 1.3, 1.5)] * 2, "this machine does not tell them apart"),
])
def test_searched_against_handmade(searched, expected):
    summary = draft_search.draft_summary(frame({"searched": searched, "hand": [(1.4, 1.35, 1.45)] * 2}))
    assert expected in draft_search.searched_vs_handmade_sentence(summary, "searched", "hand")


def test_objectives_sentence_reports_prediction_and_measurement():
    summary = draft_search.draft_summary(frame({"m": [(0.9, 0.85, 0.95)] * 2, "p": [(1.5, 1.45, 1.55)] * 2}))
    text = draft_search.objectives_sentence(summary, {"m": 1.35, "p": 1.8})
    assert "m predicted 1.35x, measured 0.90x (0.85–0.95)" in text and "p predicted 1.80x, measured 1.50x" in text


def test_bo_cost_sentence():
    comparison = {"trials": 60, "seconds": {"gp": [120.0, 130.0, 125.0], "random": [60.0, 66.0, 63.0]},
                  "final": {"gp": [4.2, 4.3, 4.25], "random": [5.3, 5.4, 5.35]}}
    text = draft_search.bo_cost_sentence(comparison)
    assert "GP has the lowest" in text and "beyond the spread over seeds" in text
    assert "GP's own proposal cost 1.03 s a trial" in text
    comparison["summary"] = {"baseline_ms_per_token": 4.54}                  # where plain decoding stands
    assert "0.85x for random search" in draft_search.bo_cost_sentence(comparison)
    comparison["final"]["random"] = [4.28, 4.5, 4.6]
    assert "within the spread over seeds" in draft_search.bo_cost_sentence(comparison)


def test_shipped_search_sentence():
    best = {"objective": "priced",
            "overall": {"trial": 59, "study": "default-priced", "chosen_by": "wall clock (final check)"}}
    assert "the fastest on the wall clock of its top 5" in draft_search.shipped_search_sentence(best, 208, 600.0)
    best["overall"]["chosen_by"] = "objective"
    assert "the lowest objective value" in draft_search.shipped_search_sentence(best, 208, None)




def test_live_sentences_say_this_machine_and_rank_nothing():
    summary = draft_search.draft_summary(frame({"m": [(0.9, 0.85, 0.95)] * 2, "p": [(1.5, 1.45, 1.55)] * 2}))
    text = draft_search.objectives_sentence(summary, {"m": 1.35, "p": 1.8})
    assert text.startswith("On this machine") and "highest" not in text and "ahead" not in text


def test_the_search_story_says_it_rediscovered_the_trained_path():
    """The shipped search's pick for `default` is the trained path with int8 and a static 0.4: against the
    hand-made draft (same path, int8, static 0.5) it differs in the stop rule only, and the sentence says so without
    calling that a gain (the reference run decides)."""
    from labkit import DraftConfig, SkipSet

    path = SkipSet(attention=(1, 4, 5, 7), mlp=(1, 3, 5, 6))
    shipped = DraftConfig(path, "int8", "static", 0.4, 12)
    handmade = DraftConfig(path, "int8", "static", 0.5, 12)
    text = draft_search.search_story_sentence(shipped, path, handmade)
    assert "rediscovered the trained draft path: the same 8 blocks" in text
    assert "only in the stop rule (static 0.4 vs static 0.5)" in text and "weights" not in text
    assert "gain" not in text and "reference run" in text        # a difference, not a speed claim
    other = DraftConfig(SkipSet(attention=(1, 2), mlp=(1, 3)), "int8", "adaptive", 0.4, 12)
    moved = draft_search.search_story_sentence(other, path, handmade)
    assert "sharing 3 of its 4 blocks with the trained draft path" in moved and "in the skip set and the stop" in moved
    assert "no trained draft path" in draft_search.search_story_sentence(other, None, handmade)
    assert draft_search.config_differences(shipped, shipped) == []
    assert "adds nothing" in draft_search.search_story_sentence(handmade, path, handmade)


def test_searches_side_by_side_and_the_untrained_search():
    from labkit import DraftConfig, SkipSet

    path = SkipSet(attention=(1, 4, 5, 7), mlp=(1, 3, 5, 6))
    rows = {"default": {"config": DraftConfig(path, "int8", "static", 0.4, 12), "trained_path": path, "speedup": 1.45},
            "plain": {"config": DraftConfig(SkipSet(attention=(1, 2), mlp=(1, 3)), "int8", "adaptive", 0.4, 12),
                      "trained_path": None, "speedup": 1.10}}
    table = draft_search.searches_frame(rows)
    assert list(table.index) == ["default", "plain"] and len(table.columns) <= 8
    assert table.loc["default", "= trained path"] == "yes" and table.loc["plain", "trained draft path"] == "none"
    text = draft_search.untrained_search_sentence("plain", rows["plain"]["config"], 1.10, 8, "default", 1.45)
    assert "skips 4 of 16 blocks" in text and "1.10x" in text and "1.45x for `default`" in text
    assert len(text.split()) <= 50


def reference_02(tmp_path, shipped, hand, plain=(1.10, 1.05, 1.15)):
    """A group-'02' reference file: the shipped configuration, the hand-made trained path, plain's searched draft."""
    import json

    def row(method, speedup, source):
        return {"method": method, "kind": "self-spec", "source": source, "prompts": 3, "tokens": 128,
                "repetitions": 5, "ms_per_token": [3.0, 2.9, 3.1], "speedup": list(speedup)}
    rows = [row(m, v, s) for s in ("stdlib", "packages") for m, v in (("shipped configuration", shipped),
            ("hand-made trained path", hand), ("plain: shipped configuration", plain))]
    (tmp_path / "02.json").write_text(json.dumps({"group": "02", "rows": rows, "machine": {
        "cpu_model": "Test CPU", "threads": 1, "load_before": [0.1, 0, 0], "load_after": [0.1, 0, 0]}}))
    from labkit.lessons.notebook import reference_or_none
    return reference_or_none("02", tmp_path)


def test_reference_search_sentences_compare_from_the_reference_only(tmp_path):
    tie = draft_search.reference_search_sentences(reference_02(tmp_path, (1.45, 1.4, 1.5), (1.42, 1.38, 1.47)))
    assert len(tie) == 4 and "within the noise of each other" in tie[0] and "Test CPU" not in tie[0]
    assert "`plain`'s searched draft there: 1.10x (1.05" in tie[1] and "faster than its plain loop" in tie[1]
    apart = draft_search.reference_search_sentences(reference_02(tmp_path, (1.6, 1.55, 1.65), (1.3, 1.25, 1.35),
                                                                 plain=(1.0, 0.95, 1.05)))
    assert "the shipped configuration is faster beyond the noise" in apart[0]
    assert "within the noise of its plain loop" in apart[1]
    assert all("this machine" not in s and len(s.split()) <= 50 for s in apart)
    assert draft_search.reference_search_sentences(None) == []


def test_held_out_checks_put_this_machine_beside_the_reference(tmp_path):
    ref = reference_02(tmp_path, (1.45, 1.4, 1.5), (1.42, 1.38, 1.47))
    live = frame({"shipped search": [(1.43, 1.3, 1.5), (0.9, 0.85, 0.95)], "other": [(2.0, 1.9, 2.1)] * 2})
    lines = draft_search.held_out_checks(live, ref, {"shipped search": "shipped configuration"})
    assert len(lines) == 2 and all(line.startswith("On this machine shipped search (") for line in lines)
    assert "agrees within the noise" in lines[0] and "gains less than the reference" in lines[1]
    assert draft_search.held_out_checks(live, None, {}) == []
