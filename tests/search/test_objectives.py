"""labkit.search.objectives: the priced objective (real decoding priced by cost models: deterministic, every
step priced) and every objective on a bf16 model within a time budget."""
import pytest
import torch

from labkit import DraftConfig, SkipSet
from labkit.measure.costs.costmodel import CostModel
from labkit.search import SearchConfig, run_search
from labkit.search.objectives import PricedObjective, _decode_all
from labkit.search.storage import recorded_precision

from tiny_models import tiny_model
from tiny_search import CM, tiny  # noqa: F401 (fixtures)

# the int8 draft weights' cost model of the 4-layer tiny model: cheaper blocks, the same verifies
CM8 = CostModel(n_layers=4, fixed_ms=0.2, attention_ms=[0.05] * 4, mlp_ms=[0.04] * 4, layer_ms=[0.05] * 4,
                verify_ms=CM.verify_ms, full_step_ms=1.22, draft_weights="int8")

SETTINGS = {"modelled": {"n_prompts": 1, "n_tokens": 4}, "measured": {"n_prompts": 1, "max_new_tokens": 6},
            "priced": {"n_prompts": 1, "max_new_tokens": 6, "sources": ["stdlib"]}}


def test_priced_objective_is_deterministic_and_prices_every_step():
    model = tiny_model("llama", n_layers=4, seed=1)

    def tok(text, **_):
        return {"input_ids": torch.tensor([[1 + ord(c) % 90 for c in text]])}

    objective = PricedObjective(model, tok, ["def f(x):\n    return x", "class A:\n    pass"], {None: CM, "int8": CM8},
                                max_new_tokens=10)
    assert objective.baseline_ms >= CM.full_step_ms and set(objective.overhead) == {None, "int8"}
    config = DraftConfig(SkipSet(attention=[1, 3]), "int8", "static", 0.3, 4)
    first, second = objective.evaluate(config), objective.evaluate(config)
    assert first == second                                                # greedy tokens, fixed prices: no noise
    assert first["speedup"] == pytest.approx(objective.baseline_ms / first["value"])
    # the price by hand: every step's k drafts at the int8 model's cost of the set, its verify of k + 1 tokens, the
    # loop's calibrated per-token and per-step work
    traces = _decode_all(model, objective.inputs, config, None, 10)
    o = objective.overhead["int8"]
    by_hand = sum(s.n_drafted * (CM8.draft_ms(config.skip) + o["draft_ms"]) + CM.verify_ms[s.n_drafted] + o["step_ms"]
                  for t in traces for s in t.steps) / sum(t.n_emitted for t in traces)
    assert first["value"] == pytest.approx(by_hand)
    assert CM8.draft_ms(config.skip) < CM.draft_ms(config.skip)
    with pytest.raises(TypeError, match="DraftConfig"):
        objective.evaluate(SkipSet())


@pytest.mark.parametrize("objective", ["modelled", "measured", "priced"])
def test_every_objective_searches_a_bf16_model_within_a_time_budget(tiny, objective):
    config = SearchConfig(objective=objective, sampler="random", **SETTINGS[objective])
    res = run_search(tiny, config, trials=10 ** 6, timeout=1.0, storage=":memory:", progress=False, dtype="bf16")
    assert 1 <= res.n_new < 10 ** 6                                               # the time budget stopped it
    assert res.best_value > 0 and res.baseline_ms > 0
    assert recorded_precision(res.study.user_attrs) == {"dtype": "bf16", "device": "cpu"}
    assert res.extra["study_name"] == f"tiny4-{objective}-bf16"
