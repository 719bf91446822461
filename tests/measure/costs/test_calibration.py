"""labkit.measure.costs.calibration: the expected cost of a run with a fixed draft length (exact under i.i.d.
acceptance, checked against a simulation), the prediction per γ, and a whole calibration on a tiny model: its
prediction, the measured run (token-identical to the plain loop), the budget that explains the gap, the table and
the JSON."""
import json
import random

import pytest

from labkit.core.expectation import expected_tokens
from labkit.core.skip import SkipSet
from labkit.measure.costs import calibration as cal

from tiny_models import ToyTokenizer, tiny_model

PROMPTS = ["def add(a, b):\n    return a", "for i in range(10):\n    print(i)"]


def simulate(alpha, gamma, n, c, c_v, runs=20000, seed=0):
    """The loop itself, with i.i.d. acceptance: (mean steps, mean drafted, mean cost)."""
    rng, steps, drafted, cost = random.Random(seed), 0, 0, 0.0
    for _ in range(runs):
        left = n
        while left:
            k = min(gamma, left - 1)
            j = 0
            while j < k and rng.random() < alpha:
                j += 1
            steps, drafted, cost, left = steps + 1, drafted + k, cost + k * c + c_v(k), left - j - 1
    return steps / runs, drafted / runs, cost / runs


@pytest.mark.parametrize("alpha,gamma,n", [(0.8, 3, 10), (0.5, 1, 7), (0.95, 8, 20)])
def test_expected_run_matches_a_simulation(alpha, gamma, n):
    def c_v(k):
        return 1.0 + 0.1 * k
    exact = cal.expected_run(alpha, gamma, n, 0.4, c_v)
    steps, drafted, cost = simulate(alpha, gamma, n, 0.4, c_v)
    assert exact["steps"] == pytest.approx(steps, rel=0.02)
    assert exact["drafted"] == pytest.approx(drafted, rel=0.02)
    assert exact["cost"] == pytest.approx(cost, rel=0.02)


def test_expected_run_at_the_ends():
    def c_v(k):
        return 1.0
    never = cal.expected_run(0.0, 2, 5, 0.5, c_v)                     # one token a step; drafts 0, 1, 2, 2, 2
    assert never["steps"] == 5 and never["drafted"] == 7 and never["cost"] == pytest.approx(5 + 3.5)
    always = cal.expected_run(1.0, 2, 7, 0.5, c_v)                    # steps emit 3, 3, then the last 1
    assert always["steps"] == 3 and always["drafted"] == 4


def test_predict_speedup_tends_to_the_analytic_limit():
    rows = [{"tokens": 1, "c_v": 1.0}, {"tokens": 5, "c_v": 1.2}]
    p = cal.predict_speedup(0.8, 4, 0.3, rows, prefill=0.0, new_tokens=5000)
    assert p["tokens_per_step_long"] == pytest.approx(expected_tokens(0.8, 4))
    assert p["decode_speedup"] == pytest.approx(expected_tokens(0.8, 4) / (4 * 0.3 + 1.2))
    assert p["speedup"] == pytest.approx(p["decode_speedup"], rel=0.01)
    short = cal.predict_speedup(0.8, 4, 0.3, rows, prefill=5.0, new_tokens=16)
    assert short["speedup"] < p["speedup"] and short["tokens_per_step"] < p["tokens_per_step_long"]
    assert short["step_cost"] == pytest.approx(short["draft_per_step"] + short["verify_per_step"])


@pytest.fixture(scope="module")
def calibration():
    model = tiny_model("llama", n_layers=4)
    return cal.calibrate(model, ToyTokenizer(), prompts=PROMPTS, kept=(1.0, 0.5), gammas=(1, 2), max_new_tokens=8,
                         repeats=2, cost_repeats=2, model_name="tiny llama")


def test_calibration_predicts_and_measures(calibration):
    c = calibration
    assert c.model == "tiny llama" and c.n_layers == 4 and c.device == "cpu" and c.dtype == "float32"
    assert [r["label"] for r in c.draft_costs] == ["kept 1.00", "kept 0.50", "draft set"]
    assert [r["tokens"] for r in c.verify_costs] == [1, 2, 3] and [r["gamma"] for r in c.verify_costs] == [0, 1, 2]
    assert c.skip == SkipSet(attention=[0, 2], mlp=[0, 2]).to_dict() and "uniform" in c.skip_source
    assert c.kept == 0.5 and 0.0 <= c.alpha <= 1.0 and c.n_positions == 16
    assert [p["gamma"] for p in c.predictions] == [1, 2]
    assert c.gamma == max(c.predictions, key=lambda p: p["speedup"])["gamma"]
    assert [r["kind"] for r in c.rows] == ["plain", "self-spec"] and c.rows[1]["identical"] is True
    assert c.measured_speedup > 0 and c.error == pytest.approx(c.predicted_speedup / c.measured_speedup - 1)
    assert c.within_noise == (c.measured["speedup_min"] <= c.predicted_speedup <= c.measured["speedup_max"])
    assert 0 <= c.run["first_acceptance"] <= 1 and c.run["tokens_per_step"] >= 1


def test_budget_swaps_one_quantity_at_a_time(calibration):
    rows = calibration.budget()
    assert [r["quantity"] for r in rows] == ["tokens per step", "draft cost per step", "verify cost per step",
                                             "rest of a step", "prefill"]
    assert rows[3]["predicted"] == 0.0
    p = calibration.prediction
    assert rows[0]["predicted"] == pytest.approx(p["tokens_per_step"])
    unchanged = cal._whole({r["quantity"]: r["predicted"] for r in rows}, calibration.max_new_tokens)
    assert unchanged == pytest.approx(calibration.predicted_speedup)
    everything = cal._whole({r["quantity"]: r["measured"] for r in rows}, calibration.max_new_tokens)
    assert everything == pytest.approx(calibration.run["speedup_of_sums"], rel=0.05)   # the run, rebuilt


def test_table_frame_summary_and_json(calibration, tmp_path):
    text = calibration.table()
    assert "tiny llama" in text and "<- measured" in text and "predicted" in text
    assert list(calibration.frame().index) == [1, 2]
    summary = calibration.summary()
    assert summary["predicted_speedup"] == calibration.predicted_speedup and summary["gamma"] == calibration.gamma
    path = calibration.save(tmp_path / "c.json")
    data = json.loads(path.read_text())
    assert data["summary"]["measured_speedup"] == pytest.approx(calibration.measured_speedup)
    assert len(data["budget"]) == 5 and data["skip"] == calibration.skip


def test_calibrate_with_a_given_set_and_int8_draft_weights():
    model = tiny_model("qwen2", n_layers=4)
    c = cal.calibrate(model, ToyTokenizer(), prompts=PROMPTS[:1], kept=(0.5,), gammas=(2,), max_new_tokens=6,
                      repeats=1, cost_repeats=1, skip=SkipSet(mlp=[1, 2]), skip_source="given", draft_weights="int8")
    assert c.skip_source == "given" and c.draft_weights == "int8" and c.kept == 0.75 and c.gamma == 2
    assert c.rows[1]["identical"] is True and c.rows[1]["weights"] == "int8"


def test_calibrate_checks_its_arguments():
    model = tiny_model("llama", n_layers=2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        cal.calibrate(model, ToyTokenizer(), prompts=PROMPTS, max_new_tokens=1)
    with pytest.raises(ValueError, match="prompts"):
        cal.calibrate(model, ToyTokenizer(), prompts=[""])
    with pytest.raises(SystemExit):
        cal.main(["--widen", "wide"])


@pytest.mark.slow
def test_command_line_on_the_shipped_model(tmp_path, capsys):
    out = tmp_path / "calibration.json"
    result = cal.main(["--model", "default", "--tokens", "6", "--prompts", "1", "--repeats", "1", "--gammas", "1", "2",
                       "--kept", "1", "0.5", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "predicted" in printed and "written to" in printed
    assert json.loads(out.read_text())["summary"]["gamma"] == result.gamma
    assert result.skip_source.startswith("data/search") and result.rows[1]["identical"] is True
