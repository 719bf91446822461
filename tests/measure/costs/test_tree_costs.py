"""labkit.measure.costs.tree_costs on a tiny model: c_v against tree nodes leaves the cache as it found it, and the
shapes comparison keeps every tree token-identical to the plain loop."""
import math

import pytest
import torch

from labkit.core.skip import SkipSet
from labkit.core.tree import depths
from labkit.measure.costs import tree_costs as tc

from tiny_models import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4)


def test_bushy_parents_fill_levels():
    assert tc.bushy_parents(7, 3) == [-1, -1, -1, 0, 0, 0, 1]
    assert max(depths(tc.bushy_parents(32, 3))) == 3
    with pytest.raises(ValueError):
        tc.bushy_parents(0)


def test_verify_width_costs_rows(model):
    ids = torch.arange(1, 12)[None]
    rows = tc.verify_width_costs(model, ids, (1, 4, 8), repeats=3, inner=2)
    assert [r["nodes"] for r in rows] == [1, 4, 8]
    for r in rows:
        assert r["c_v_min"] <= r["c_v"] <= r["c_v_max"] and r["verify_ms"] > 0 and r["plain_ms"] > 0
    with pytest.raises(ValueError):
        tc.verify_width_costs(model, ids, (0,), repeats=1)


class Config:
    def generate_kwargs(self):
        return {"skip": SkipSet(attention=(1,), mlp=(2,))}


def test_compare_shapes_rows_per_source(model):
    shapes = {"chain": None, "dynamic (top 2, 4 nodes)": ("dynamic", {"top_k": 2, "nodes": 4})}
    ids = {"a": [torch.arange(1, 9)[None]], "b": [torch.arange(20, 30)[None]]}
    rows, runs = tc.compare_shapes(model, Config(), shapes, ids, max_new_tokens=8, repeats=1)
    assert [(r["source"], r["kind"]) for r in rows] == [(s, k) for s in "ab" for k in ("plain", "chain", "tree")]
    assert set(runs) == {"a", "b"}
    for r in rows:
        if r["kind"] == "plain":
            assert math.isnan(r["nodes_per_verify"])
        else:
            assert r["identical"] in (True, 1.0) and r["nodes_per_verify"] > 0
    assert max(r["nodes_per_verify"] for r in rows if r["kind"] == "tree") <= 4
