"""measure.costs.step_anatomy on tiny models: the parts of a step add up to the hooked forward, a skip set takes its
blocks (and only those) out, int8 draft weights and skips leave the model as it was, and the three read-outs
(predicted c, the int8 bound, the crossover width) follow their formulas and refuse bad input."""
import math

import pytest
import torch

from labkit.core.draft_weights import draft_weights
from labkit.core.skip import SkipSet
from labkit.measure.costs import step_anatomy as sa

from tiny_models import ARCHITECTURES, tiny_model

FAST = sa.AnatomyConfig(context=16, repeats=2)


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_parts_add_up_and_are_never_negative(arch):
    out = sa.step_anatomy(tiny_model(arch, n_layers=2), config=FAST)
    assert tuple(out["parts"]) == sa.PARTS
    assert all(v >= 0 for v in out["parts"].values())
    assert out["hooked_ms"] == pytest.approx(sum(out["parts"].values()))
    assert out["blocks"] == 4 and out["step_ms"] > 0 and out["step_ms_max"] >= out["step_ms"]
    assert 0 < out["per_block_arithmetic_ms"] <= out["per_block_ms"] or out["parts"]["framework in the blocks"] == 0


def test_a_skip_set_takes_out_its_blocks_and_leaves_the_model_as_it_was(model):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    modules = [type(m) for m in model.modules()]
    out = sa.step_anatomy(model, skip=SkipSet(attention=(1, 2), mlp=(3,)), config=FAST)
    assert out["blocks"] == 8 - 3
    assert len(out["c"]) == 3 and all(v > 0 for v in out["c"]) and out["c"][1] <= out["c"][2]   # timed beside full
    out8 = sa.step_anatomy(model, weights=draft_weights(model, "int8"), config=FAST)
    assert out8["blocks"] == 8 and out8["parts"]["matrix products"] > 0
    assert [type(m) for m in model.modules()] == modules
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_bad_input_names_the_argument(model):
    with pytest.raises(ValueError, match="context"):
        sa.AnatomyConfig(context=0)
    with pytest.raises(ValueError, match="repeats"):
        sa.AnatomyConfig(repeats=0)
    with pytest.raises(ValueError, match="weights"):
        sa.step_anatomy(model, weights="int8", config=FAST)
    with pytest.raises(ValueError, match="kept"):
        sa.predicted_c(_synthetic(), 1.5)


def _synthetic(products=1.0, framework=2.0, lm_head=0.5, rest=1.5):
    parts = dict.fromkeys(sa.PARTS, 0.0)
    parts.update({"matrix products": products, "framework in the blocks": framework, "LM head": lm_head,
                  "rest of the forward": rest})
    return {"parts": parts, "blocks": 4, "per_block_ms": (products + framework) / 4,
            "per_block_arithmetic_ms": products / 4, "hidden_size": 100}


def test_read_outs_follow_their_formulas():
    full = _synthetic()                                  # blocks 3.0 of 5.0; matrix products + LM head 1.5
    assert sa.predicted_c(full, 1.0) == pytest.approx(1.0)
    assert sa.predicted_c(full, 0.0) == pytest.approx(2.0 / 5.0)          # the floor: LM head and the rest
    assert sa.predicted_c(full, 0.5) == pytest.approx(3.5 / 5.0)
    assert sa.int8_bound(full) == pytest.approx(1 - 1.5 / 5.0)
    assert sa.crossover_width(full) == pytest.approx(100 * math.sqrt(2.0))   # framework 2 × arithmetic 1
    assert math.isnan(sa.crossover_width(_synthetic(framework=0.0)))
