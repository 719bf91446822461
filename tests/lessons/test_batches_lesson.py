"""Notebook 13's sentences turn with the reference data they are fed (pays / within the noise / loses; the
crossover; the policy within 5 % or not), read a reference file with its calibration, put live rows beside their
reference rows in lines that say "this machine", and the γ explorer redraws from precomputed predictions."""
import json

import pytest

from labkit.core.draft_config import DraftConfig
from labkit.core.skip import SkipSet
from labkit.lessons import batches as lesson
from labkit.measure.costs.batch_costs import BatchCosts
from labkit.measure.reference.loader import Spread

from tiny_models import tiny_model

BATCHES = (1, 4, 16)


def row(method: str, batch: int, speedup: float, spread: float = 0.05, ms: float = 4.0) -> dict:
    """A measured row as :func:`labkit.lessons.batches.measured_rows` gives it."""
    return {"batch": batch, "method": method, "tokens_per_s": 1e3 / ms * (speedup if method != "plain loop" else 1),
            "low": 900 / ms, "high": 1100 / ms, "latency_ms": ms * batch, "speedup": speedup,
            "speedup_low": speedup - spread, "speedup_high": speedup + spread, "acceptance": 0.6, "identical": True}


def rows(on: tuple, policy: tuple, spread: float = 0.05) -> list[dict]:
    out = []
    for b, s_on, s_pol in zip(BATCHES, on, policy):
        out += [row("plain loop", b, 1.0, 0.0, ms=4.0 / b), row("always on", b, s_on, spread, ms=4.0 / b),
                row("load policy", b, s_pol, spread, ms=4.0 / b)]
    return out


def words(text: str) -> int:
    return len(text.split())


def test_the_crossover_sentence_turns_with_the_speedups():
    text = lesson.crossover_sentence(rows((1.4, 1.0, 0.6), (1.4, 1.0, 1.0)))
    assert "pays at batch 1" in text and "within the noise at batch 4" in text and "loses at batch 16" in text
    assert "falls to 1 at batch ≈ 4.0" in text and words(text) <= 50
    text = lesson.crossover_sentence(rows((1.4, 1.3, 1.2), (1.4, 1.3, 1.2)))
    assert "pays at batch 1, 4 and 16" in text and "stays above 1 up to batch 16" in text and "loses" not in text


def test_the_prediction_sentence_puts_both_crossovers_side_by_side():
    predicted = [{"batch": b, "speedup": s, "policy_gamma": g} for b, s, g in zip(BATCHES, (1.5, 1.3, 1.1), (4, 3, 2))]
    text = lesson.prediction_sentence(rows((1.4, 1.0, 0.6), (1.4, 1.0, 0.9)), predicted)
    assert "crossover beyond batch 16" in text and "measurement at batch ≈ 4.0" in text
    assert "at batch 4: 1.30 predicted, 1.00x measured (+30 %)" in text and words(text) <= 50
    predicted[2].update(speedup=0.9, policy_gamma=0)                    # off at 16: predicted 1, as measured
    text = lesson.prediction_sentence(rows((1.4, 1.0, 0.6), (1.4, 1.3, 1.0)), predicted)
    assert "crossover at batch ≈" in text and "batch 1: 1.50 predicted, 1.40x measured" in text


def test_the_policy_sentence_names_the_batch_sizes_where_it_fell_behind():
    assert "never more than 5 %" in lesson.policy_sentence(rows((1.4, 1.0, 0.6), (1.38, 1.0, 0.97)))
    text = lesson.policy_sentence(rows((1.4, 1.0, 0.6), (1.2, 1.0, 0.9)))
    assert "batch 1 (1.20x against 1.40x)" in text and "batch 16 (0.90x against 1.00x)" in text
    assert "batch 4" not in text


def test_the_policy_table_has_a_row_per_batch_and_few_columns():
    predicted = [{"batch": b, "speedup": 1.2, "policy_gamma": g} for b, g in zip(BATCHES, (4, 2, 0))]
    table = lesson.policy_table(rows((1.4, 1.0, 0.6), (1.4, 1.0, 1.0)), predicted)
    assert [r["batch"] for r in table] == list(BATCHES) and len(table[0]) <= 8
    assert table[2]["γ cap (0: off)"] == 0 and table[0]["always on"] == "1.40x (1.35-1.45)"


def write_reference(folder, with_calibration: bool = True):
    costs = BatchCosts(list(BATCHES), [1, 2, 4], 32, [3.0, 4.0, 8.0], [0.3, 0.5, 0.9],
                       {1: [1.1, 1.3, 1.8], 2: [1.1, 1.6, 2.6], 4: [1.2, 2.2, 4.0]})
    ref_rows = []
    for r in rows((1.4, 1.0, 0.6), (1.4, 1.0, 1.0)):
        ms = 1e3 / r["tokens_per_s"]
        ref_rows.append({"method": f"{r['method']}, batch {r['batch']}", "kind": "self-spec", "source": "packages",
                         "prompts": 16, "tokens": 32, "repetitions": 5, "ms_per_token": [ms, ms * 0.9, ms * 1.1],
                         "speedup": [r["speedup"], r["speedup_low"], r["speedup_high"]], "identical": True,
                         "baseline": f"plain loop, batch {r['batch']}"})
    detail = {"calibration": {"costs": costs.to_dict(), "alpha": 0.8, "acceptance": 0.7,
                              "policy": {"batch_sizes": list(BATCHES), "max_draft": [4, 2, 0]}}}
    (folder / "13.json").write_text(json.dumps({"group": "13", "machine": {"cpu_model": "a test CPU", "threads": 1},
                                                "rows": ref_rows, "detail": detail if with_calibration else {}}))


def test_the_reference_is_read_with_its_calibration(tmp_path):
    assert lesson.load_batches(tmp_path) is None
    write_reference(tmp_path)
    ref = lesson.load_batches(tmp_path)
    assert {r["batch"] for r in ref.rows} == set(BATCHES) and len(ref.rows) == 9
    assert ref.policy.max_draft == (4, 2, 0) and ref.alpha == 0.8
    assert [p["batch"] for p in ref.predicted] == list(BATCHES)
    assert ref.rows[0]["latency_ms"] == pytest.approx(ref.rows[0]["batch"] * 1e3 / ref.rows[0]["tokens_per_s"])
    write_reference(tmp_path, with_calibration=False)
    with pytest.raises(ValueError, match="calibration"):
        lesson.load_batches(tmp_path)


def test_live_lines_say_this_machine_and_agree_only_within_the_noise(tmp_path):
    write_reference(tmp_path)
    ref = lesson.load_batches(tmp_path)
    live = [row("plain loop", 1, 1.0, 0.0), row("always on", 1, 1.42, 0.05), row("always on", 16, 1.3, 0.05),
            row("load policy", 8, 1.1)]
    lines = lesson.live_lines(live, ref)
    assert len(lines) == 3 and all("this machine" in ln for ln in lines)
    assert "agrees within the noise" in lines[0] and "gains more than the reference" in lines[1]
    assert "no reference row" in lines[2]


def test_the_live_sweep_gives_identical_rows_for_every_method_and_batch():
    model = tiny_model("llama")
    config = DraftConfig(SkipSet(mlp=[1, 2], attention=[3]), None, "static", 0.3, 4)
    prompts = [[5, 6, 7, 8], [11, 12, 13], [3, 4], [20, 21, 22, 23, 24]]
    live = lesson.live_sweep(model, config, prompts, (1, 2), tokens=4, repeats=1,
                             policy=lesson.LoadPolicy((1, 2), (2, 0)), n_prompts=2)
    assert [(r["batch"], r["method"]) for r in live] == [(b, m) for b in (1, 2) for m in lesson.METHODS]
    assert all(r["identical"] for r in live) and all(r["tokens_per_s"] > 0 for r in live)
    with pytest.raises(ValueError, match="prompts"):
        lesson.live_sweep(model, config, prompts, (8,), tokens=4, repeats=1, policy=lesson.LoadPolicy())


def test_the_gamma_explorer_redraws_from_the_predictions(tmp_path):
    write_reference(tmp_path)
    explorer = lesson.GammaExplorer(lesson.load_batches(tmp_path), gamma=4)
    at_four = list(explorer.figure.data[0].y)
    assert "γ = 4" in explorer.readout.value and explorer.last_update_ms >= 0
    explorer.slider.value = 1
    assert list(explorer.figure.data[0].y) != at_four and "γ = 1" in explorer.readout.value
    assert explorer.figure.layout.title.text == "predicted S(B, γ = 1)"


def test_verdicts_read_the_range_against_one():
    assert lesson.verdict_of(row("always on", 1, 1.2)) == "pays"
    assert lesson.verdict_of(row("always on", 1, 0.8)) == "loses"
    assert lesson.verdict_of(row("always on", 1, 1.02)) == "within the noise"
    assert Spread(1, 0.9, 1.1).overlaps(Spread(1.05, 1.0, 1.1))
