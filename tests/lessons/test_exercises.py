"""Exercise checks: the reference solutions are 'correct', placeholders and typical mistakes 'not yet'; and
docs/solutions.md shows the code the notebooks run under SOLUTIONS = True."""
import inspect

import torch

from labkit import SkipSet
from labkit.artifacts.paths import REPO
from labkit.lessons import exercises as ex
from labkit.lessons import solutions
from labkit.search.toy import expected_improvement

from grid_fixtures import HUMP, S, make_grid
from tiny_models import tiny_model


def verdict_of(capsys, fn, *args, **kw):
    ok = fn(*args, **kw)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("correct: " if ok else "not yet: "), line
    return ok, line


def test_expected_improvement_check(capsys):
    assert verdict_of(capsys, ex.check_expected_improvement, solutions.expected_improvement)[0]
    assert not verdict_of(capsys, ex.check_expected_improvement, None)[0]
    assert not verdict_of(capsys, ex.check_expected_improvement, lambda mu, sigma, best, xi: None)[0]
    no_xi = lambda mu, sigma, best, xi: expected_improvement(mu, sigma, best, 0.0)          # noqa: E731
    assert not verdict_of(capsys, ex.check_expected_improvement, no_xi)[0]
    naive = lambda mu, sigma, best, xi: (best - mu - xi) * 0.5                               # noqa: E731
    assert not verdict_of(capsys, ex.check_expected_improvement, naive)[0]
    ok, line = verdict_of(capsys, ex.check_expected_improvement, lambda *a: 1 / 0)
    assert not ok and "ZeroDivisionError" in line


def test_f_prediction_check(capsys):
    args = (0.8, 3, 2.5, 6.0)
    truth = solutions.f_prediction(*args)
    assert truth == ex.f_of_mask(*args)
    assert verdict_of(capsys, ex.check_f_prediction, truth, *args)[0]
    assert not verdict_of(capsys, ex.check_f_prediction, None, *args)[0]
    ok, line = verdict_of(capsys, ex.check_f_prediction, (3 * 2.5 + 6.0) / 4, *args)    # divided by γ + 1
    assert not ok and "γ + 1" in line


def test_greedy_verification_check(capsys):
    assert verdict_of(capsys, ex.check_greedy_verification, solutions.verify_greedy)[0]
    assert not verdict_of(capsys, ex.check_greedy_verification, None)[0]
    accept_all = lambda logits, drafted: (len(drafted), int(logits[-1].argmax()))          # noqa: E731
    assert not verdict_of(capsys, ex.check_greedy_verification, accept_all)[0]
    model = tiny_model("llama", n_layers=2, seed=0)
    ids = torch.tensor([[1, 5, 9, 3]])
    ok, line = verdict_of(capsys, ex.check_greedy_verification, solutions.verify_greedy, model=model, input_ids=ids,
                          skip=SkipSet(attention=[1]), max_new_tokens=12)
    assert ok and "token for token" in line
    # right on the random cases, wrong on real drafts: a rejected token replaced by the draft's own is caught
    keeps_draft = lambda logits, drafted: ex.verify_greedy(logits, drafted) if len(drafted) < 4 else (   # noqa: E731
        len(drafted), int(logits[-1].argmax()))
    assert not verdict_of(capsys, ex.check_greedy_verification, keeps_draft, model=model, input_ids=ids,
                          skip=SkipSet(attention=[1], mlp=[0, 1]), max_new_tokens=12)[0]


def test_peak_prediction_check(capsys):
    grid = make_grid(HUMP)
    assert verdict_of(capsys, ex.check_peak_prediction, solutions.peak_ratio(grid, S), grid, S)[0]
    assert verdict_of(capsys, ex.check_peak_prediction, 0.45, grid, S)[0]                 # nearest grid ratio 0.5
    ok, line = verdict_of(capsys, ex.check_peak_prediction, 0.9, grid, S)
    assert not ok and "above the peak" in line
    assert not verdict_of(capsys, ex.check_peak_prediction, None, grid, S)[0]
    assert verdict_of(capsys, ex.check_peak_prediction, 0.9, make_grid(HUMP, noise=0.2), S)[0]   # within the noise


def test_break_even_check(capsys):
    args = (0.57, 1.2, 4)
    truth = ex.break_even_alpha(*args)
    assert abs(solutions.break_even(*args) - truth) < 1e-9
    assert abs(ex.expected_tokens_per_step(truth, 4) - (4 * 0.57 + 1.2)) < 1e-6          # E(α, γ) = γ·c + c_v
    assert verdict_of(capsys, ex.check_break_even, solutions.break_even(*args), *args)[0]
    assert verdict_of(capsys, ex.check_break_even, truth + 0.008, *args)[0]                # within the tolerance
    ok, line = verdict_of(capsys, ex.check_break_even, 0.5, *args)
    assert not ok and "too low" in line
    ok, line = verdict_of(capsys, ex.check_break_even, 0.95, *args)
    assert not ok and "too high" in line
    assert not verdict_of(capsys, ex.check_break_even, None, *args)[0]
    ok, line = verdict_of(capsys, ex.check_break_even, 0.9, 0.9, 1.5, 4)                   # γ·c + c_v ≥ γ + 1
    assert not ok and "no α pays" in line and ex.break_even_alpha(0.9, 1.5, 4) != ex.break_even_alpha(0.9, 1.5, 4)
    assert ex.break_even_alpha(0.0, 0.9, 4) == 0.0                                          # free drafts always pay


def test_docs_show_the_solutions_the_notebooks_run():
    text = (REPO / "docs" / "solutions.md").read_text()
    for fn in (solutions.expected_improvement, solutions.f_prediction, solutions.verify_greedy, solutions.peak_ratio,
               solutions.break_even):
        assert inspect.getsource(fn) in text, f"docs/solutions.md lacks the current {fn.__name__}"
