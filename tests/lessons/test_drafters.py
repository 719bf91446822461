"""Notebook 08's glue: every "which one when" sentence follows its data (fed data that reverses the claim,
it says the opposite), outside prompts, and the two explorers move their figures."""
import math

import numpy as np
import pandas as pd

from labkit.lessons import drafters as lesson
from labkit.measure.signals.saturation import Saturation
from labkit.viz.style import FIGURE_WIDTH


def table(**speedups):
    """A comparison table: layer skip, early exit E=2/E=6, a separate model, prompt lookup and a combination."""
    rows = [("plain", "plain", 1.0, float("nan"), 1.0, 0, None, None)]
    spec = {"layer skip (searched)": ("layer skip", 0.7, 2.0, 0, None, None),
            "early exit E=2": ("early exit", 0.3, 1.3, 0, None, 2),
            "early exit E=6": ("early exit", 0.8, 2.2, 0, None, 6),
            "separate model": ("separate model", 0.5, 1.7, 1_000, None, None),
            "prompt lookup": ("prompt lookup", 0.9, 1.5, 0, None, None),
            "lookup + layer skip (searched)": ("combination", 0.7, 2.6, 0, None, None),
            "layer skip (searched) + gate 0.4": ("layer skip", 0.8, 1.4, 0, 0.4, None)}
    for name, (family, acc, tps, params, gate, e) in spec.items():
        rows.append((name, family, speedups[name], acc, tps, params, gate, e))
    return pd.DataFrame(rows, columns=["drafter", "family", "speedup", "acceptance", "tokens_per_step",
                                       "extra_parameters", "gate", "exit_layer"]).set_index("drafter")


BASE = {"layer skip (searched)": 1.4, "early exit E=2": 0.8, "early exit E=6": 1.1, "separate model": 1.2,
        "prompt lookup": 1.6, "lookup + layer skip (searched)": 2.0, "layer skip (searched) + gate 0.4": 1.3}


def test_fastest_sentence_follows_the_data():
    assert lesson.fastest_sentence(table(**BASE)).startswith("lookup + layer skip (searched) is the fastest")
    slow = {k: v / 3 for k, v in BASE.items()}
    assert lesson.fastest_sentence(table(**slow)).startswith("No drafter beats plain decoding")


def test_early_exit_vs_layer_skip_reverses():
    assert "layer skip is faster" in lesson.early_exit_vs_skip_sentence(table(**BASE), 8)
    flipped = {**BASE, "early exit E=6": 1.9}
    text = lesson.early_exit_vs_skip_sentence(table(**flipped), 8)
    assert "early exit is faster" in text and "E=6 of 8" in text
    # full mode of 08: the fastest exit by median has others within its noise; the sentence names them
    assert "within its noise" not in lesson.early_exit_vs_skip_sentence(table(**BASE), 8)
    close = lesson.early_exit_vs_skip_sentence(table(**{**BASE, "early exit E=2": 1.09}), 8)
    assert "the fastest early exit by median, E=6 of 8 layers" in close
    assert "E=2 is within its noise, so the repetitions cannot rank it below E=6" in close
    one_exit = table(**BASE).drop("early exit E=2")                       # notebook 09 measures one E
    assert "; early exit at E=6 of 8 layers reaches" in lesson.early_exit_vs_skip_sentence(one_exit, 8)
    even = {**BASE, "early exit E=6": 1.41}
    assert "within measurement noise" in lesson.early_exit_vs_skip_sentence(table(**even), 8)


def test_early_exit_vs_skip_reads_acceptance_against_its_counts():
    # full mode of 09: 0.885 vs 0.926 acceptance; whether that differs depends on how many tokens were drafted
    t = table(**BASE).drop("early exit E=2")
    t.loc["layer skip (searched)", ["acceptance", "tokens_per_step"]] = 0.885, 4.966
    t.loc["early exit E=6", ["acceptance", "tokens_per_step"]] = 0.926, 2.805
    t["drafted_per_step"] = (t["tokens_per_step"] - 1) / t["acceptance"]
    many = lesson.early_exit_vs_skip_sentence(t.assign(new_tokens=576), 8)
    assert "with lower acceptance for layer skip (beyond the sampling noise of about 520 and 400 drafted" in many
    few = lesson.early_exit_vs_skip_sentence(t.assign(new_tokens=64), 8)     # FAST-sized: 58 and 44 drafted tokens
    assert "with about the same acceptance for layer skip (within the sampling noise of about 58 and 44" in few


def test_lookup_and_memory_sentences_reverse():
    assert "beats both parts alone" in lesson.lookup_sentence(table(**BASE))
    assert "does not beat" in lesson.lookup_sentence(table(**{**BASE, "lookup + layer skip (searched)": 1.0}))
    # full mode of 09: the combination ties prompt lookup, not the layer skip printed beside it; the sentence names it
    tied = lesson.lookup_sentence(table(**{**BASE, "lookup + layer skip (searched)": 1.62}))
    assert "is within the noise of its best part alone (prompt lookup, 1.60x)" in tied
    assert "(layer skip (searched) alone: 1.40x)" in tied
    assert "within the noise of its best part" in lesson.lookup_sentence(
        table(**{**BASE, "lookup + layer skip (searched)": 1.61}))
    assert "(layer skip (searched) alone: 1.40x)" in lesson.lookup_sentence(table(**BASE))
    text = lesson.memory_sentence(table(**BASE), target_parameters=10_000)
    assert "1,000 parameters (10% of the target's)" in text and "yet is slower, beyond the noise, than" in text
    assert "and is faster, beyond the noise, than" in lesson.memory_sentence(table(**{**BASE, "separate model": 3.0}),
                                                                             10_000)


def test_fastest_sentence_reads_the_spread():
    t = table(**BASE).assign(speedup_min=lambda d: d["speedup"] - 0.05, speedup_max=lambda d: d["speedup"] + 0.05)
    assert "ahead of prompt lookup (1.60x (1.55–1.65)) beyond the noise" in lesson.fastest_sentence(t)
    wide = t.assign(speedup_min=t["speedup"] - 0.3, speedup_max=t["speedup"] + 0.3)
    assert "is within the noise of it" in lesson.fastest_sentence(wide)


def control(gate: float, random: float, spread: float = 0.02) -> pd.DataFrame:
    rows = []
    for prompts in ("stdlib", "outside"):
        for arm, speed, frac in (("no gate", 1.0, 0.0), ("gate", gate, 0.77), ("random control", random, 0.75)):
            rows.append({"prompts": prompts, "arm": arm, "threshold": np.nan if arm == "no gate" else 0.4,
                         "speedup": speed, "speedup_min": speed - spread, "speedup_max": speed + spread,
                         "acceptance": 0.8, "gated_fraction": frac})
    return pd.DataFrame(rows)


def test_gate_control_sentences_compare_with_chance_and_no_gate():
    first, _ = lesson.gate_control_sentences(control(1.2, 1.0))
    assert first.startswith("On this machine, on stdlib prompts, the gate at 0.4 decoded 77% of steps plainly")
    assert all(len(part.split()) <= 50 for part in first.split(". "))
    assert "faster than no gate beyond the noise" in first and "beat chance beyond the noise" in first
    assert "mostly switched speculation off" in first
    first, _ = lesson.gate_control_sentences(control(1.2, 1.21))
    assert "within the noise of chance" in first
    first, _ = lesson.gate_control_sentences(control(0.8, 0.9))
    assert "slower than no gate beyond the noise" in first and "did worse than chance" in first
    first, _ = lesson.gate_control_sentences(control(1.01, 1.0, spread=0.1))
    assert "within the noise of no gate" in first
    # full mode of 09: 1.45x (1.43–1.549) against no gate 1.57x (1.551–1.57) printed as touching at 2 decimals
    apart = control(1.45, 1.40, spread=0.02)
    apart.loc[apart["arm"] == "gate", "speedup_max"] = 1.549
    apart.loc[apart["arm"] == "no gate", ["speedup", "speedup_min", "speedup_max"]] = [1.57, 1.551, 1.57]
    first, _ = lesson.gate_control_sentences(apart)
    assert "slower than no gate beyond the noise" in first and "1.549)" in first and "(1.551–1.570)" in first
    assert "(1.18–1.22)" in lesson.gate_control_sentences(control(1.2, 1.0))[0]      # 2 decimals when they suffice


def saturation(frac_right_after_1: float, name: str, n: int = 10) -> Saturation:
    layers = 3
    tokens = np.arange(n)
    top1 = np.tile(tokens[:, None], (1, 2 * layers + 1))
    top1[:, 0] = -1
    top1[int(frac_right_after_1 * n):, 2] = -1                  # wrong after layer 1 for the rest
    nan = np.full((n, 2 * layers + 1), 0.5)
    return Saturation(name, layers, tokens, np.zeros(n, int), top1, nan, nan, nan, nan,
                      np.full((n, layers + 1), 0.9))


def test_saturation_sentence_and_combo_exit_layer():
    text = lesson.saturation_sentence({"a": saturation(0.3, "a"), "b": saturation(0.9, "b")}, 1)
    assert "b: 90%; a: 30%" in text and "b's first 1 layers are already right for 60 percentage points more" in text
    # full mode of 08: 67.7 % against 23.3 % shows as 68 % and 23 %; the gap it states is theirs, 45 points (not 44)
    text = lesson.saturation_sentence({"a": saturation(0.233, "a", n=1000), "b": saturation(0.677, "b", n=1000)}, 1)
    assert "b: 68%; a: 23%" in text and "right for 45 percentage points more" in text
    assert lesson.combo_exit_layer(saturation(0.9, "x")) == 1
    assert lesson.combo_exit_layer(saturation(0.3, "x")) == 2                # layer 1 is right for 30 % only
    assert lesson.combo_exit_layer(saturation(0.9, "x"), min_alpha=1.0) == 2


def test_profile_sentences_follow_the_profiles():
    base = dict(steps=10, acceptance=0.5, first_layer_tokens=100, last_layer_tokens=100, full_ms_per_token=1.0,
                late_ms_per_token=2.0, early_ms_per_token=2.0, outside_ms_per_token=0.5, ms_per_token=5.5)
    theirs = {**base, "first_layer_tokens": 200, "full_ms_per_token": 4.0, "late_ms_per_token": 0.0,
              "outside_ms_per_token": 1.5, "ms_per_token": 7.5}
    same, layers, costs, verdict = lesson.profile_sentences({"labkit": base, "transformers": theirs})
    assert same.startswith("Both drafted the same tokens") and "(2.0x)" in layers and "labkit is faster" in verdict
    assert costs.startswith("On this machine") and "the larger gap is verifying" in costs    # 1.0 against 1.0 ms
    loop = lesson.profile_sentences({"labkit": base, "transformers": {**theirs, "outside_ms_per_token": 2.0}})[2]
    assert "the larger gap is the decoding loop outside model calls (1.50 ms per token)" in loop
    loop_even = {**theirs, "outside_ms_per_token": 0.5, "full_ms_per_token": 6.0}
    assert "the larger gap is verifying (and prefill) (3.00 ms" in lesson.profile_sentences(
        {"labkit": base, "transformers": loop_even})[2]
    differ = lesson.profile_sentences({"labkit": base, "transformers": {**theirs, "steps": 12, "ms_per_token": 4.0}})
    assert differ[0].startswith("Their drafts differ") and "transformers is faster" in differ[-1]


def test_roc_sentence_ranks_signals():
    rocs = {"m": {"softmax response": {"auc": 0.8, "auc_low": 0.75, "auc_high": 0.85},
                  "exit classifier": {"auc": 0.7, "auc_low": 0.65, "auc_high": 0.74},
                  "state saturation": {"auc": 0.4, "auc_low": 0.35, "auc_high": 0.45}}}
    (text,) = lesson.roc_sentence(rocs)
    assert "the softmax response predicts best (AUC 0.80, interval 0.75–0.85)" in text
    assert "ahead of the exit classifier" in text and "beyond the noise" in text and "worse than a coin flip" in text
    rocs["m"]["exit classifier"].update(auc=0.78, auc_high=0.8)
    (text,) = lesson.roc_sentence(rocs)
    assert "but the exit classifier (AUC 0.78, interval 0.65–0.80) is within the noise of it" in text
    # the worst signal against a coin flip is judged by its interval (full mode of 08: 0.46, interval 0.44–0.47)
    rocs["m"]["state saturation"].update(auc=0.46, auc_low=0.44, auc_high=0.47)
    (text,) = lesson.roc_sentence(rocs)
    assert "worse than a coin flip (0.5) beyond the noise" in text and "close to" not in text
    rocs["m"]["state saturation"].update(auc=0.48, auc_low=0.45, auc_high=0.52)
    assert "within the noise of a coin flip (0.5)" in lesson.roc_sentence(rocs)[0]
    rocs["m"]["state saturation"].update(auc=0.65, auc_low=0.63, auc_high=0.67)
    assert "better than a coin flip (0.5) beyond the noise" in lesson.roc_sentence(rocs)[0]




def test_the_map_places_every_chapter_on_a_method():
    keys = {m["key"] for m in lesson.FAMILY_METHODS}
    assert [c["number"] for c in lesson.LAB_CHAPTERS] == [f"{i:02d}" for i in range(10)] + ["12"]
    on = {c["number"]: c["method"] for c in lesson.LAB_CHAPTERS}
    assert on["07"] == "layer skip" and on["12"] == "sparsity"             # 07 skips whole blocks, 12 neurons
    assert [n for n, m in on.items() if m == "sparsity"] == ["12"]
    assert all(c["method"] in keys for c in lesson.LAB_CHAPTERS)
    assert all(t in keys for m in lesson.FAMILY_METHODS for t in m.get("feeds", ()))


def test_exit_layer_explorer_moves_its_figure():
    t = table(**BASE).assign(acceptance=lambda d: d["acceptance"], tokens_per_step=lambda d: d["tokens_per_step"])
    explorer = lesson.ExitLayerExplorer(t, {1: 0.2, 2: 0.3, 6: 0.8})
    assert explorer.slider.value == 6                                   # opens on the fastest exit
    before = list(explorer.figure.data[0].marker.line.width)
    explorer.slider.value = 2
    assert list(explorer.figure.data[0].marker.line.width) != before and "E = 2" in explorer.readout.value
    assert list(explorer.figure.data[-1].x) == [2] and list(explorer.figure.data[-1].y) == [0.8]   # the ring moved
    assert explorer.figure.layout.width <= FIGURE_WIDTH


def test_gate_explorer_moves_its_figure():
    signal = pd.DataFrame({"prev_confidence": [0.1, 0.3, 0.5, 0.7, 0.9, 0.2], "first_accepted": [0, 1, 0, 1, 1, 0],
                           "n_drafted": [2] * 6, "n_accepted": [0, 1, 0, 2, 2, 0], "accepted_fraction": [0] * 6,
                           "prompts": ["s"] * 3 + ["o"] * 3, "policy": ["p"] * 6}).astype({"first_accepted": bool})
    sw = pd.DataFrame({"prompts": ["s", "s", "o", "o"], "policy": ["p"] * 4, "threshold": [np.nan, 0.4, np.nan, 0.4],
                       "speedup": [1.0, 1.1, 1.2, 0.9], "acceptance": [0.5, 0.6, 0.7, 0.6]})
    explorer = lesson.GateExplorer(signal, sw, threshold=0.4)
    kept_before = [list(d.x) for d in explorer.figure.data]
    explorer.slider.value = 0.05
    assert [list(d.x) for d in explorer.figure.data] != kept_before
    assert explorer.figure.layout.shapes[0].x0 == 0.05 and "0.05" in explorer.readout.value
    text = explorer.readout.value
    explorer.choice.value = ("o", "p")
    assert explorer.readout.value != text and sum(len(d.x) for d in explorer.figure.data) == 3
    assert not math.isnan(explorer.last_update_ms)
    assert "below 0.5" not in text                                   # "s": confidence 0.3 accepted, 0.1 and 0.5 not
    assert lesson._below_chance(0.24).startswith(" (below 0.5") and lesson._below_chance(0.7) == ""
