"""Notebook 07's sentences say what the numbers say, and the opposite when the numbers are reversed."""
import pandas as pd

from labkit import SkipSet
from labkit.lessons import adaptive_skip as say
from labkit.lessons.adaptive_skip import (
    acceptance_sentence,
    acceptance_sentences,
    changes_sentence,
    lever_sentence,
    overhead_sentence,
    set_changes,
    transfer_sentence,
    winner_sentence,
)
from labkit.measure.comparisons.adaptive import PLAIN


def frame(rows):
    return pd.DataFrame(rows, columns=["source", "method", "speedup", "acceptance", "select_share"])


FRAME = frame([
    ("stdlib", PLAIN, 1.0, None, None), ("stdlib", "static: searched set", 1.3, 0.92, 0.0),
    ("stdlib", "knapsack", 1.1, 0.85, 0.04), ("packages", PLAIN, 1.0, None, None),
    ("packages", "static: searched set", 1.01, 0.73, 0.0), ("packages", "knapsack", 1.25, 0.88, 0.06),
])


def test_transfer_sentence_follows_the_gap():
    agreement = pd.DataFrame({"source": ["stdlib", "packages"], "set": ["searched set"] * 2, "agreement": [0.9, 0.7]})
    assert "only 0.70 on packages" in transfer_sentence(agreement, "searched set")
    reversed_ = agreement.assign(agreement=[0.7, 0.9])
    assert "agrees better on packages" in transfer_sentence(reversed_, "searched set")
    assert "about as well" in transfer_sentence(agreement.assign(agreement=[0.8, 0.8]), "searched set")
    # with the probe's positions, a gap inside two standard errors of the difference is within the noise
    counted = pd.DataFrame({"source": ["stdlib", "packages"], "set": ["searched set"] * 2, "agreement": [0.87, 0.90],
                            "n_positions": [192, 192]})
    text = transfer_sentence(counted, "searched set")
    assert "about as well" in text and "within the noise (192 and 192 positions" in text
    assert "agrees better on packages" in transfer_sentence(counted.assign(n_positions=[4000, 4000]), "searched set")


def test_acceptance_sentence_follows_the_direction():
    assert "falls from 0.92 to 0.73" in acceptance_sentence(FRAME, "static: searched set")
    swapped = FRAME.assign(source=FRAME["source"].map({"stdlib": "packages", "packages": "stdlib"}))
    assert "rises from 0.73 to 0.92" in acceptance_sentence(swapped, "static: searched set")
    # with the drafted-token counts (07 full mode: 0.889 and 0.904 on about 320 drafted tokens each): within the noise
    counted = pd.DataFrame({"source": ["stdlib", "packages"], "method": ["m", "m"], "acceptance": [0.889, 0.904],
                            "new_tokens": [384, 384], "tokens_per_step": [3.96, 4.17],
                            "drafted_per_step": [2.96 / 0.889, 3.17 / 0.904]})
    text = acceptance_sentence(counted, "m")
    assert "is 0.889 on stdlib and 0.904 on packages prompts: within the noise (about 323 and 323" in text
    bigger = counted.assign(new_tokens=[38400, 38400])                # the same shares on a hundred times the tokens
    assert "rises from 0.89 to 0.90 from stdlib to packages prompts, beyond the noise" in acceptance_sentence(bigger,
                                                                                                            "m")


def test_winner_sentence_names_the_fastest_and_the_target():
    text = winner_sentence(FRAME, "packages", target=1.2, reference="static: searched set")
    assert text.startswith("On this machine") and "highest speedup was knapsack's, 1.25×" in text
    assert "static: searched set: 1.01×" in text and "meets" in text
    slower = FRAME.assign(speedup=FRAME["speedup"].where(FRAME["method"] != "knapsack", 0.9))
    text = winner_sentence(slower, "packages", target=1.2, reference="static: searched set")
    assert "highest speedup was static: searched set's, 1.01×" in text and "short of the target" in text
    # full mode of 07: with min–max ranges the reference and the target are judged against the noise
    ranged = FRAME.assign(speedup_min=FRAME["speedup"] - 0.05, speedup_max=FRAME["speedup"] + 0.02)
    text = winner_sentence(ranged, "stdlib", target=1.3, reference="knapsack")
    assert "the highest median was static: searched set's, 1.30× (1.25–1.32)" in text
    assert "(knapsack: 1.10× (1.05–1.12), slower beyond the noise)" in text
    assert "within the noise of the target of 1.3×" in text
    close = ranged.assign(speedup=ranged["speedup"].where(ranged["method"] != "knapsack", 1.28),
                          speedup_max=ranged["speedup_max"].where(ranged["method"] != "knapsack", 1.3))
    assert "within the noise of it" in winner_sentence(close, "stdlib", reference="knapsack")
    assert "meets the target of 1.2× beyond the noise" in winner_sentence(ranged, "stdlib", target=1.2)
    assert "short of the target of 1.4× beyond the noise" in winner_sentence(ranged, "stdlib", target=1.4)


def test_acceptance_sentences_print_each_distinct_pair_once():
    twin = pd.concat([FRAME, FRAME[FRAME["method"] == "static: searched set"].assign(method="twin")])
    lines = acceptance_sentences(twin, ["static: searched set", "twin", "knapsack"])
    assert len(lines) == 2 and lines[0].startswith("On this machine, with static: searched set and twin,")
    assert len(set(lines)) == len(lines)


def test_overhead_sentence_checks_the_budget():
    text = overhead_sentence(FRAME, 0.1)
    assert "every strategy stays within the 10 % target" in text
    assert text.startswith("On this machine, the time the strategies booked as choosing")
    assert "shows in c and c_v" in text
    assert "above the 5 % target for knapsack on packages" in overhead_sentence(FRAME, 0.05)


def test_set_changes_counts_switches_between_self_drafts():
    matrix = [[1, 1, -1, 0, 0], [0, 0, -1, 1, 1]]                 # 2 blocks, 5 steps; step 2 was a lookup
    assert set_changes(matrix) == 1
    assert "changed its set 1 time over 4" in changes_sentence("x", matrix)
    assert "one set" in changes_sentence("x", [[1, 1, 1], [0, 0, 0]])
    assert "no step" in changes_sentence("x", [[-1, -1]])
    assert changes_sentence("x", matrix, "stdlib").startswith("On this machine, on stdlib prompts, x changed")


def test_lever_sentence_names_the_bigger_cost():
    row = {"source": "packages", "method": "knapsack", "drafted_per_step": 4.0, "c": 0.5, "c_v": 1.2,
           "accepted_per_step": 3.0, "limit": 4.0 / 3.2, "speedup": 1.2}
    text = lever_sentence(pd.DataFrame([row]), "packages", "knapsack")
    assert ("drafting (4.00 tokens × c = 0.50 = 2.00 full steps) costs more" in text
            and "free drafts it would be 3.33×" in text)
    text = lever_sentence(pd.DataFrame([{**row, "drafted_per_step": 1.0}]), "packages", "knapsack")
    assert "verifying (c_v = 1.20 full steps) costs more" in text


def test_most_changes_and_joined_timelines():
    from types import SimpleNamespace

    from labkit.core.skip import SkipSet
    from labkit.lessons.adaptive_skip import busiest_timeline, joined_timeline, most_changes

    def run(*sets):
        steps = [SimpleNamespace(skip=s, n_drafted=1) for s in sets]
        return SimpleNamespace(trace=SimpleNamespace(steps=steps))

    a, b = SkipSet(attention=[0]), SkipSet(mlp=[1])
    comparison = SimpleNamespace(results={("stdlib", "static: x"): [run(a, b, a, b)],
                                          ("stdlib", "knapsack"): [run(a, a)],
                                          ("packages", "knapsack"): [run(a, a), run(a, b, a)]})
    assert most_changes(comparison, 2) == ("packages", "knapsack", 1, 2)       # static rows are not candidates
    assert joined_timeline(comparison.results[("packages", "knapsack")], 2)[0] == [1, 1, 1, 0, 1]
    source, method, matrix, boundaries = busiest_timeline(comparison, 2)     # its changes span two prompts
    assert (source, method, boundaries) == ("packages", "knapsack", [2]) and matrix[0] == [1, 1, 1, 0, 1]


def test_set_explorer_controls_change_the_picture():
    from types import SimpleNamespace

    from labkit.core.skip import SkipSet
    from labkit.lessons.adaptive_skip import SetExplorer

    def run(*sets):
        return SimpleNamespace(trace=SimpleNamespace(steps=[SimpleNamespace(skip=s, n_drafted=1) for s in sets]))

    a, b = SkipSet(attention=[0]), SkipSet(mlp=[1])
    comparison = SimpleNamespace(results={("stdlib", PLAIN): [run(None), run(None)],
                                          ("stdlib", "knapsack"): [run(a, a), run(a, b, a)],
                                          ("stdlib", "in-context"): [run(b, b, b), run(b)]})
    explorer = SetExplorer(comparison, 2, method="knapsack", prompt=1)
    heat = explorer.figure.data[0]
    assert [list(r) for r in heat.z][0] == [1, 0, 1] and "changed its set 2 times" in explorer.note.value
    assert isinstance(heat.z[0], (list, tuple)) and isinstance(list(heat.x), list)
    explorer.method.value = "in-context"
    assert [list(r) for r in explorer.figure.data[0].z] == [[0], [0], [0], [1]]     # prompt 1: MLP 1 skipped
    explorer.prompt.value = 0
    assert [list(r) for r in explorer.figure.data[0].z][3] == [1, 1, 1] and "one set" in explorer.note.value
    assert "in-context on stdlib prompt #0" in explorer.figure.layout.title.text


def test_state_lines_read_each_strategy_of_the_source():
    class Stub:
        def __init__(self, extra):
            self.extra = extra

        def state(self):
            return {"strategy": "x", "skip": SkipSet(attention=[1], mlp=[2]), "n_skipped": 2, "select_ms": 12.34,
                    "select_share": 0.051, **self.extra}

    strategies = {("packages", "on-the-fly"): Stub({"matchness": 0.9375, "phase": "settled"}),
                  ("packages", "static"): Stub({}), ("stdlib", "knapsack"): Stub({"rate": 0.33})}
    lines = say.state_lines(strategies, "packages")
    assert len(lines) == 2 and lines[0].startswith("on-the-fly: ends on SkipSet(attention=[1], mlp=[2]) (2 blocks")
    assert "12.3 ms = 5.1 % of the decode time it saw" in lines[0] and "matchness 0.938, phase settled" in lines[0]
    assert "its own state" not in lines[1] and "rate" not in " ".join(lines)


def test_int8_rows_pair_the_static_set_with_itself():
    make_trained, make_searched = object(), object()
    methods = {"static: searched set": make_searched, "static: trained draft path": make_trained, "knapsack": object()}
    pair, weights, base, quantized = say.with_int8_draft(methods)
    assert base == "static: trained draft path" and quantized == "static: trained draft path, int8 draft"
    assert pair == {base: make_trained, quantized: make_trained} and weights == {quantized: "int8"}
    assert say.with_int8_draft({"static: searched set": make_searched})[2] == "static: searched set"


def test_draft_weights_sentence_reads_each_direction():
    cols = ["source", "method", "c", "acceptance", "speedup", "limit", "speedup_min", "speedup_max"]
    rows = [("packages", "A", 0.60, 0.91, 1.16, 1.19, 1.14, 1.18),
            ("packages", "A8", 0.47, 0.92, 1.31, 1.33, 1.29, 1.33)]
    text = say.draft_weights_sentence(pd.DataFrame(rows, columns=cols), "packages", "A", "A8")
    assert "cut the draft cost c (0.60 → 0.47" in text and "faster beyond the noise" in text
    assert "raised acceptance (0.910 → 0.920, +1.0 points)" in text     # int8 changes q: acceptance can rise
    # with the drafted-token counts (07 full mode, packages: 0.904 → 0.914 on about 320 drafted tokens each)
    counted = pd.DataFrame(rows, columns=cols).assign(acceptance=[0.904, 0.914], new_tokens=384,
                                                       tokens_per_step=[4.17, 4.47])
    counted["drafted_per_step"] = (counted["tokens_per_step"] - 1) / counted["acceptance"]
    text = say.draft_weights_sentence(counted, "packages", "A", "A8")
    assert ("moved acceptance only within the noise (0.904 → 0.914, +1.0 points; the sampling noise of about 323 "
            "and 326") in text
    worse = [("packages", "A", 0.47, 0.92, 1.31, 1.33, 1.29, 1.33),
             ("packages", "A8", 0.60, 0.91, 1.16, 1.19, 1.14, 1.18)]
    text = say.draft_weights_sentence(pd.DataFrame(worse, columns=cols), "packages", "A", "A8")
    assert ("did not cut the draft cost" in text and "slower beyond the noise" in text
            and "lowered acceptance (0.920 → 0.910, −1.0 points)" in text)
    close = [("packages", "A", 0.60, 0.91, 1.16, 1.19, 1.00, 1.30),
             ("packages", "A8", 0.47, 0.92, 1.20, 1.33, 1.1, 1.3)]
    assert "within the noise of fp32" in say.draft_weights_sentence(pd.DataFrame(close, columns=cols), "packages",
                                                                     "A", "A8")


def test_choosing_cost_sentence_reads_c_cv_and_noise():
    cols = ["source", "method", "c", "c_v", "ms_per_token", "ms_min", "ms_max", "select_share"]
    rows = [("packages", "static: s", 0.50, 1.20, 10.0, 9.8, 10.2, float("nan")),
            ("packages", "knapsack", 0.60, 1.40, 11.5, 11.3, 11.8, 0.003)]
    text = say.choosing_cost_sentence(pd.DataFrame(rows, columns=cols), "packages", "knapsack", "static: s")
    assert "c 0.50 → 0.60, c_v 1.20 → 1.40" in text and "+1.50 ms, +15 %" in text
    assert "slower beyond the noise" in text and "0.3 % of decode time" in text
    noisy = [rows[0], ("packages", "knapsack", 0.52, 1.21, 10.1, 9.9, 10.4, 0.003)]
    assert "within the noise" in say.choosing_cost_sentence(pd.DataFrame(noisy, columns=cols), "packages",
                                                            "knapsack", "static: s")


def test_runtime_sentence_reports_the_measured_seconds():
    assert say.runtime_sentence(48.2, True).startswith("This run (FAST mode) took 48 s")


def test_draft_head_sentence_reads_each_direction():
    cols = ["source", "method", "acceptance", "tokens_per_step", "c_v", "speedup"]
    better = pd.DataFrame([["stdlib", "int8", 0.90, 3.7, 1.38, 1.24], ["stdlib", "head", 0.94, 6.6, 1.67, 1.36]],
                          columns=cols)
    text = say.draft_head_sentence(better, "stdlib", "int8", "head")
    assert "raised acceptance (0.900 → 0.940, +4.0 points)" in text and "3.70 → 6.60" in text
    assert "decoded at 1.24× → 1.36× the plain loop, within the noise" in text   # no spread: never beyond it
    worse = better.assign(speedup=[1.24, 1.10], acceptance=[0.90, 0.88])
    text = say.draft_head_sentence(worse, "stdlib", "int8", "head")
    assert "lowered acceptance (0.900 → 0.880, −2.0 points)" in text and "within the noise" in text
    same = better.assign(acceptance=[0.9001, 0.9003])
    assert "left acceptance at 0.900" in say.draft_head_sentence(same, "stdlib", "int8", "head")
    assert "no drafting steps" in say.draft_head_sentence(better, "packages", "int8", "head")
    assert say.draft_head_for("default") is not None and say.draft_head_for("plain") is None


def test_sets_sentence_reads_how_the_two_static_sets_relate():
    # full mode of 07: the search now returns the trained draft path itself; the text must not say "extends it"
    same = SkipSet(attention=[1, 4, 5, 7], mlp=[1, 3, 5, 6])
    text = say.sets_sentence({"searched set": same, "trained draft path": same})
    assert "the same set" in text and "two measurements of one set" in text and "extends" not in text
    trained = SkipSet(attention=[4, 5, 7], mlp=[3, 5, 6])
    assert "extends the trained draft path by 2 blocks (MLP 1, attention 1)" in say.sets_sentence(
        {"searched set": same, "trained draft path": trained})
    assert "less 2 blocks" in say.sets_sentence({"searched set": trained, "trained draft path": same})
    other = SkipSet(attention=[0, 4, 5, 7], mlp=[1, 3, 5, 6])
    assert "also skips attention 0 and keeps attention 1" in say.sets_sentence(
        {"searched set": other, "trained draft path": same})
    assert "ships only the searched set" in say.sets_sentence({"searched set": same})


def test_the_explorer_offers_one_name_per_static_set():
    """Two static rows drafting with one set (the searched set is the trained draft path) would draw the same
    picture: the explorer keeps the first; strategies and other sets stay."""
    from types import SimpleNamespace

    from labkit.core.skip import SkipSet
    from labkit.core.strategies import StaticStrategy
    from labkit.lessons.adaptive_skip import distinct_methods

    same, other = SkipSet(mlp=[1]), SkipSet(attention=[2])
    strategies = {("stdlib", "static: a"): StaticStrategy(same), ("stdlib", "static: b"): StaticStrategy(same),
                  ("stdlib", "static: c"): StaticStrategy(other),
                  ("stdlib", "knapsack"): SimpleNamespace(name="knapsack")}
    comparison = SimpleNamespace(strategies=strategies)
    assert distinct_methods(comparison, ["static: a", "static: b", "static: c", "knapsack"]) == [
        "static: a", "static: c", "knapsack"]
