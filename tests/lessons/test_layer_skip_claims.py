"""Notebook 02's sentences turn with the data (fake numbers that reverse each claim)."""
from types import SimpleNamespace

import pandas as pd
import pytest

from labkit import SkipSet
from labkit.lessons import layer_skip as ls
from labkit.lessons.notebook import display_table, short_table


def cost(att, mlp, r2=0.98, fixed=0.6):
    return SimpleNamespace(attention_ms=[att] * 8, mlp_ms=[mlp] * 8, layer_ms=[0.05] * 8, fixed_ms=fixed,
                           full_step_ms=fixed + 8 * (att + mlp + 0.05), fit={"r2": r2})


PARAMS = {"attention": 200_000, "mlp": 400_000, "lm_head": 1_000_000}


def test_cost_sentence_says_what_dominates():
    assert "Time does not follow the weights" in ls.cost_sentence(cost(0.25, 0.2), PARAMS)
    assert "roughly follows the weights" in ls.cost_sentence(cost(0.1, 0.2), PARAMS)
    assert "The fit is poor" in ls.cost_sentence(cost(0.25, 0.2, r2=0.6), PARAMS)
    assert "The fit is poor" in ls.cost_sentence(cost(0.0, 0.2), PARAMS)


def test_summary_cost_sentence_quotes_the_split_only_from_a_good_fit():
    assert "(here 0.60 of 4.60 ms)" in ls.summary_cost_sentence(cost(0.25, 0.2), 2.0)
    for bad in (cost(0.25, 0.2, r2=0.6), cost(0.25, 0.2, fixed=0.0)):
        text = ls.summary_cost_sentence(bad, 2.0)
        assert "could not split" in text and "(here" not in text and "2.00 one-token steps" in text


def test_verify_sentence_names_the_regime():
    assert "paid once per call" in ls.verify_sentence(1.46) and "kernel launches" not in ls.verify_sentence(1.46)
    assert "not cheap" in ls.verify_sentence(4.2)
    assert "the fit is poor" in ls.verify_sentence(1.0, r2=0.6)


def test_path_ends_and_search_vs_greedy():
    frame = pd.DataFrame({"n_skipped": [0, 8, 16], "ms_per_token": [5.0, 4.0, 6.0], "alpha_source": ["measured"] * 3})
    text = ls.path_ends_sentence(frame, 4.6)
    assert text.count("slower than plain decoding") == 2
    level = ls.path_ends_sentence(frame.assign(ms_per_token=[4.6, 4.0, 6.0]), 4.6)
    assert "Skipping nothing is predicted at 4.60 ms/token, as fast as plain decoding" in level
    assert "beat optimising agreement" in ls.search_vs_greedy_sentence(1.4, 1.3, 100)
    assert "did not reach what greedy elimination found" in ls.search_vs_greedy_sentence(1.27, 1.354, 20)
    assert "end up level" in ls.search_vs_greedy_sentence(1.30, 1.301, 20)


def test_search_history_counts_repeated_masks():
    def trial(number, value, mask):
        return SimpleNamespace(number=number, value=value, params={f"z{i}": v for i, v in enumerate(mask)})
    fresh = SimpleNamespace(trials=[trial(0, 5.0, [0, 0]), trial(1, 4.0, [1, 0]), trial(12, 3.0, [1, 1])])
    assert "Every trial evaluated a new mask (3 distinct masks)" in ls.search_history_sentence(fresh)
    assert "a GP proposal" in ls.search_history_sentence(fresh)
    stale = SimpleNamespace(trials=fresh.trials + [trial(13, 3.0, [1, 1]), trial(14, 3.0, [1, 1])])
    text = ls.search_history_sentence(stale)
    assert "2 trial(s), from trial 13 on, re-proposed a mask" in text and "3 distinct masks" in text


def test_sampler_masks_and_single_blocks():
    text = ls.mask_sentence({"a": SkipSet(attention=[1, 2]), "b": SkipSet(attention=[0, 2])})
    assert text.startswith("a keeps layer 0's attention") and "only a skips attention 1" in text
    single = {"m": {"attention": [0.0, 0.9, 0.95], "mlp": [0.5, 0.96, 0.97]}}
    assert "skipping attention 0 alone leaves 0% agreement" in ls.single_block_sentence(single, ("m",))
    single["m"]["attention"][0] = 0.99
    assert "skipping MLP 0 alone leaves 50%" in ls.single_block_sentence(single, ("m",))


def test_acceptance_sentence_explains_the_gap():
    assert "That accounts for the gap" in ls.acceptance_sentence(0.8, 0.72, 2.0)    # (0.8 + 0.64) / 2 = 0.72
    loop = ls.acceptance_sentence(0.8, 0.34, 2.0, probe_share=0.6, run_share=0.05)
    assert "60% of the probe's" in loop and "5% of this run's; repeated text is easy to draft" in loop
    plain = ls.acceptance_sentence(0.8, 0.34, 2.0, probe_share=0.12, run_share=0.0)
    assert "easy to draft" not in plain and "(0.380) is not explained by counting" in plain
    # full mode of 02 (α 0.828, d 3, measured 0.378): the gap is not attributed to the text alone
    full = ls.acceptance_sentence(0.828, 0.378, 3.0, probe_share=0.19, run_share=0.14)
    assert "comes from the text" not in full and "The text:" in full and "The condition:" in full
    assert "does not separate the two" in full
    assert all(len(sentence.split()) <= 50 for sentence in full.split(". "))
    # 02's FAST run: α 0.938 on the search's prompts, 54 % teacher-forced on the showcase prompt, d = 3.684
    text = ls.acceptance_sentence(0.938, 0.45, 3.684, prompt_agreement=0.54)
    assert "d = 3.68 drafted" in text and "the new text explains most of the gap" in text
    assert "does not separate" not in text
    same_text = ls.acceptance_sentence(0.938, 0.45, 3.684, prompt_agreement=0.93)
    assert "the text does not explain it; what is left is the condition" in same_text
    # 02's full run: α 0.906, d 3.88, measured 0.430, 47 % on the showcase prompt, which predicts 0.218: the prompt
    # is harder than the run, so the text explains all of the gap (the condition is not blamed)
    harder = ls.acceptance_sentence(0.906, 0.430, 3.88, prompt_agreement=0.472)
    assert "the new text explains all of the gap" in harder and "condition" not in harder
    above = ls.acceptance_sentence(0.8, 0.9, 2.0)                       # measured above the i.i.d. count
    assert "accepted more often than that (+0.180)" in above and "gap" not in above.split("0.720. ")[1]


def test_wall_clock_sentence_gives_the_reasons_the_data_shows():
    wall = pd.DataFrame({"speedup": [1.0, 0.74, 0.92], "speedup_min": [1.0, 0.70, 0.85],
                         "speedup_max": [1.0, 0.78, 1.05], "identical": [True] * 3},
                        index=["plain decoding", "fixed", "adaptive"])
    text = ls.wall_clock_sentence(wall, 1.27, expected_acc=0.81, measured_acc=0.31, acc_row="fixed")
    assert "fixed 0.74x (min–max 0.70–0.78): slower than plain decoding, below the prediction" in text
    assert "adaptive 0.92x (min–max 0.85–1.05): level with plain decoding within the noise" in text
    assert "The fixed drafts were accepted far less often" in text and "section 7" not in text and "identical" in text
    fast = wall.assign(speedup=[1.0, 1.3, 1.25], speedup_min=[1.0, 1.25, 1.2], speedup_max=[1.0, 1.35, 1.3])
    text = ls.wall_clock_sentence(fast, 1.27, expected_acc=0.81, measured_acc=0.78)
    assert "faster than plain decoding, about as predicted" in text and "accepted far less" not in text
    bad = wall.assign(identical=[True, False, True])
    assert "DIFFERED" in ls.wall_clock_sentence(bad, 1.27)


def test_redundancy_sentence_says_within_the_noise():
    a, b = SkipSet(attention=[1], mlp=[2]), SkipSet(attention=[2], mlp=[2])
    paths = {"d": [(SkipSet(attention=[1]), 0.99), (b, 0.953)]}
    close = ls.redundancy_sentence({"d": 0.953}, {"t": (a, 0.958)}, paths, "d", n_positions=192)
    assert "within the noise (192 positions" in close and "walked past" not in close
    apart = ls.redundancy_sentence({"d": 0.80}, {"t": (a, 0.958)}, {"d": [paths["d"][0], (b, 0.80)]}, "d",
                                   n_positions=192)
    assert "walked past the better set" in apart


def test_pooling_sentence_describes_the_bars_it_is_given():
    pooled = cost(0.23, 0.17)
    pooled.n_layers = 8
    pooled.fit = {"r2": 0.999, "pooling": "partial", "n_sets": 42,
                  "shrinkage": {"attention": 42e6, "mlp": 42e6, "layer": 3.5}}
    text = ls.pooling_sentence(pooled)
    assert "all 8 attention bars are 0.230 ms" in text and "all 8 MLP bars are 0.170 ms" in text
    assert "no bar is at 0 ms" in text and "range" not in text
    assert "pooled the attention and MLP costs completely" in text and "layer-overhead costs part of the way" in text
    scattered = cost(0.23, 0.17)
    scattered.n_layers = 8
    scattered.attention_ms = [0.0, 0.1, 0.2, 0.3, 0.3, 0.3, 0.3, 0.34]
    scattered.fit = {"r2": 0.9, "pooling": "partial", "n_sets": 42,
                     "shrinkage": {"attention": 0.5, "mlp": 0.5, "layer": 0.5}}
    text = ls.pooling_sentence(scattered)
    assert "the 8 attention bars range from 0.000 to 0.340 ms" in text and "1 bar came out at 0 ms" in text
    assert "completely" not in text and "attention, MLP and layer-overhead costs part of the way" in text
    unpooled = SimpleNamespace(**{**vars(scattered), "fit": {"pooling": "none"}})
    assert "pooled" not in ls.pooling_sentence(unpooled) and "pulled" not in ls.pooling_sentence(unpooled)


def tradeoff_model():
    from labkit.measure.costs.costmodel import CostModel
    return CostModel(n_layers=2, fixed_ms=0.5, attention_ms=[0.2, 0.2], mlp_ms=[0.2, 0.2], layer_ms=[0.1, 0.1],
                     verify_ms=[2.0 + 0.1 * k for k in range(6)], full_step_ms=1.9)


def test_set_tradeoff_sentence_turns_with_agreement_and_cost():
    cm = tradeoff_model()
    whole_layer = SkipSet(attention=[0], mlp=[0])          # saves layer 0's overhead too: the cheaper draft
    split = SkipSet(attention=[0], mlp=[1])
    both = ls.set_tradeoff_sentence(cm, (whole_layer, 0.828), (split, 0.760))
    assert "the search's set agrees on 82.8%" in both and "greedy elimination's on 76.0%" in both
    assert "better on both counts: nothing was traded" in both and "missed a set of this size" in both
    traded = ls.set_tradeoff_sentence(cm, (whole_layer, 0.75), (split, 0.76))
    assert "traded agreement for a cheaper draft" in traded and "the trade paid" in traded
    lost = ls.set_tradeoff_sentence(cm, (whole_layer, 0.40), (split, 0.76))
    assert "traded agreement for a cheaper draft" in lost and "did not pay, greedy's set is predicted faster" in lost
    assert ("traded a dearer draft for higher agreement"
            in ls.set_tradeoff_sentence(cm, (split, 0.83), (whole_layer, 0.76)))
    worse = ls.set_tradeoff_sentence(cm, (split, 0.70), (whole_layer, 0.76))
    assert "Greedy elimination's set is at least as good on both counts" in worse and "nothing was traded" not in worse
    same_cost = ls.set_tradeoff_sentence(cm, (SkipSet(attention=[0]), 0.9), (SkipSet(attention=[1]), 0.8))
    assert "agrees more at the same draft cost" in same_cost
    assert "agree equally often and the search's set drafts cheaper" in ls.set_tradeoff_sentence(
        cm, (whole_layer, 0.8), (split, 0.8))
    assert "level on both counts" in ls.set_tradeoff_sentence(cm, (split, 0.8), (split, 0.8))
    assert "skips nothing" in ls.set_tradeoff_sentence(cm, (SkipSet(), 1.0), None)


def test_display_table_shows_a_dash_not_nan():
    wall = pd.DataFrame({"ms_per_token": [3.886, 4.4721], "speedup": [1.0, 0.869],
                         "acceptance_rate": [float("nan"), 0.441], "identical": [True, True]},
                        index=["plain decoding", "fixed"])
    shown = display_table(wall)
    assert shown.loc["plain decoding", "acceptance_rate"] == "–" and shown.loc["fixed", "acceptance_rate"] == "0.441"
    assert shown.loc["fixed", "ms_per_token"] == "4.472" and "NaN" not in shown.to_string()
    assert bool(shown["identical"].all()) and wall["acceptance_rate"].isna().iloc[0]     # the data is untouched


def test_short_table_keeps_the_point_and_puts_the_rest_one_click_away():
    wide = pd.DataFrame({f"c{i}": [float(i), float("nan")] for i in range(28)}, index=["plain", "draft"])
    html = short_table(wide, ["c0", "c27"]).data
    head, rest = html.split("<details>")
    assert "c27" in head and "c5" not in head and "c5" in rest and "(28)" in rest and "–" in head
    with pytest.raises(KeyError, match="speedup"):
        short_table(wide, ["speedup"])


def test_reference_helpers_say_when_nothing_is_committed(tmp_path):
    import json

    from labkit.lessons.notebook import noise_floor_line, reference_or_none

    assert reference_or_none("summary", tmp_path) is None
    assert "no A/A pair" in noise_floor_line(None)
    (tmp_path / "summary.json").write_text(json.dumps({"group": "summary", "machine": {}, "rows": [
        {"method": "plain loop, again (A/A)", "kind": "plain", "source": "stdlib", "prompts": 4, "tokens": 128,
         "repetitions": 5,
         "ms_per_token": [3.0, 2.9, 3.1], "speedup": [1.0, 0.96, 1.04]}]}))
    line = noise_floor_line(reference_or_none("summary", tmp_path))
    assert line.startswith("In the reference run the plain loop") and "1.00x (0.96" in line and "noise" in line
