"""A toy cost model and greedy-elimination paths of two tiny random Llamas, shared by the tests of the
measurement (tests/measure/costs/, tests/measure/comparisons/) and of its figures
(tests/viz/test_costs.py, tests/viz/test_agreement.py)."""
import pytest

from labkit.measure.agreement import AgreementProbe
from labkit.measure.comparisons.robustness import greedy_elimination
from labkit.measure.costs.costmodel import CostModel

from tiny_models import ToyTokenizer, tiny_model


def toy_cost_model(n_layers=4) -> CostModel:
    return CostModel(
        n_layers=n_layers, fixed_ms=1.0, attention_ms=[0.5] * n_layers, mlp_ms=[0.75] * n_layers,
        layer_ms=[0.25] * n_layers, verify_ms=[7.0 + 0.5 * k for k in range(5)], full_step_ms=7.0, model="toy",
        context=32, fit={"r2": 0.9, "n_sets": 10, "verify_raw_ms": [6.8 + 0.5 * k for k in range(5)]},
        machine={"torch_threads": 1},
    )


def hand_cost_model() -> CostModel:
    """2 layers: fixed 1 + attention 1+1 + MLP 2+2 + layer overhead 0.5+0.5 = 8 ms for a full step."""
    return CostModel(n_layers=2, fixed_ms=1.0, attention_ms=[1.0, 1.0], mlp_ms=[2.0, 2.0], layer_ms=[0.5, 0.5],
                     verify_ms=[8.0 + 0.1 * k for k in range(13)], full_step_ms=8.0)


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("llama", n_layers=4, vocab_size=97, seed=0)


@pytest.fixture(scope="module")
def paths(tiny):
    other = tiny_model("llama", n_layers=4, vocab_size=97, seed=1)
    texts = ["def f(x):", "a longer prompt"]
    out = {}
    for name, model in (("a", tiny), ("b", other)):
        probe = AgreementProbe.from_prompts(model, ToyTokenizer(), texts, n_tokens=8)
        out[name] = greedy_elimination(probe, 4, progress=False)
    return out
