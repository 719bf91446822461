"""labkit.measure: agreement probes, greedy elimination, the cost model and speed helpers of notebook 02, on tiny
random models (shared pieces in tests/tiny_probes.py)."""

import pytest
import torch

from labkit import SkipSet, skipping
from labkit.core.policies import FixedK
from labkit.measure import agreement as agr
from labkit.measure.comparisons import speed as spd
from labkit.measure.costs.analytic import predict
from labkit.measure.costs.costmodel import tied_cost_model
from labkit.viz import agreement as agrv
from labkit.viz import costs as costv

from tiny_models import ToyTokenizer
from tiny_probes import paths, tiny, toy_cost_model  # noqa: F401 (fixtures)


def test_verify_cost_in_steps():
    cm = toy_cost_model()
    assert costv.verify_cost_in_steps(cm, 1) == 1.0
    assert costv.verify_cost_in_steps(cm, 5) == pytest.approx(9.0 / 7.0)
    for bad, error in ((0, ValueError), (6, ValueError), (True, TypeError), (2.0, TypeError)):
        with pytest.raises(error, match="n_tokens must be an integer in"):
            costv.verify_cost_in_steps(cm, bad)


def test_tied_cost_model_keeps_totals_and_spreads_them_evenly():
    cm = toy_cost_model()
    cm.attention_ms = [0.0, 1.0, 0.2, 0.8]
    cm.mlp_ms = [3.0, 0.0, 0.0, 0.0]
    tied = tied_cost_model(cm)
    assert tied.attention_ms == [0.5] * 4 and tied.mlp_ms == [0.75] * 4 and tied.layer_ms == [0.25] * 4
    assert tied.draft_ms(SkipSet()) == pytest.approx(cm.draft_ms(SkipSet()))
    assert tied.draft_ms(SkipSet(mlp=[0])) == pytest.approx(cm.draft_ms(SkipSet()) - 0.75)
    assert tied.draft_ms(SkipSet(mlp=[1])) == tied.draft_ms(SkipSet(mlp=[0]))
    assert tied.verify_ms == cm.verify_ms and tied.full_step_ms == cm.full_step_ms and tied.fixed_ms == cm.fixed_ms
    assert cm.attention_ms == [0.0, 1.0, 0.2, 0.8]                        # the original is untouched
    assert tied.fit["tied"] and "tied" in tied.method and "tied" in costv.cost_breakdown_figure(tied).layout.title.text


def test_elimination_frame_and_agreement_at_ratio(paths):
    df = agrv.elimination_frame(paths, 4)
    assert len(df) == 2 * 9
    a = df[df.model == "a"].reset_index(drop=True)
    assert a.loc[0, "agreement"] == 1.0 and a.loc[0, "n_skipped"] == 0 and a.loc[0, "added"] == ""
    assert list(a["n_skipped"]) == list(range(9)) and a.loc[8, "ratio"] == 1.0
    assert all(name.startswith(("attention ", "MLP ")) for name in a["added"][1:])
    assert len(set(a["added"][1:])) == 8                                  # each block removed once
    path = paths["a"]
    assert agrv.agreement_at_ratio(path, 4, 0.5) == path[3][1]
    assert agrv.agreement_at_ratio(path, 4, 0.0) == 1.0
    assert agrv.agreement_at_ratio(path, 4, 1.0) == path[-1][1]
    with pytest.raises(ValueError):
        agrv.agreement_at_ratio(path, 4, 1.5)
    with pytest.raises(ValueError):
        agrv.agreement_at_ratio(path[:2], 4, 0.5)                          # the path stops before 4 skipped
    with pytest.raises(ValueError):
        agrv.elimination_frame({"x": []}, 4)
    with pytest.raises(TypeError):
        agrv.elimination_frame({"x": [("attention 1", 0.5)]}, 4)
    with pytest.raises(ValueError):
        agrv.elimination_frame({"x": [(SkipSet(mlp=[7]), 0.5)]}, 4)        # layer 7 of a 4-layer model


def test_predicted_cost_frame_matches_predict(paths):
    cm = toy_cost_model()
    df = costv.predicted_cost_frame(cm, paths["a"], alphas=(0.5, 0.9), label="a")
    assert len(df) == 9 * 3
    measured = df[df.alpha_source == "measured"].reset_index(drop=True)
    assert measured.loc[0, "alpha"] == 1.0 and measured.loc[0, "n_skipped"] == 0
    skip, alpha = paths["a"][2]
    p = predict(cm, skip, alpha)
    row = measured[measured.n_skipped == 3].iloc[0]
    assert row["ms_per_token"] == pytest.approx(p.ms_per_token) and row["gamma"] == p.gamma
    fixed = df[(df.alpha_source == "fixed") & (df.alpha == 0.9)]
    assert list(fixed["ms_per_token"]) == sorted(fixed["ms_per_token"], reverse=True)   # fixed alpha: skipping pays


def test_token_comparison_without_skipping_agrees_everywhere(tiny):
    c = agr.token_comparison(tiny, ToyTokenizer(), "def f(x):", SkipSet(), n_tokens=10)
    assert len(c.full) == len(c.draft_forced) == len(c.draft_free) == 10
    assert c.draft_forced == c.full and c.draft_free == c.full
    assert c.agreement == 1.0 and c.first_divergence is None and c.verify_steps == 1
    assert c.accepted_runs() == [10]


def test_token_comparison_with_skipping(tiny):
    skip = SkipSet(attention=[1, 2], mlp=[0, 3])
    tok = ToyTokenizer()
    c = agr.token_comparison(tiny, tok, "a longer prompt", skip, n_tokens=12)
    assert c.draft_forced[0] == c.draft_free[0]              # same prefix at the first position
    ids = tok("a longer prompt")["input_ids"][0].tolist()
    with torch.no_grad(), skipping(tiny, skip):               # teacher forcing, position by position
        for i in (0, 5, 11):
            logits = tiny(input_ids=torch.tensor([ids + c.full[:i]])).logits[0, -1]
            assert int(logits.argmax()) == c.draft_forced[i]
    assert 0.0 <= c.agreement <= 1.0 and sum(c.accepted_runs()) == sum(c.agree)
    if c.first_divergence is not None:
        assert c.draft_free[: c.first_divergence] == c.full[: c.first_divergence]
    # greedy speculative decoding with an unlimited draft needs exactly verify_steps steps
    from labkit import speculative_generate

    out = speculative_generate(tiny, torch.tensor([ids]), skip=skip, policy=FixedK(12), max_new_tokens=12,
                               eos_token_id=[])
    assert out.new_tokens == c.full and len(out.trace.steps) == c.verify_steps
    with pytest.raises(TypeError):
        agr.token_comparison(tiny, tok, "x", {"attention": [1]})
    with pytest.raises(ValueError):
        agr.token_comparison(tiny, tok, "", skip)


def test_measure_speedup_is_identical_to_plain(tiny):
    from labkit import AdaptiveThreshold

    ids = ToyTokenizer()("def f(x):")["input_ids"]
    skip = SkipSet(attention=[2], mlp=[3])
    out = spd.measure_speedup(tiny, ids, skip, max_new_tokens=8, repeats=2)
    assert list(out.index) == ["plain decoding", "adaptive threshold"]
    assert out["identical"].all() and out.loc["plain decoding", "speedup"] == 1.0
    row = out.loc["adaptive threshold"]
    assert row["speedup"] == pytest.approx(out.loc["plain decoding", "ms_per_token"] / row["ms_per_token"])
    assert 0 <= row["acceptance"] <= 1 and row["tokens_per_step"] >= 1
    policy = FixedK(3)
    two = spd.measure_speedup(tiny, ids, skip, policies={"k=3": policy, "adaptive": AdaptiveThreshold()},
                             max_new_tokens=8, repeats=1)
    assert list(two.index) == ["plain decoding", "k=3", "adaptive"] and two["identical"].all()
    assert policy == FixedK(3)                                 # the caller's policy object is not used up
    with pytest.raises(ValueError):
        spd.measure_speedup(tiny, ids, skip, repeats=0)
    with pytest.raises(ValueError):
        spd.measure_speedup(tiny, ids, skip, policies={})
    with pytest.raises(TypeError):
        spd.measure_speedup(tiny, ids, skip, policies={"k": 3})


def test_robustness_report_on_outside_prompts(tmp_path):
    from labkit.measure.comparisons.robustness import robustness_report

    from tiny_models import save_tiny_model_folder

    folder = save_tiny_model_folder(tmp_path / "tiny", n_layers=2)
    report = robustness_report(str(folder), n_prompts=1, n_tokens=4, n_random=2, ratios=(0.25,),
                               prompt_source="packages")
    assert report["prompt_source"]["source"] == "packages" and report["prompt_source"]["packages"]
    assert report["by_ratio"][0]["skipped"] == 1 and 0 <= report["by_ratio"][0]["agreement"] <= 1
