"""labkit.measure.comparisons.cascades on a tiny model: the aggressive level adds blocks to the shipped set, every
cascade stays token-identical to the plain loop, and level_parts sums StepRecord.levels per step."""
import math
from types import SimpleNamespace

import pytest
import torch

from labkit.core.draft_config import DraftConfig
from labkit.core.skip import SkipSet
from labkit.measure.comparisons import cascades as mc

from tiny_models import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4)


def test_aggressive_level_adds_two_layers_int8():
    config = DraftConfig(SkipSet(attention=(1,), mlp=(1, 2)))
    cheap = mc.aggressive_level(config, 4)
    assert set(cheap.skip.attention) == {0, 1, 2} and set(cheap.skip.mlp) == {0, 1, 2}
    assert cheap.draft_weights == "int8"


def test_compare_cascades_is_lossless_and_records_levels(model):
    config = DraftConfig(SkipSet(attention=(1,), mlp=(2,)))
    makers = mc.cascade_makers(config, mc.aggressive_level(config, 4, extra=1))
    ids = {"a": [torch.arange(1, 9)[None]], "b": [torch.arange(20, 30)[None]]}
    rows, runs = mc.compare_cascades(model, config, makers, ids, max_new_tokens=8, repeats=1)
    assert [(r["source"], r["method"]) for r in rows] == [(s, m) for s in "ab" for m in ["plain loop", *makers]]
    assert all(r["identical"] in (True, 1.0) for r in rows if r["kind"] != "plain")
    method = next(m for m in runs["a"].methods if m.label == "aggressive int8 > shipped")
    parts = mc.level_parts(runs["a"].results(method), "aggressive int8 > shipped")
    assert [p["is_top"] for p in parts] == [False, True]
    assert all(p["cascade"] == "aggressive int8 > shipped" and p["used"] == 1.0 for p in parts)
    assert parts[0]["accepted"] <= parts[0]["proposed"]


def fake(levels_per_step):
    steps = [SimpleNamespace(levels=levels) for levels in levels_per_step]
    return [SimpleNamespace(trace=SimpleNamespace(steps=steps + [SimpleNamespace(levels=None)]))]


def level(name, used=True, proposed=0, accepted=0, own=0, forwards=0, seconds=0.0):
    return {"level": name, "used": used, "proposed": proposed, "accepted": accepted, "own": own,
            "forwards": forwards, "seconds": seconds}


def test_level_parts_per_step_and_shares():
    results = fake([[level("lookup", proposed=4, accepted=2, forwards=1, seconds=1e-4),
                     level("skip 8/16", proposed=5, accepted=5, own=3, forwards=2, seconds=4e-3)],
                    [level("lookup", used=False),
                     level("skip 8/16", proposed=3, accepted=1, own=3, forwards=3, seconds=6e-3)]])
    low, top = mc.level_parts(results, "x")
    assert low["used"] == 0.5 and low["proposed"] == 2.0 and low["kept"] == 0.5 and low["steps"] == 2
    assert low["ms_per_forward"] == pytest.approx(0.1)
    assert top["is_top"] and top["own"] == 3.0 and top["kept"] == 0.75 and top["ms_per_forward"] == pytest.approx(2.0)
    assert mc.level_parts(fake([])) == []
    nothing = mc.level_parts(fake([[level("lookup"), level("top")]]))
    assert math.isnan(nothing[0]["kept"]) and math.isnan(nothing[0]["ms_per_forward"])
