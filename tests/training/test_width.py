"""Fitting width predictors: seeded windows of the right split, a reproducible fit, a full-rank fit that recalls
every neuron that matters, recall beating the static ranking, the cache."""
import pytest
import torch

from labkit.core.width import WidthPredictors
from labkit.training.width import WidthFitConfig, fit_predictors, load_or_fit, recall, sample_windows

from tiny_models import ToyTokenizer, tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=2)


def test_windows_are_seeded_and_of_the_asked_shape():
    a = sample_windows(ToyTokenizer(), "train", 6, 40, seed=3)
    assert a.shape == (6, 40)
    assert torch.equal(a, sample_windows(ToyTokenizer(), "train", 6, 40, seed=3))
    assert not torch.equal(a, sample_windows(ToyTokenizer(), "validation", 6, 40, seed=3))


def test_a_full_rank_fit_recalls_everything_and_a_low_rank_one_beats_the_static_ranking(model):
    windows = sample_windows(ToyTokenizer(), "train", 8, 32, seed=0)
    held = sample_windows(ToyTokenizer(), "validation", 4, 32, seed=1)
    full = fit_predictors(model, windows, WidthFitConfig(rank=model.config.hidden_size, ridge=1e-6))
    assert all(row["predictor"] > 0.99 for row in recall(model, full, held, 0.25))
    low = fit_predictors(model, windows, WidthFitConfig(rank=8))
    rows = recall(model, low, held, 0.25)
    assert sum(r["predictor"] for r in rows) > sum(r["static"] for r in rows)
    again = fit_predictors(model, windows, WidthFitConfig(rank=8))
    assert all(torch.equal(x, y) for x, y in zip(low.a + low.b, again.a + again.b))


def test_load_or_fit_caches_and_refits_for_another_config(model, tmp_path):
    cfg = WidthFitConfig(rank=4, windows=3, window_tokens=16)
    first = load_or_fit(model, ToyTokenizer(), tmp_path / "p.pt", cfg)
    assert (tmp_path / "p.pt").exists()
    cached = load_or_fit(model, ToyTokenizer(), tmp_path / "p.pt", cfg)
    assert all(torch.equal(x, y) for x, y in zip(first.a, cached.a))
    other = load_or_fit(model, ToyTokenizer(), tmp_path / "p.pt", WidthFitConfig(rank=2, windows=3, window_tokens=16))
    assert other.a[0].shape[1] == 4 and isinstance(other, WidthPredictors)


def test_fitting_shows_a_progress_bar_unless_asked_not_to(model, tmp_path, capsys):
    """Notebook 12 fits without one: a finished bar is a closed widget the browser layer cannot read back."""
    cfg = WidthFitConfig(rank=4, windows=3, window_tokens=16)
    load_or_fit(model, ToyTokenizer(), tmp_path / "quiet.pt", cfg, progress=False)
    assert "MLP inputs" not in capsys.readouterr().err
    load_or_fit(model, ToyTokenizer(), tmp_path / "shown.pt", cfg)
    assert "MLP inputs" in capsys.readouterr().err


def test_clear_errors():
    with pytest.raises(ValueError, match="rank"):
        WidthFitConfig(rank=0)
    with pytest.raises(ValueError, match="no window"):
        sample_windows(ToyTokenizer(), "validation", 2, 10_000_000)
