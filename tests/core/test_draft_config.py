"""DraftConfig: one self-draft's skip set, draft weights and stop rule."""
import pytest

from labkit import AdaptiveThreshold, DraftConfig, SkipSet, StaticThreshold, speculative_generate
from labkit.core.decoding import autoregressive_generate
from labkit.core.width import WidthPredictors, WidthSet

from tiny_models import tiny_model


def test_round_trip_policy_and_description():
    config = DraftConfig(SkipSet(attention=[1], mlp=[0, 2]), "int8", "adaptive", 0.3, 8)
    assert DraftConfig.from_dict(config.to_dict()) == config
    policy = config.make_policy()
    assert isinstance(policy, AdaptiveThreshold) and policy.threshold == 0.3 and policy.max_draft == 8
    assert config.make_policy() is not policy                                   # fresh each time
    static = DraftConfig(SkipSet(mlp=[1])).make_policy()
    assert isinstance(static, StaticThreshold) and (static.threshold, static.max_draft) == (0.5, 12)
    assert "int8 draft weights, adaptive stop rule (initial threshold 0.3" in config.describe(4)
    assert "ratio 0.375" in config.describe(4)
    # a bare skip-set dict (results of a skip-set-only search) reads as that set with the defaults
    assert DraftConfig.from_dict({"attention": [1], "mlp": []}) == DraftConfig(SkipSet(attention=[1]))


@pytest.mark.parametrize("kwargs, error, match", [
    ({"skip": {"attention": [1]}}, TypeError, "skip must be a SkipSet"),
    ({"draft_weights": "int4"}, ValueError, "draft_weights must be None or one of"),
    ({"policy": "greedy"}, ValueError, "policy must be one of"),
    ({"threshold": 1.5}, ValueError, "threshold must be a number in"),
    ({"max_draft": 0}, ValueError, "max_draft must be an integer >= 1"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        DraftConfig(**kwargs)


def test_generate_kwargs_decode_losslessly():
    model = tiny_model("llama", n_layers=4, seed=3)
    ids = __import__("torch").randint(1, 90, (1, 12))
    plain = autoregressive_generate(model, ids, 20, eos_token_id=[]).sequences
    for config in (DraftConfig(SkipSet(attention=[1, 3]), "int8", "static", 0.2, 4),
                   DraftConfig(SkipSet(mlp=[2]), None, "adaptive", 0.6, 12)):
        out = speculative_generate(model, ids, max_new_tokens=20, eos_token_id=[], **config.generate_kwargs())
        assert out.sequences.equal(plain)


def test_a_width_draft_round_trips_and_decodes_losslessly():
    model = tiny_model("qwen2", n_layers=2, seed=1)
    ids = __import__("torch").randint(1, 90, (1, 9))
    plain = autoregressive_generate(model, ids, 20, eos_token_id=[]).sequences
    config = DraftConfig(SkipSet(mlp=[1]), width=WidthSet((0.25, 0.5), "pruned"), max_draft=4)
    assert DraftConfig.from_dict(config.to_dict()) == config and "MLP kept 0.25, 0.5" in config.describe(2)
    assert "width" not in DraftConfig().to_dict()                       # older results read and write the same
    out = speculative_generate(model, ids, max_new_tokens=20, eos_token_id=[],
                               **config.generate_kwargs(model, WidthPredictors.random(model)))
    assert out.sequences.equal(plain) and out.trace.steps[0].width == config.width
    with pytest.raises(ValueError, match="needs the model and its predictors"):
        config.generate_kwargs()
    with pytest.raises(ValueError, match="draft_weights=None"):
        DraftConfig(width=WidthSet((0.5, 0.5)), draft_weights="int8")
    with pytest.raises(TypeError, match="width must be"):
        DraftConfig(width=(0.5, 0.5))
