"""labkit.core.policies: when drafting stops. FixedK counts, StaticThreshold compares the draft's confidence with a
fixed threshold, AdaptiveThreshold moves its threshold with the smoothed acceptance rate (Draft & Verify's rule)."""
import pytest
import torch

from labkit import AdaptiveThreshold, FixedK, SkipSet, StaticThreshold, speculative_generate
from labkit.core.policies import DraftPolicy

from tiny_models import tiny_model

IDS = torch.tensor([[5, 6, 7]])


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4, vocab_size=97, max_positions=128)


@pytest.mark.parametrize("make, error, words", [
    (lambda: StaticThreshold(1.2), ValueError, "threshold"),
    (lambda: StaticThreshold(-0.1), ValueError, "threshold"),
    (lambda: StaticThreshold(float("nan")), TypeError, "threshold"),
    (lambda: StaticThreshold(0.5, max_draft=0), ValueError, "max_draft"),
    (lambda: FixedK(0), ValueError, "k"),
    (lambda: FixedK(2.0), TypeError, "k"),
    (lambda: AdaptiveThreshold(initial_threshold=2), ValueError, "initial_threshold"),
    (lambda: AdaptiveThreshold(target=-1), ValueError, "target"),
])
def test_policy_errors(make, error, words):
    with pytest.raises(error, match=words):
        make()


def test_adaptive_threshold_rule_and_state():
    policy = AdaptiveThreshold()
    assert policy.state()["threshold"] == 0.6 and policy.acceptance_rate == 0.9
    policy.update(n_drafted=4, n_accepted=0)          # AR -> 0.45 < 0.9: raise the threshold
    assert policy.acceptance_rate == pytest.approx(0.45)
    assert policy.threshold == pytest.approx(0.9 * 0.6 + 0.1 * 0.61)
    for _ in range(50):
        policy.update(4, 4)                           # perfect drafts: AR -> 1 > 0.9, lower it
    assert policy.threshold < 0.6 and policy.n_updates == 51
    policy.update(0, 0)                               # nothing drafted: nothing learned
    assert policy.n_updates == 51
    policy.reset()
    assert policy.threshold == 0.6 and policy.n_updates == 0


def test_adaptive_state_is_recorded_per_step_and_carries_across_calls(model):
    policy = AdaptiveThreshold(initial_threshold=0.3)
    out = speculative_generate(model, IDS, skip=SkipSet(mlp=[1, 2]), policy=policy, max_new_tokens=20)
    states = [s.policy_state for s in out.trace.steps]
    assert states[-1] == policy.state()
    assert [s["n_updates"] for s in states] == sorted(s["n_updates"] for s in states)
    thresholds_in_force = [s.threshold for s in out.trace.steps]
    assert thresholds_in_force[0] == 0.3
    carried = policy.threshold
    out2 = speculative_generate(model, IDS, skip=SkipSet(mlp=[1, 2]), policy=policy, max_new_tokens=5)
    assert out2.trace.steps[0].threshold == carried


# -- added with the mirrored layout --------------------------------------------------------------------------
def test_fixed_k_counts_and_ignores_confidence():
    policy = FixedK(3)
    assert policy.max_draft == 3 and policy.threshold is None
    assert [policy.keep_drafting(n, 0.0) for n in (1, 2, 3, 4)] == [True, True, False, False]
    assert policy.keep_drafting(1, 0.0) == policy.keep_drafting(1, 1.0)
    policy.update(3, 0)
    assert policy.state() == {"threshold": None, "max_draft": 3}


def test_static_threshold_keeps_drafting_at_or_above_the_threshold_up_to_max_draft():
    policy = StaticThreshold(0.5, max_draft=3)
    assert policy.keep_drafting(1, 0.5) and policy.keep_drafting(2, 0.9)      # the threshold itself keeps going
    assert not policy.keep_drafting(1, 0.4999)
    assert not policy.keep_drafting(3, 1.0)                                    # max_draft tokens: stop anyway
    assert StaticThreshold(0.0, 5).keep_drafting(4, 0.0) and not StaticThreshold(1.0, 5).keep_drafting(1, 0.99)
    assert isinstance(StaticThreshold(1).threshold, float)
    before = policy.state()
    policy.update(3, 0)                                                        # static: learns nothing
    assert policy.state() == before == {"threshold": 0.5, "max_draft": 3}


def test_adaptive_threshold_moves_against_the_acceptance_gap_and_stays_in_0_1():
    low, high = AdaptiveThreshold(initial_threshold=0.5), AdaptiveThreshold(initial_threshold=0.5)
    low.update(4, 1)                                   # AR 0.9 -> 0.575 < target: draft less (raise)
    high.update(4, 4)                                  # AR 0.9 -> 0.95 > target: draft more (lower)
    assert low.threshold > 0.5 > high.threshold
    assert low.threshold - 0.5 == pytest.approx(0.5 - high.threshold) == pytest.approx(0.1 * 0.01)
    stuck = AdaptiveThreshold(initial_threshold=1.0, epsilon=1.0, beta2=0.0)
    stuck.update(4, 0)
    assert stuck.threshold == 1.0                      # clamped at 1
    floor = AdaptiveThreshold(initial_threshold=0.0, epsilon=1.0, beta2=0.0)
    floor.update(4, 4)
    assert floor.threshold == 0.0                      # clamped at 0
    state = low.state()
    assert set(state) == {"threshold", "acceptance_rate", "max_draft", "n_updates"} and state["n_updates"] == 1


def test_adaptive_threshold_respects_max_draft_and_its_own_threshold():
    policy = AdaptiveThreshold(max_draft=2, initial_threshold=0.3)
    assert policy.max_draft == 2
    assert policy.keep_drafting(1, 0.3) and not policy.keep_drafting(1, 0.29) and not policy.keep_drafting(2, 1.0)


@pytest.mark.parametrize("policy", [FixedK(2), StaticThreshold(0.0, 2), AdaptiveThreshold(max_draft=2,
                                                                                       initial_threshold=0.0)])
def test_no_step_drafts_more_than_max_draft(model, policy):
    out = speculative_generate(model, IDS, skip=SkipSet(mlp=[1]), policy=policy, max_new_tokens=15)
    assert out.trace.steps and max(s.n_drafted for s in out.trace.steps) == 2


def test_the_interface_defaults_do_nothing_and_keep_drafting_must_be_written():
    base = DraftPolicy()
    assert base.max_draft == 1 and base.threshold is None and base.sampling_signal == "confidence"
    base.update(3, 1), base.observe_target(0.5), base.begin(), base.reset()
    assert base.state() == {"threshold": None, "max_draft": 1}
    with pytest.raises(NotImplementedError):
        base.keep_drafting(1, 0.5)
