"""Notebook 05's glue: sentences follow the numbers (data that reverses a claim reverses the sentence), every
control moves its figure, and at the notebook's defaults the Monte-Carlo passes the correct rule and fails both
wrong ones."""
import pandas as pd
import papermill as pm
import pytest
import torch

from labkit import SkipSet
from labkit.artifacts.paths import MODELS_DIR, NOTEBOOK_DIR
from labkit.lessons import speculative_sampling as lesson
from labkit.measure.comparisons import speculative_sampling as ss
from labkit.viz.sampling import CURRENT_T, temperature_view

from tiny_models import tiny_model


def test_describe_trend_follows_the_data():
    t = [0.5, 1.0, 1.5]
    assert "rises from 0.50 at T = 0.5 to 0.70 at T = 1.5" in lesson.describe_trend(t, [0.5, 0.6, 0.7], "α")
    assert "falls from 0.70 at T = 0.5 to 0.50 at T = 1.5" in lesson.describe_trend(t, [0.7, 0.6, 0.5], "α")
    assert "stays at about 0.60" in lesson.describe_trend(t, [0.6, 0.605, 0.6], "α")
    dip = lesson.describe_trend(t, [0.77, 0.76, 0.82], "α")            # 05's FAST sweep: a dip inside the tolerance
    assert "rises overall from 0.77 at T = 0.5 to 0.82 at T = 1.5, not steadily (0.76 at T = 1)" in dip
    turning = lesson.describe_trend(t, [0.6, 0.4, 0.7], "α")
    assert "falls from 0.60" in turning and "to 0.40 at T = 1" in turning and "then rises to 0.70" in turning
    assert "fewer than two" in lesson.describe_trend([1.0], [0.3], "α")


def mc_row(rule, ok, p_value):
    return {"rule": rule, "consistent_with_p": ok, "p_value": p_value, "n": 20000, "level": 0.01}


def test_monte_carlo_sentence_follows_the_verdicts():
    good = lesson.monte_carlo_sentence([mc_row("speculative", True, 0.4), mc_row("resample from p", False, 1e-9)])
    assert "speculative (p-value 0.4) is consistent with p; resample from p (p-value < 1e-4) is not" in good
    flipped = lesson.monte_carlo_sentence([mc_row("speculative", False, 0.001), mc_row("resample from p", True, 0.3)])
    assert "resample from p (p-value 0.3) is consistent with p; speculative (p-value 0.001) is not" in flipped
    assert "cannot tell them apart" in lesson.monte_carlo_sentence([mc_row("speculative", True, 0.5),
                                                                    mc_row("greedy draft", True, 0.2)])


def sweep(over: bool, faster: bool, spread: float = 0.01):
    e = [3.0, 2.5] if over else [2.0, 1.6]
    s = [1.3, 1.2] if faster else [0.8, 0.9]
    return pd.DataFrame({"temperature": [0.5, 1.0], "measured_alpha": [0.7, 0.6], "predicted_alpha": [0.72, 0.58],
                         "tested": [80, 90], "tokens_per_step": [2.5, 2.0], "expected_tokens_per_step": e,
                         "measured_speedup": s, "speedup_min": [v - spread for v in s],
                         "speedup_max": [v + spread for v in s],
                         "predicted_speedup": [1.0, 1.0], "predicted_speedup_cv": [0.9, 0.85],
                         "c_v": [1.3, 1.4]})


def test_sweep_sentences_follow_the_numbers():
    a = lesson.sweep_sentences(sweep(over=True, faster=False))
    assert "measured α falls from 0.70" in a[0] and "speedup over plain sampling rises from 0.80" in a[1]
    assert a[1].startswith("On this machine") and "this machine" not in a[0]
    assert "within 0.020" in a[2] and "T = 0.5" in a[2]
    assert "overestimates" in a[3] and "2 of 2" in a[3]
    assert "below Leviathan's E / (γc + 1) beyond its spread at 2 of 2" in a[4] and "(more than one)" in a[4]
    assert "differ by more than their repetitions' min–max" in a[1]
    assert "E / (γc + c_v) is within 0.10 of the measured speedup" in a[4] and "this machine" in a[4]
    b = lesson.sweep_sentences(sweep(over=False, faster=True))
    assert "underestimates" in b[3] and "0 of 2" in b[3]
    assert "speedup over plain sampling falls from 1.30" in b[1] and "at 0 of 2" in b[4]
    noisy = lesson.sweep_sentences(sweep(over=True, faster=False, spread=0.2))       # the spreads overlap
    assert "within the noise" in noisy[1] and "beyond its spread at 0 of 2" in noisy[4]


def reference_file(tmp_path, spreads):
    """A reference file with speculative sampling's rows at the given (median, min, max) per temperature."""
    import json

    rows = [{"method": f"speculative sampling, T={t:g}", "kind": "self-spec", "source": "stdlib", "prompts": 4,
             "tokens": 128, "repetitions": 5, "ms_per_token": [3.0, 2.9, 3.1], "speedup": list(v),
             "baseline": f"plain sampling, T={t:g}"} for t, v in spreads.items()]
    (tmp_path / "summary.json").write_text(json.dumps({
        "group": "summary", "rows": rows,
        "machine": {"cpu_model": "Test CPU", "threads": 1, "load_before": [0.1, 0, 0], "load_after": [0.2, 0, 0]}}))
    return tmp_path


def test_reference_sampling_gives_one_answer_per_temperature(tmp_path):
    """03, 05 and the README read the same rows: speculative sampling against plain sampling, per temperature."""
    folder = reference_file(tmp_path, {0.7: (1.10, 1.05, 1.15), 1.0: (1.12, 1.08, 1.16)})
    rows, machine = lesson.reference_sampling(folder=folder)
    assert set(rows) == {0.7, 1.0} and rows[0.7].speedup.median == pytest.approx(1.10)
    text = lesson.reference_sampling_sentence(rows, machine)
    assert "Test CPU" in text and "1.10x (1.05" in text and "within the noise of each other" in text
    assert "this machine" not in text
    apart = reference_file(tmp_path, {0.7: (1.10, 1.05, 1.15), 1.0: (0.90, 0.85, 0.95)})
    found = lesson.reference_sampling(folder=apart)
    assert "lower at T = 1, beyond the noise" in lesson.reference_sampling_sentence(*found)
    assert lesson.reference_sampling(folder=tmp_path / "none") == ({}, None)
    assert "No reference run is committed" in lesson.reference_sampling_sentence({}, None)
    other = reference_file(tmp_path, {})                                    # a reference run without these rows
    found = lesson.reference_sampling(folder=other)
    assert "has no speculative-sampling rows" in lesson.reference_sampling_sentence(*found)


def test_rejection_rate_is_power_only_for_a_wrong_rule():
    exact = lesson.rejection_rate_line({"rule": "speculative", "rejection_rate": 0.01, "n": 20000, "level": 0.01,
                                        "exact": True, "tv_to_p": 0.0})
    assert "false-alarm rate, 0.010" in exact and "power" not in exact
    wrong = lesson.rejection_rate_line({"rule": "resample from p", "rejection_rate": 0.97, "n": 20000,
                                        "level": 0.01, "exact": False, "tv_to_p": 0.05})
    assert "power" in wrong and "0.970" in wrong and "false-alarm" not in wrong


def test_monte_carlo_marks_exact_rules_and_their_false_alarm_rate():
    p, q = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.3, 0.5])
    rows = {r["rule"]: r for r in ss.monte_carlo(p, q, 5000)}
    assert rows["speculative"]["exact"] and rows["speculative"]["rejection_rate"] == pytest.approx(0.01, abs=1e-6)
    assert not rows["resample from p"]["exact"] and rows["resample from p"]["rejection_rate"] > 0.5


def two_token_row(rule, tv, ok, noise=0.007):
    return {"rule": rule, "n": 20000, "tv": tv, "tv_noise": noise, "p_value": 0.5 if ok else 1e-9,
            "consistent_with_p": ok}


def test_multi_token_sentence_says_within_the_noise_only_when_it_is():
    text = lesson.multi_token_sentence([two_token_row("γ = 1, bonus from p", 0.008, True),
                                        two_token_row("γ = 2, rest kept (wrong)", 0.07, False)])
    assert "γ = 1, bonus from p: TV 0.0080 (within the noise)" in text and "consistent with p's joint" in text
    assert "γ = 2, rest kept (wrong): TV 0.0700 (10× the noise)" in text and "NOT distributed" in text
    flipped = lesson.multi_token_sentence([two_token_row("γ = 1, bonus from p", 0.07, False)])
    assert "within the noise" not in flipped


def test_multi_token_check_passes_the_exact_step_and_fails_keeping_the_draft():
    rows = {r["rule"]: r for r in ss.multi_token_check(ss.two_token_tree(4, seed=0), 20000, seed=0)}
    assert rows["γ = 1, bonus from p"]["consistent_with_p"] and rows["γ = 2, rest discarded"]["consistent_with_p"]
    assert not rows["γ = 2, rest kept (wrong)"]["consistent_with_p"]
    assert rows["γ = 2, rest discarded"]["tv"] < 3 * rows["γ = 2, rest discarded"]["tv_noise"]


def alpha_frame(alphas, tested=2000):
    return pd.DataFrame({"temperature": [0.2, 1.0, 2.0], "measured_alpha": alphas, "tested": [tested] * 3})


def test_alpha_shape_sentence_names_the_minimum_and_the_noise():
    u = lesson.alpha_shape_sentence(alpha_frame([0.9, 0.6, 0.8]), low_t_alpha=0.93)
    assert "lowest in the middle" in u and "0.60 at T = 1" in u and "a U" in u and "0.93" in u
    flat = lesson.alpha_shape_sentence(alpha_frame([0.62, 0.6, 0.61], tested=50))   # inside 2 standard errors
    assert "lowest in the middle" not in flat and "no claim" in flat
    falling = lesson.alpha_shape_sentence(alpha_frame([0.9, 0.8, 0.6]))
    assert "at an end of the sweep" in falling and "no claim" in falling


@pytest.fixture(scope="module")
def recorded():
    model = tiny_model("llama", n_layers=4, vocab_size=97)
    result, positions = ss.record_positions(model, torch.tensor([[1, 2, 3, 4]]), skip=SkipSet(mlp=[1, 2]),
                                            temperature=1.0, max_new_tokens=30, seed=2)
    frame = ss.temperature_sweep(model, [torch.tensor([[1, 2, 3]])], skip=SkipSet(mlp=[1, 2]),
                                 temperatures=[0.5, 1.0, 1.5], max_new_tokens=10, progress=False)
    return positions, frame


def fake(accepted: bool, peaked: bool) -> ss.SampledPosition:
    p = torch.full((100,), 1 / 100)
    if peaked:
        p = torch.tensor([0.6, 0.3] + [0.1 / 98] * 98)
    return ss.SampledPosition(0, 0, 5, 1, accepted, p, p.clone(), 1.0)


def test_default_position_prefers_a_readable_rejection():
    positions = [fake(True, True), fake(False, False), fake(False, True), fake(False, True)]
    assert lesson.default_position(positions) == 2                  # the first rejection with a concentrated p
    assert lesson.default_position(positions[:2]) == 1              # no concentrated rejection: the best rejected
    assert lesson.default_position([fake(True, True), fake(True, False)]) == 0     # nothing rejected
    with pytest.raises(ValueError):
        lesson.default_position([])


def test_every_control_moves_its_figure(recorded):
    positions, frame = recorded
    labels = {i: f"t{i}" for i in range(97)}
    explorer = lesson.SamplingExplorer(positions, labels, temperature_view(frame), gamma=4)
    y = lambda fig, i: list(fig.data[i].y)                                   # noqa: E731
    before = y(explorer.figure, 0)
    explorer.temperature.value = 1.5
    assert y(explorer.figure, 0) != before
    assert [s.x0 for s in explorer.sweep.layout.shapes if s.name == CURRENT_T] == [1.5] * 3
    before = y(explorer.figure, 0)
    explorer.position.value = (explorer.position.value + 1) % len(positions)
    assert y(explorer.figure, 0) != before
    panel = lesson.MonteCarloPanel(explorer, n=20000)

    def snapshot():
        return y(panel.figure, 1), panel.figure.layout.annotations[0].text, panel.figure.layout.title.text
    for move in (lambda: setattr(panel.rule, "value", "resample from p"), lambda: setattr(panel.n, "value", 1000),
                 panel.again.click, lambda: setattr(explorer.temperature, "value", 0.5),
                 lambda: setattr(explorer.position, "value", 0)):
        before = snapshot()
        move()
        assert snapshot() != before


def test_notebook_defaults_separate_the_rules_on_synthetic_pairs():
    """At the notebook's default sample size and level, on 20 synthetic (p, q) pairs."""
    params = pm.inspect_notebook(str(NOTEBOOK_DIR / "05_speculative_sampling.ipynb"))
    n, level = int(params["MC_SAMPLES"]["default"]), float(params["MC_LEVEL"]["default"])
    passes = {rule: 0 for rule in ss.RULES}
    for seed in range(20):
        g = torch.Generator().manual_seed(100 + seed)
        logits = 2.5 * torch.randn(4096, generator=g)
        p = torch.softmax(logits, 0)
        q = torch.softmax(0.6 * logits + torch.randn(4096, generator=g), 0)
        for row in ss.monte_carlo(p, q, n, seed=seed, level=level):
            passes[row["rule"]] += row["consistent_with_p"]
    assert passes["speculative"] >= 18 and passes["resample from p"] == 0 and passes["greedy draft"] == 0


@pytest.mark.slow
@pytest.mark.skipif(not (MODELS_DIR / "default" / "config.json").exists(), reason="needs the shipped default model")
def test_notebook_default_position_separates_the_rules():
    """The notebook's own Monte-Carlo, recomputed from its default parameters (model, prompt, run, position)."""
    import labkit
    from labkit.artifacts.prompts import pick_prompt
    from labkit.artifacts.results import skip_set_for

    found = pm.inspect_notebook(str(NOTEBOOK_DIR / "05_speculative_sampling.ipynb"))
    params = {k: v["default"] for k, v in found.items()}
    model, tokenizer = labkit.load_model(params["MODEL"].strip("\"'"))
    _, ids, n_new = pick_prompt(tokenizer, model, int(params["N_NEW"]), seed=int(params["SEED"]))
    skip, _ = skip_set_for("default", model.config.num_hidden_layers)
    _, positions = ss.record_positions(model, ids, skip=skip, temperature=float(params["TEMPERATURE"]),
                                       max_new_tokens=n_new, policy=labkit.FixedK(int(params["GAMMA"])),
                                       seed=int(params["SEED"]))
    pos = positions[lesson.default_position(positions)]
    rows = {r["rule"]: r for r in ss.monte_carlo(pos.p, pos.q, int(params["MC_SAMPLES"]), seed=int(params["SEED"]),
                                                 level=float(params["MC_LEVEL"]))}
    assert rows["speculative"]["consistent_with_p"]
    assert not rows["resample from p"]["consistent_with_p"] and not rows["greedy draft"]["consistent_with_p"]
