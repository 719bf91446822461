"""Notebook 11's glue: which roof bounds a block, and every sentence turning with its data (bound or not, within 0.1
of the diagonal or not, cheap or not, within the target and the noise or not); the limit explorer's readout and
figure follow its controls."""
from types import SimpleNamespace

import pytest

from labkit.lessons import regime as lr
from labkit.measure.costs.roofline import Ceiling

CEILING = Ceiling(device="cpu", dtype="float32", threads=1, bandwidth_gbs=20.0, cache_gbs=100.0, gflops=80.0,
                  copy_mb=256.0, cache_copy_mb=4.0, cache_bytes=32 * 2 ** 20, matmul_n=1024)


def point(regime, tokens, ms, gbs, gflops, block="mlp", nbytes=2 * 2 ** 20, flops=10 ** 6):
    return {"regime": regime, "block": block, "tokens": tokens, "ms": ms, "gb_per_s": gbs, "gflop_per_s": gflops,
            "bytes": nbytes, "flops": flops * tokens}


def test_bound_of_uses_the_roof_that_applies():
    small = point("s", 1, 0.2, 12.0, 6.0)
    assert lr.bound_of(small, CEILING, 28 * 2 ** 20)["verdict"] == "below both roofs"     # from cache: 0.12 of it
    assert lr.bound_of(small, CEILING, 28 * 2 ** 20)["roof"] == "cache"
    assert lr.bound_of(small, CEILING, 300 * 2 ** 20)["verdict"] == "memory-bound"        # from memory: 0.6 of it
    assert lr.bound_of(point("w", 64, 9.0, 1.0, 70.0), CEILING, 300 * 2 ** 20)["verdict"] == "compute-bound"


def test_ceiling_and_regime_sentences():
    text = lr.ceiling_sentence({"fp32": CEILING})
    assert "20.0 GB/s" in text and "ridge lies at 4.0 FLOP per byte" in text and "about 8 tokens" in text
    two = lr.ceiling_sentence({"fp32": CEILING, "bf16": CEILING})         # one list item per precision
    assert two.count("\n* in ") == 2 and all(len(line.split()) <= 50 for line in two.splitlines())
    pts = [point("wide", 1, 2.0, 16.0, 8.0), point("wide", 64, 8.0, 1.0, 60.0)]
    text = lr.regime_sentence("wide", pts, CEILING, 300 * 2 ** 20)
    assert "memory-bound" in text and "4.0× as long for 64× the FLOPs" in text and "compute-bound" in text
    assert "no MLP block" in lr.regime_sentence("other", pts, CEILING, 1)


def curve(values, kept=(1.0, 0.75, 0.5, 0.25), spread=0.05):
    return [{"label": f"kept {k:.2f}", "kept": k, "c": c, "c_min": c - spread, "c_max": c + spread}
            for k, c in zip(kept, values)]


def test_draft_cost_sentence_turns_with_the_diagonal():
    near = lr.draft_cost_sentence({"wide": curve([1.0, 0.77, 0.53, 0.3])})
    assert "within 0.1 of it everywhere" in near and "+0.05 at 0.25" in near
    far = lr.draft_cost_sentence({"shipped": curve([1.0, 0.85, 0.72, 0.4], spread=0.01)})
    assert "above it by more than 0.1" in far and "+0.22 at 0.50" in far
    assert "diagonal lies inside" not in far
    both = lr.draft_cost_sentence({"wide": curve([1.0, 0.77, 0.53, 0.3]), "shipped": curve([1.0, 0.85, 0.72, 0.4])})
    assert both.startswith("* wide: ") and "\n* shipped: " in both          # one list item per model
    assert lr.fixed_share(curve([1.0, 0.75, 0.5, 0.25])) == pytest.approx(0.0, abs=1e-12)
    assert lr.fixed_share(curve([1.0, 0.8, 0.6, 0.4])) == pytest.approx(0.2)


def test_verify_and_kernel_sentences():
    rows = [{"tokens": t, "c_v": v, "c_v_min": v, "c_v_max": v} for t, v in ((1, 1.0), (2, 1.05), (8, 1.4), (64, 4.0))]
    assert "up to 8 tokens" in lr.verify_cost_sentence({"m": rows})
    dear = [dict(r, c_v=r["c_v"] * 1.8) for r in rows]
    assert "above 1.5 plain steps from 2 tokens on" in lr.verify_cost_sentence({"m": dear})
    pts = [point("a", 1, 2.0, 16.0, 8.0), point("a", 2, 4.0, 8.0, 8.0)]
    assert "×2.00" in lr.kernel_sentence(pts, ["a"]) and "No model" in lr.kernel_sentence(pts[:1], ["a"])


def test_paper_and_limit_sentences():
    text = lr.paper_sentence(curve([1.0, 0.76, 0.51, 0.27]), "wide")
    assert "c = 0.453" in text and "0.510 with 0.500" in text and "+0.010" in text
    verify = [{"tokens": 1, "c_v": 1.0}, {"tokens": 9, "c_v": 1.0}]
    text = lr.limit_sentence({"wide": (curve([1.0, 0.75, 0.5, 0.25]), verify)}, 0.5, 0.8)
    assert text.count("1.22×") == 2                                   # on the diagonal the regime is the ideal


def calibration(predicted, measured, lo, hi):
    budget = [{"quantity": "tokens per step", "predicted": 2.5, "measured": 2.2, "speedup_if": predicted * 0.9},
              {"quantity": "draft cost per step", "predicted": 1.0, "measured": 1.1, "speedup_if": predicted * 0.97},
              {"quantity": "prefill", "predicted": 3.0, "measured": 3.0, "speedup_if": predicted}]
    return SimpleNamespace(predicted_speedup=predicted, measured_speedup=measured, gamma=2, alpha=0.8, c=0.4,
                           repeats=3, error=predicted / measured - 1,
                           measured={"speedup_min": lo, "speedup_max": hi}, within_noise=lo <= predicted <= hi,
                           budget=lambda: budget, run={"first_acceptance": 0.85, "later_acceptance": 0.7})


def test_calibration_sentence_turns_with_target_and_noise():
    good = lr.calibration_sentence("m", calibration(1.25, 1.2, 1.1, 1.3))
    assert "4% above" in good and "within 10%" in good and "within the noise" in good
    bad = lr.calibration_sentence("m", calibration(1.25, 1.0, 0.98, 1.02))
    assert "25% above" in bad and "outside 10%" in bad and "outside the measured range" in bad
    assert "below" in lr.calibration_sentence("m", calibration(0.9, 1.0, 0.95, 1.05))


def test_budget_sentence_names_the_largest_move_first():
    text = lr.budget_sentence("m", calibration(1.25, 1.0, 0.98, 1.02))
    assert text.index("tokens per step") < text.index("draft cost per step")
    assert "accepted 0.85 of the time" in text and "0.70" in text
    one = calibration(1.25, 1.0, 0.98, 1.02)
    one.run = {"first_acceptance": 0.85, "later_acceptance": float("nan")}
    assert "no later one" in lr.budget_sentence("m", one) and "nan" not in lr.budget_sentence("m", one)


def test_limit_explorer_follows_its_controls():
    verify = [{"tokens": 1, "c_v": 1.0}, {"tokens": 9, "c_v": 2.0}]
    cheap = [{"tokens": 1, "c_v": 1.0}, {"tokens": 9, "c_v": 1.0}]
    ex = lr.LimitExplorer({"dear": (curve([1.0, 0.8, 0.6, 0.4]), verify),
                           "cheap": (curve([1.0, 0.75, 0.5, 0.25]), cheap)})
    assert len(ex.figure.data) == 6 and list(ex.figure.data[0].x) == list(range(1, 9))
    before = list(ex.figure.data[0].y)
    ex.slider.value = 0.95
    assert list(ex.figure.data[0].y) != before and "α = 0.95" in ex.readout.value
    ex.choice.value = "cheap"
    assert "cheap" in ex.figure.layout.title.text and "<b>cheap</b>" in ex.readout.value
    assert ex.last_update_ms >= 0
    assert list(ex.figure.data[1].y) == list(ex.figure.data[4].y)    # measured = ideal where c = kept, c_v = 1


def anatomy(products, framework, lm_head=0.2, rest=0.6, blocks=16, step=None, hidden=256):
    parts = dict.fromkeys(lr.PARTS, 0.0)
    parts.update({"matrix products": products, "framework in the blocks": framework, "LM head": lm_head,
                  "rest of the forward": rest})
    total = sum(parts.values())
    return {"parts": parts, "hooked_ms": total, "step_ms": step or total, "blocks": blocks,
            "per_block_ms": (products + framework) / blocks, "per_block_arithmetic_ms": products / blocks,
            "hidden_size": hidden}


def test_anatomy_sentences_turn_with_the_share_and_always_say_this_machine():
    full, draft, int8 = anatomy(0.6, 2.0), anatomy(0.3, 1.0, blocks=8), anatomy(0.2, 1.0, blocks=8)
    draft["c"], int8["c"] = (0.61, 0.58, 0.66), (0.55, 0.5, 0.6)
    lines = lr.anatomy_sentences(full, draft, int8)
    assert len(lines) == 4 and all("this machine" in s and len(s.split()) <= 50 for s in lines)
    assert "bound by its calls" in lines[0] and f"({full['hooked_ms']:.2f} with the timing hooks" in lines[0]
    assert "c ≈ 0.62 is predicted; measured 0.61 (0.58–0.66)" in lines[1]      # (3.4 − 2.6 + 0.5 × 2.6) / 3.4
    assert "c measured 0.61 (0.58–0.66) in fp32, 0.55 (0.50–0.60) in int8" in lines[2]
    heavy = anatomy(3.0, 0.5)
    assert "bound by its arithmetic" in lr.anatomy_sentences(heavy, draft)[0]
    assert len(lr.anatomy_sentences(full, draft)) == 3              # no int8 line without an int8 breakdown
    rows = lr.anatomy_table({"full": full, "draft": draft})
    assert [r["part"] for r in rows][:-1] == list(lr.PARTS) and rows[-1]["full"] == pytest.approx(full["hooked_ms"])


def test_operating_point_rows_never_guess_and_the_sentence_turns():
    rows = lr.operating_point_rows({"c": 0.6, "blocks kept": 0.5}, "lab")
    by = {r["quantity"]: r for r in rows}
    assert by["c_v"]["Draft & Verify (Zhang et al. 2023)"] == "not in the lab's notes"
    assert by["c"]["lab"] == "0.60" and by["speedup"]["lab"] == "awaits the reference run"
    dear = lr.operating_point_sentence({"c": 0.6, "blocks kept": 0.5})      # 1.20× the fraction kept
    assert "per-call floor" in dear and len(dear.split()) <= 50
    assert "no more than the paper pays" in lr.operating_point_sentence({"c": 0.3, "blocks kept": 0.5})
    assert "waits for its reference run" in lr.operating_point_sentence({"c": None, "blocks kept": 0.5})
