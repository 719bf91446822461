"""compare_strategies: the plain loop and every method interleaved, one row each, every run checked against plain
decoding; methods named in ``draft_weights`` draft with int8 weights, those in ``draft_heads`` with a head."""
import pytest

from labkit import SkipSet
from labkit.core import draft_weights as weights_module
from labkit.core.strategies import StaticStrategy
from labkit.lessons.adaptive_skip import with_draft_head, with_int8_draft
from labkit.measure.comparisons.adaptive import PLAIN, compare_strategies

from tiny_models import ToyTokenizer, random_draft_head, tiny_model


def test_compare_strategies_with_int8_draft_rows():
    model = tiny_model("llama", n_layers=4, vocab_size=97, max_positions=8192)
    methods = {"static: trained draft path": lambda: StaticStrategy(SkipSet(mlp=[1, 2]))}
    pair, weights, base, quantized = with_int8_draft(methods)
    frame = compare_strategies(model, ToyTokenizer(), pair, sources=("stdlib",), n_prompts=1, max_new_tokens=8,
                               draft_weights=weights, progress=False).frame
    assert list(frame["method"]) == [PLAIN, base, quantized]
    assert frame["identical"].tolist() == [True, True, True]               # the plain loop is its own reference
    assert weights_module._BUILT.get(model) is not None                 # the int8 row built the model's copies
    with pytest.raises(ValueError, match="not compared"):
        compare_strategies(model, ToyTokenizer(), methods, draft_weights={"nope": "int8"}, progress=False)


def test_compare_strategies_with_a_draft_head_row():
    model = tiny_model("llama", n_layers=4, vocab_size=97, max_positions=8192)
    path = SkipSet(mlp=[1, 2])
    methods = {"static: trained draft path": lambda: StaticStrategy(path)}
    pair, weights, base, quantized = with_int8_draft(methods)
    head = random_draft_head(model, path)
    head.threshold = 0.3
    pair, weights, heads, headed = with_draft_head(pair, weights, base, head, {"trained draft path": path})
    comparison = compare_strategies(model, ToyTokenizer(), pair, sources=("stdlib",), n_prompts=1, max_new_tokens=8,
                                    draft_weights=weights, draft_heads=heads, progress=False)
    frame = comparison.frame
    assert list(frame["method"]) == [PLAIN, base, quantized, headed] and headed.endswith("draft head, int8 draft")
    assert frame["identical"].tolist() == [True, True, True, True]
    steps = comparison.results[("stdlib", headed)][0].trace.steps
    assert all(step.skip == path for step in steps if step.n_drafted)
    assert with_draft_head(pair, weights, base, head, {"trained draft path": SkipSet(mlp=[3])})[3] is None
    assert with_draft_head(pair, weights, base, None, {"trained draft path": path})[3] is None
    with pytest.raises(ValueError, match="draft_heads names"):
        compare_strategies(model, ToyTokenizer(), methods, draft_heads={"nope": head}, progress=False)
