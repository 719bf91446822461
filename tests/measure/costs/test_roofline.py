"""labkit.measure.costs.roofline on tiny models: bytes and FLOPs counted from a block's shapes, block timings by
hooks that leave the model as it was, c against the blocks kept and c_v against the tokens verified (the cache cut
back after every forward), the analytic limit, the roofs of the machine, and a wider random model of each family."""
import math

import pytest
import torch

from labkit.core.decoding import autoregressive_generate
from labkit.core.skip import SkipSet, decoder_layers
from labkit.measure.costs import roofline as rl
from labkit.measure.harness import interleaved_ms, ratio_spread

from tiny_models import ARCHITECTURES, tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4)


def test_uniform_layer_skip_keeps_evenly_spread_whole_layers():
    assert rl.uniform_layer_skip(8, 1.0) == SkipSet()
    assert rl.uniform_layer_skip(8, 0.0) == SkipSet.all(8)
    half = rl.uniform_layer_skip(8, 0.5)
    assert half.attention == half.mlp and len(half.attention) == 4
    kept = sorted(set(range(8)) - set(half.attention))
    assert kept == [1, 3, 5, 7]                                     # one kept layer per stretch of two
    assert len(rl.uniform_layer_skip(12, 0.25).attention) == 9
    with pytest.raises(ValueError, match="kept"):
        rl.uniform_layer_skip(8, 1.5)


def test_block_budget_counts_weights_and_flops(model):
    layer = decoder_layers(model)[0]
    one, many = rl.block_budget(model, 1, 16), rl.block_budget(model, 8, 16)
    for block, module in (("attention", layer.self_attn), ("mlp", layer.mlp)):
        params = sum(p.numel() for p in module.parameters())
        assert one[block]["params"] == params and one[block]["weight_bytes"] == 4 * params
        assert many[block]["intensity"] > 4 * one[block]["intensity"]      # the same bytes serve 8 tokens
    assert one["mlp"]["flops"] == 2 * one["mlp"]["params"]
    assert one["attention"]["flops"] == 2 * one["attention"]["params"] + 4 * 1 * 17 * 4 * 8   # + scores, weighted sum
    assert one["mlp"]["intensity"] == pytest.approx(0.5, rel=0.1)          # 2 FLOPs per 4-byte weight


def test_time_blocks_and_roofline_points(model):
    before = [m for m in model.modules()]
    rows = rl.roofline_points(model, (1, 4), context=8, repeats=2, regime="tiny")
    assert [(r["block"], r["tokens"]) for r in rows] == [("attention", 1), ("mlp", 1), ("attention", 4), ("mlp", 4)]
    for r in rows:
        assert 0 < r["ms"] <= r["ms_max"] and r["ms"] < r["forward_ms"]
        assert r["gb_per_s"] == pytest.approx(r["bytes"] / r["ms"] / 1e6)
        assert r["gflop_per_s"] == pytest.approx(r["flops"] / r["ms"] / 1e6)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())   # hooks removed
    assert [m for m in model.modules()] == before


def test_cost_curves_leave_the_model_decoding_as_before(model):
    ids = torch.arange(1, 10)[None]
    reference = autoregressive_generate(model, ids, 6).sequences
    draft = rl.draft_cost_curve(model, (1.0, 0.5), context=8, repeats=3, inner=2, skips={"one": SkipSet(mlp=[0])})
    assert [r["label"] for r in draft] == ["kept 1.00", "kept 0.50", "one"]
    assert [r["kept"] for r in draft] == [1.0, 0.5, 1 - 1 / 8]
    assert all(r["c"] > 0 and r["c_min"] <= r["c_max"] for r in draft)
    int8 = rl.draft_cost_curve(model, (0.5,), context=8, repeats=2, draft_weights="int8")
    assert int8[0]["c"] > 0
    verify = rl.verify_cost_curve(model, (1, 3, 8), context=8, repeats=3)
    assert [r["tokens"] for r in verify] == [1, 3, 8] and all(r["c_v"] > 0 for r in verify)
    assert rl.prefill_cost(model, 9, repeats=2)["prefill"] > 0
    assert torch.equal(autoregressive_generate(model, ids, 6).sequences, reference)
    with pytest.raises(ValueError, match="positions"):
        rl.verify_cost_curve(model, (8,), context=250)


def test_inner_for_is_between_one_and_ten(model):
    assert 1 <= rl.inner_for(model, 8) <= 10


def test_ceiling_roofs():
    c = rl.measure_ceiling(copy_mb=2, cache_copy_mb=0.5, matmul_n=64, repeats=2)
    assert c.bandwidth_gbs > 0 and c.cache_gbs > 0 and c.gflops > 0 and c.threads == torch.get_num_threads()
    assert c.ridge == pytest.approx(c.gflops / c.bandwidth_gbs)
    assert c.attainable_gflops(1e-6) == pytest.approx(c.bandwidth_gbs * 1e-6)
    assert c.attainable_gflops(1e9) == c.gflops
    assert c.memory_roof(1) == (c.cache_gbs if c.cache_bytes else c.bandwidth_gbs)
    assert c.memory_roof(10 ** 15) == c.bandwidth_gbs
    assert c.to_dict()["ridge"] == c.ridge and c.dtype == "float32"
    assert rl.cache_bytes() >= 0


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_widened_model_keeps_the_family_and_decodes(arch):
    base = tiny_model(arch, n_layers=2)
    wide = rl.widened_model(base, hidden_size=64, n_layers=3, seed=1)
    assert type(wide) is type(base) and wide.config.num_hidden_layers == 3 and wide.config.hidden_size == 64
    assert wide.config.intermediate_size == 128 and not wide.config.tie_word_embeddings
    assert len(getattr(wide.config, "layer_types", None) or [0] * 3) == 3
    out = autoregressive_generate(wide, torch.arange(1, 6)[None], 4)
    assert len(out.new_tokens) == 4


def test_widened_model_branch_scale_seed_and_dtype():
    base = tiny_model("llama", n_layers=2)
    one = rl.widened_model(base, hidden_size=64, n_layers=2, seed=3)
    small = rl.widened_model(base, hidden_size=64, n_layers=2, seed=3, branch_scale=0.1)
    a, b = decoder_layers(one)[1], decoder_layers(small)[1]
    assert torch.allclose(0.1 * a.mlp.down_proj.weight, b.mlp.down_proj.weight)
    assert torch.equal(a.mlp.up_proj.weight, b.mlp.up_proj.weight)         # only the output projections
    half = rl.widened_model(base, hidden_size=64, n_layers=2, seed=3, dtype="bf16")
    assert next(half.parameters()).dtype == torch.bfloat16
    assert rl.parameter_count(half) == rl.parameter_count(one) and rl.weight_bytes(half) * 2 == rl.weight_bytes(one)


def test_interleaved_ms_alternates_and_the_fastest_estimate():
    order = []
    samples = interleaved_ms({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, repeats=3, inner=2,
                             warmup=1)
    assert order == ["a", "b"] + ["a", "a", "b", "b", "b", "b", "a", "a", "a", "a", "b", "b"]
    assert all(len(v) == 3 for v in samples.values())
    value, lo, hi = ratio_spread([2.0, 4.0, 3.0], [1.0, 1.0, 2.0], "fastest")
    assert value == 2.0 and (lo, hi) == (1.5, 4.0)
    assert ratio_spread([2.0, 4.0, 3.0], [1.0, 1.0, 2.0])[0] == 2.0     # the median ratio
    with pytest.raises(ValueError, match="estimate"):
        ratio_spread([1.0], [1.0], "mean")
    assert math.isnan(ratio_spread([1.0], [0.0])[0])
