"""labkit.measure.comparisons.speed: a skip set's wall-clock speedup over plain decoding of one prompt, through the
harness, token-identical to it; policies are copied, not used up; bad arguments are named."""
import pytest

from labkit import SkipSet
from labkit.core.policies import FixedK
from labkit.measure.comparisons import speed as spd

from tiny_models import ToyTokenizer
from tiny_probes import tiny  # noqa: F401 (fixture)


def test_measure_speedup_is_identical_to_plain(tiny):
    from labkit import AdaptiveThreshold

    ids = ToyTokenizer()("def f(x):")["input_ids"]
    skip = SkipSet(attention=[2], mlp=[3])
    out = spd.measure_speedup(tiny, ids, skip, max_new_tokens=8, repeats=2)
    assert list(out.index) == ["plain decoding", "adaptive threshold"]
    assert out["identical"].all() and out.loc["plain decoding", "speedup"] == 1.0
    row = out.loc["adaptive threshold"]
    assert row["speedup"] == pytest.approx(out.loc["plain decoding", "ms_per_token"] / row["ms_per_token"])
    assert 0 <= row["acceptance"] <= 1 and row["tokens_per_step"] >= 1
    policy = FixedK(3)
    two = spd.measure_speedup(tiny, ids, skip, policies={"k=3": policy, "adaptive": AdaptiveThreshold()},
                             max_new_tokens=8, repeats=1)
    assert list(two.index) == ["plain decoding", "k=3", "adaptive"] and two["identical"].all()
    assert policy == FixedK(3)                                 # the caller's policy object is not used up
    with pytest.raises(ValueError):
        spd.measure_speedup(tiny, ids, skip, repeats=0)
    with pytest.raises(ValueError):
        spd.measure_speedup(tiny, ids, skip, policies={})
    with pytest.raises(TypeError):
        spd.measure_speedup(tiny, ids, skip, policies={"k": 3})
