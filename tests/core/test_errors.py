"""Bad input gets a clear ValueError/TypeError naming the argument, and leaves the model untouched."""
import pytest
import torch

from labkit import AdaptiveThreshold, FixedK, SkipSet, StaticThreshold, autoregressive_generate, speculative_generate
from labkit.measure.strategies import block_importance, make_strategies, skip_strategy, strategy_cost_model
from tiny_models import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4, vocab_size=97, max_positions=128)


IDS = torch.tensor([[5, 6, 7]])


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(skip=SkipSet(attention=[4])), ValueError, "layer index 4"),
    (dict(skip=SkipSet(mlp=[9])), ValueError, "4 layers"),
    (dict(skip=[1, 2]), TypeError, "skip"),
    (dict(max_new_tokens=-1), ValueError, "max_new_tokens"),
    (dict(max_new_tokens=2.5), TypeError, "max_new_tokens"),
    (dict(max_new_tokens=126), ValueError, "context"),
    (dict(policy="adaptive"), TypeError, "policy"),
    (dict(do_sample=True, temperature=0.0), ValueError, "temperature"),
    (dict(do_sample=True, top_p=1.5), ValueError, "top_p"),
    (dict(do_sample=True, top_k=0), ValueError, "top_k"),
])
def test_speculative_argument_errors(model, kwargs, error, words):
    with pytest.raises(error, match=words):
        speculative_generate(model, IDS, **kwargs)


@pytest.mark.parametrize("ids, error, words", [
    (torch.zeros((1, 0), dtype=torch.long), ValueError, "empty"),
    (torch.tensor([[1, 2], [3, 4]]), ValueError, "batch size 2"),
    (torch.tensor([[1.0, 2.0]]), TypeError, "integer token ids"),
    ([[1, 2]], TypeError, "LongTensor"),
    (torch.tensor([[1, 200]]), ValueError, "vocabulary"),
    (torch.ones((1, 130), dtype=torch.long), ValueError, "context"),
])
def test_prompt_errors(model, ids, error, words):
    with pytest.raises(error, match=words):
        speculative_generate(model, ids, max_new_tokens=1)
    with pytest.raises(error, match=words):
        autoregressive_generate(model, ids, 1)


def test_skip_set_errors():
    with pytest.raises(ValueError, match="more than once"):
        SkipSet(attention=[1, 1])
    with pytest.raises(ValueError, match="negative"):
        SkipSet(mlp=[-1])
    with pytest.raises(TypeError, match="integer"):
        SkipSet(attention=["a"])
    with pytest.raises(ValueError, match="even"):
        SkipSet.from_mask([True, False, True])


def test_skip_set_round_trip_and_hashing():
    s = SkipSet(attention=[3, 0], mlp=[2])
    assert s.attention == (0, 3) and SkipSet.from_mask(s.to_mask(4)) == s
    assert {s: 1}[SkipSet(attention=(0, 3), mlp=(2,))] == 1
    assert s.ratio(4) == 3 / 8 and "attention=[0, 3]" in str(s)
    assert SkipSet.from_dict(s.to_dict()) == s
    with pytest.raises(Exception):
        s.attention = (1,)


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


def test_draft_model_with_other_vocabulary(model):
    other = tiny_model("llama", n_layers=1, vocab_size=50)
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_generate(model, IDS, draft_model=other, max_new_tokens=3)
    with pytest.raises(ValueError, match="not both"):
        speculative_generate(model, IDS, draft_model=model, skip=SkipSet(), max_new_tokens=3)


def test_unsupported_model_class():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    with pytest.raises(TypeError, match="LlamaForCausalLM"):
        speculative_generate(gpt2, IDS, max_new_tokens=2)
    with pytest.raises(TypeError, match="unsupported model class GPT2LMHeadModel"):
        autoregressive_generate(gpt2, IDS, 2)


def test_errors_leave_the_model_untouched(model):
    before = [(n, id(m)) for n, m in model.named_modules()]
    with pytest.raises(ValueError):
        speculative_generate(model, IDS, skip=SkipSet(attention=[0, 7]), max_new_tokens=3)
    from labkit import skipping
    with pytest.raises(RuntimeError):
        with skipping(model, SkipSet(attention=[1], mlp=[2, 3])):
            raise RuntimeError("boom inside the draft")
    assert [(n, id(m)) for n, m in model.named_modules()] == before


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


@pytest.mark.parametrize("call", [
    lambda: skip_strategy("knapsack", "default"),
    lambda: skip_strategy("static", "default", skip=SkipSet()),
    lambda: make_strategies("default", None),
    lambda: block_importance("default", None),
    lambda: strategy_cost_model("default"),
    lambda: speculative_generate("default", IDS, max_new_tokens=2),
])
def test_a_model_name_where_a_loaded_model_belongs(call):
    with pytest.raises(TypeError, match=r"model must be a loaded model, got the name 'default'.*labkit\.load_model"):
        call()


def test_a_draft_model_name_names_the_argument(model):
    with pytest.raises(TypeError, match="draft_model must be a loaded model"):
        speculative_generate(model, IDS, draft_model="draft", max_new_tokens=2)
