"""labkit.measure.costs.costmodel: draft costs from blocks and layer overheads, the block-cost fit, JSON, and a cost
model measured on a tiny random model (the formulas that read it: tests/measure/costs/test_analytic.py)."""
import math

import pytest

from labkit import SkipSet
from labkit.measure.costs.costmodel import CostModel, measure_cost_model, tied_cost_model
from labkit.viz import costs as costv

from tiny_models import tiny_model
from tiny_probes import hand_cost_model, toy_cost_model


# -- the cost model ----------------------------------------------------------------------------
def test_draft_cost_adds_blocks_and_layer_overhead():
    cm = hand_cost_model()
    assert cm.draft_ms(SkipSet()) == 8.0
    assert cm.draft_ms(SkipSet(attention=[0])) == 7.0                    # the layer still runs its MLP
    assert cm.draft_ms(SkipSet(attention=[0], mlp=[0])) == 4.5           # whole layer gone: overhead saved too
    assert cm.draft_ms(SkipSet.all(2)) == 1.0
    assert cm.draft_cost_ratio(SkipSet(attention=[0], mlp=[0])) == pytest.approx(4.5 / 8)
    with pytest.raises(ValueError):
        cm.draft_ms(SkipSet(attention=[2]))
    with pytest.raises(ValueError):
        CostModel(n_layers=2, fixed_ms=1, attention_ms=[1], mlp_ms=[1, 1], verify_ms=[1], full_step_ms=1)


def _synthetic(costs_att, costs_mlp, costs_layer, fixed, noise, seed):
    import random

    from labkit.measure.costs.costmodel import random_skip_sets

    L = len(costs_att)
    rng = random.Random(seed)
    X, y = [], []
    for skip in random_skip_sets(L, 4 * L + 8, rng):
        mask = skip.to_mask(L)
        ka, km = [0.0 if m else 1.0 for m in mask[:L]], [0.0 if m else 1.0 for m in mask[L:]]
        kl = [max(a, m) for a, m in zip(ka, km)]
        X.append([1.0] + ka + km + kl)
        y.append(fixed + sum(c * k for c, k in zip(costs_att + costs_mlp + costs_layer, ka + km + kl))
                 + rng.gauss(0, noise))
    return X, y


def test_block_cost_fit_pools_noise_but_keeps_real_differences():
    from labkit.measure.costs.costmodel import fit_block_costs

    L = 6
    # real per-layer differences (e.g. local vs global attention), no noise: partial pooling keeps them
    att = [0.2, 0.8] * 3
    X, y = _synthetic(att, [0.5] * L, [0.1] * L, 1.0, 0.0, seed=0)
    coef, info = fit_block_costs(X, y, L, "partial")
    assert coef[1: L + 1] == pytest.approx(att, abs=1e-3) and coef[0] == pytest.approx(1.0, abs=1e-3)
    full, _ = fit_block_costs(X, y, L, "full")
    assert max(full[1: L + 1]) - min(full[1: L + 1]) < 1e-3               # one cost per block type
    # identical layers under heavy noise: pooling beats the unpooled fit at recovering them
    errors = {"partial": 0.0, "none": 0.0}
    for seed in range(5):
        X, y = _synthetic([0.3] * L, [0.5] * L, [0.1] * L, 1.0, 0.4, seed=seed)
        for pooling in errors:
            coef, _ = fit_block_costs(X, y, L, pooling)
            errors[pooling] += sum((c - t) ** 2 for c, t in zip(coef[1:], [0.3] * L + [0.5] * L + [0.1] * L))
    assert errors["partial"] < errors["none"]
    with pytest.raises(ValueError):
        fit_block_costs(X, y, L, "some")


def test_json_roundtrip(tmp_path):
    cm = hand_cost_model()
    path = cm.save(tmp_path / "cm" / "tiny.json")
    again = CostModel.load(path)
    assert again == cm and again.draft_ms(SkipSet(mlp=[1])) == cm.draft_ms(SkipSet(mlp=[1]))
    with pytest.raises(FileNotFoundError, match="python -m labkit.costmodel"):
        CostModel.load(tmp_path / "missing.json")


def test_measure_on_a_tiny_model():
    model = tiny_model("llama", n_layers=3, vocab_size=97)
    cm = measure_cost_model(model, context=32, repeats=3, warmup=1, max_draft=6, model_name="tiny")
    assert cm.n_layers == 3 and len(cm.attention_ms) == len(cm.mlp_ms) == len(cm.layer_ms) == 3
    assert len(cm.verify_ms) == 7 and cm.max_draft == 6
    assert cm.full_step_ms > 0 and cm.fixed_ms >= 0
    assert min(cm.attention_ms + cm.mlp_ms + cm.layer_ms) >= 0
    assert cm.draft_ms(SkipSet()) == pytest.approx(cm.full_step_ms)       # scaled to the directly timed step
    assert cm.draft_ms(SkipSet.all(3)) < cm.full_step_ms
    assert all(b >= a for a, b in zip(cm.verify_ms, cm.verify_ms[1:]))    # more tokens never cheaper
    assert cm.verify_ms[0] >= cm.full_step_ms
    assert cm.fit["n_sets"] == 4 * 3 + 8 + 2 and not math.isnan(cm.fit["r2"])
    assert CostModel.from_json(cm.to_json()) == cm


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


def test_cost_model_with_int8_draft_weights():
    model = tiny_model("llama", n_layers=2, seed=0)
    cm = measure_cost_model(model, context=16, n_sets=6, repeats=1, warmup=0, max_draft=3, draft_weights="int8")
    assert cm.draft_weights == "int8" and cm.full_step_ms > 0 and len(cm.verify_ms) == 4
    assert CostModel.from_dict(cm.to_dict()).draft_weights == "int8"
