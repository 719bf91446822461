"""labkit.search.space: the 2L binary variables of a skip set (or the whole draft configuration), their
round trip, the warm starts and the ratio buckets."""
from labkit import DraftConfig, SkipSet
from labkit.artifacts.results import ratio_buckets
from labkit.search import param_names, params_from_skip, skip_from_params, warm_start_sets
from labkit.search.space import (
    CONFIG_MAX_DRAFTS,
    CONFIG_THRESHOLDS,
    config_from_params,
    config_param_names,
    params_from_config,
    warm_start_configs,
)


def test_search_space_and_warm_start():
    assert param_names(2) == ["attn_0", "attn_1", "mlp_0", "mlp_1"]
    skip = SkipSet(attention=[1], mlp=[0, 3])
    assert skip_from_params(params_from_skip(skip, 4), 4) == skip
    warm = warm_start_sets(4)
    assert warm["no skip"] == SkipSet()
    assert warm["every other layer"] == SkipSet(attention=[1, 3], mlp=[1, 3])
    assert warm["every other attention block"] == SkipSet(attention=[1, 3])
    assert ratio_buckets()[:2] == [(0.0, 0.125), (0.125, 0.25)] and len(ratio_buckets()) == 8


def test_config_space_round_trip():
    names = config_param_names(4)
    assert names[:8] == ["attn_0", "attn_1", "attn_2", "attn_3", "mlp_0", "mlp_1", "mlp_2", "mlp_3"]
    assert names[8:] == ["int8", "adaptive", "threshold_i", "max_draft_i"]
    config = DraftConfig(SkipSet(attention=[1], mlp=[3]), "int8", "adaptive", CONFIG_THRESHOLDS[2],
                         CONFIG_MAX_DRAFTS[1])
    assert config_from_params(params_from_config(config, 4), 4) == config
    snapped = params_from_config(DraftConfig(threshold=0.33, max_draft=10), 4)            # nearest values
    assert CONFIG_THRESHOLDS[snapped["threshold_i"]] == 0.3 and CONFIG_MAX_DRAFTS[snapped["max_draft_i"]] == 8
    starts = warm_start_configs(4)
    assert len(starts) == 4 and {c.draft_weights for c in starts.values()} == {None, "int8"}
