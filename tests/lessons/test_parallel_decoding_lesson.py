"""Notebook 06's glue: the comparison sentences follow the numbers (reversed data, reversed claim) and every
control of the iteration stepper moves its figure."""
import pandas as pd
import torch

from labkit import jacobi_generate
from labkit.lessons import parallel_decoding as lesson

from tiny_models import ToyTokenizer, tiny_model


def frame(vanilla_fpt: float, gs_fpt: float, spec_fpt: float, speedups):
    rows = {"plain loop": 1.0, "jacobi, pad": vanilla_fpt, "gauss-seidel, self-draft": gs_fpt,
            "self-speculative": spec_fpt}
    return pd.DataFrame({"forwards_per_token": list(rows.values()),
                         "tokens_per_forward": [1 / v for v in rows.values()], "speedup": speedups},
                        index=pd.Index(list(rows), name="method"))


def test_forwards_sentence_follows_the_numbers():
    text = lesson.forwards_sentence(frame(0.97, 0.78, 0.52, [1, 0.8, 0.9, 1.3]))
    assert "needed 0.970 forwards" in text and "barely more than plain decoding's one" in text
    assert "gauss-seidel, self-draft, needed 0.780 (fewer than vanilla Jacobi)" in text
    assert "Self-speculative decoding needed 0.520, fewer than every parallel variant" in text
    text = lesson.forwards_sentence(frame(0.5, 0.9, 0.95, [1, 1.5, 0.9, 0.8]))
    assert "clearly more than plain decoding's one" in text and "(no fewer than vanilla Jacobi)" in text
    assert "not fewer than the best parallel variant" in text
    assert "no better than plain decoding's one" in lesson.forwards_sentence(frame(1.0, 0.9, 0.5, [1] * 4))


def with_spread(f, half: float):
    return f.assign(speedup_min=f["speedup"] - half, speedup_max=f["speedup"] + half)


def test_speed_sentence_follows_the_numbers():
    text = lesson.speed_sentence(with_spread(frame(0.97, 0.78, 0.52, [1.0, 0.8, 0.9, 1.3]), 0.02))
    assert "faster than the plain loop: self-speculative (1.30×, 1.28–1.32)" in text
    assert "slower than the plain loop: gauss-seidel, self-draft (0.90×, 0.88–0.92), jacobi, pad (0.80×" in text
    assert "within the noise" not in text and "min–max over the interleaved repetitions" in text
    text = lesson.speed_sentence(with_spread(frame(0.97, 0.78, 0.52, [1.0, 1.2, 1.1, 0.7]), 0.02))
    assert "faster than the plain loop: jacobi, pad (1.20×, 1.18–1.22), gauss-seidel, self-draft (1.10×" in text
    assert "slower than the plain loop: self-speculative (0.70×" in text
    noisy = lesson.speed_sentence(with_spread(frame(0.97, 0.78, 0.52, [1.0, 1.05, 0.97, 1.3]), 0.1))
    assert "within the noise of the plain loop: jacobi, pad (1.05×, 0.95–1.15), gauss-seidel, self-draft" in noisy
    assert "faster than the plain loop: self-speculative" in noisy
    once = with_spread(frame(0.97, 0.78, 0.52, [1.0, 1.2, 1.1, 0.7]), 0.0)            # one repetition: no spread
    assert "one run, so no spread" in lesson.speed_sentence(once)


def test_why_sentence_follows_the_numbers():
    many = lesson.why_sentence({"one_token_share": 0.97, "guess_right_rate": 0.004, "iterations": 90, "max_fixed": 3})
    assert "97% of the 90 iterations" in many and "0.4% of the time" in many and "nearly every iteration" in many
    few = lesson.why_sentence({"one_token_share": 0.4, "guess_right_rate": 0.5, "iterations": 20, "max_fixed": 8})
    assert "40% of the 20" in few and "many iterations fixed more than the one token" in few


def test_every_control_of_the_stepper_moves_its_figure():
    model = tiny_model("llama", n_layers=2, vocab_size=97)
    ids = torch.tensor([[1, 2, 3, 4]])
    runs = {f"{m}, {i}": jacobi_generate(model, ids, 16, block_size=5, method=m, init=i)
            for m in ("jacobi", "gauss-seidel") for i in ("pad", "repeat")}
    stepper = lesson.IterationStepper(runs, ToyTokenizer())

    def snapshot():
        return [list(r) for r in stepper.figure.data[0].z], stepper.figure.layout.title.text
    for move in (stepper.next_button.click, lambda: setattr(stepper.slider, "value", 5), stepper.prev_button.click,
                 lambda: setattr(stepper.run, "value", "gauss-seidel, repeat")):
        before = snapshot()
        move()
        assert snapshot() != before
    assert stepper.slider.max == min(len(runs["gauss-seidel, repeat"].trace.iterations), 24)
    stepper.slider.value = 2                                 # the slider shows the iteration the title names
    assert "after iteration 2 of" in stepper.figure.layout.title.text and "iteration 2:" in stepper.readout.value


def test_reference_label_names_the_rows_group_06_measured():
    label = lesson.reference_label(4)
    assert label("jacobi, pad") == "jacobi, pad (block 4)" and label("gauss-seidel, self-draft") == (
        "gauss-seidel, self-draft (block 4)")
    assert label("self-speculative") == "shipped configuration"
    assert label("prompt lookup") is None and label("plain loop") is None


def test_live_rows_meet_the_committed_group_06_through_reference_label():
    from labkit.lessons.reference_claims import live_beside_reference
    from labkit.measure.reference.loader import Spread, load_reference

    ref = load_reference("06")
    shipped = ref.row("shipped configuration", "stdlib", "06").speedup
    live = {"self-speculative": shipped, "prompt lookup": Spread(2.0, 1.9, 2.1),
            "jacobi, pad": Spread(1.5, 1.4, 1.6)}
    lines = live_beside_reference(live, ref, "06", "stdlib", lesson.reference_label(4))
    assert len(lines) == 2 and all("this machine" in line for line in lines)
    assert "agrees within the noise" in lines[0] and "gains more than the reference" in lines[1]
