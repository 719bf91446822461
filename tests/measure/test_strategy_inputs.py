"""What skip_strategy measures for a knapsack (block importance, the cost model) is measured once per weights and
CPU and read back afterwards: a second strategy costs no measurement."""
import pytest
import torch

from labkit import SkipSet
from labkit.measure import strategy_inputs as strategies

from tiny_models import ToyTokenizer, tiny_model


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(strategies, "IMPORTANCE_DIR", tmp_path)
    monkeypatch.setattr(strategies, "RESULTS_DIR", tmp_path / "results")       # no user cost model file here
    return tmp_path


def test_block_importance_is_measured_once_per_weights(cache_dir, monkeypatch):
    model = tiny_model("llama", n_layers=2, seed=0)
    kwargs = dict(anchor=SkipSet(mlp=[1]), n_prompts=1, n_tokens=4, progress=False)
    first = strategies.block_importance(model, ToyTokenizer(), **kwargs)
    assert len(list(cache_dir.glob("importance-*.json"))) == 1
    monkeypatch.setattr(strategies, "_measure_importance", lambda *a, **k: pytest.fail("measured again"))
    again = strategies.block_importance(model, ToyTokenizer(), **kwargs)
    assert again == first and again["anchor"] == SkipSet(mlp=[1])
    with torch.no_grad():                                             # other weights: another key, measured anew
        next(model.parameters()).add_(1.0)
    with pytest.raises(pytest.fail.Exception, match="measured again"):
        strategies.block_importance(model, ToyTokenizer(), **kwargs)


def test_strategy_cost_model_is_kept_for_these_weights(cache_dir, monkeypatch):
    model = tiny_model("llama", n_layers=2, seed=0)
    first = strategies.strategy_cost_model(model, model_name="tiny")
    assert len(list(cache_dir.glob("costmodel-*.json"))) == 1
    monkeypatch.setattr(strategies, "measure_cost_model", lambda *a, **k: pytest.fail("measured again"))
    assert strategies.strategy_cost_model(model, model_name="tiny").to_dict() == first.to_dict()
