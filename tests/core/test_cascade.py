"""Cascades: the top level drafts by speculative decoding over cheaper levels. Greedy output is token-identical to
plain decoding, sampled output exact; the top's draft is the draft it would make alone (each level's own cache);
the dynamic controller bypasses a level that does not agree; bad arguments are named."""
import random

import pytest
import torch

import labkit
import labkit.core.cascade as cascade_module
from labkit import (
    AdaptiveThreshold,
    DraftConfig,
    FixedK,
    SkipSet,
    StaticThreshold,
    autoregressive_generate,
    speculative_generate,
)
from labkit.core.cache import layer_lengths, new_cache
from labkit.core.cascade import DynamicController, ModelLevel, cascade
from labkit.core.decoding import prefill
from labkit.core.drafters import LookupDrafter, SelfDrafter
from labkit.core.sampling import Warp, sample
from labkit.core.state import DecodingState

from exact_sampling import (
    PROMPT,
    WARPS,
    chi_square_p_value,
    empirical,
    exact_two_token_distribution,
    sharp_tiny_model,
    total_variation,
    tv_bound,
)
from tiny_models import ARCHITECTURES, random_draft_head, tiny_model


def random_skip(rng, n_layers=4, most=3):
    return SkipSet(attention=rng.sample(range(n_layers), rng.randint(0, most)),
                   mlp=rng.sample(range(n_layers), rng.randint(0, most)))


def random_cascade(rng, controller=None):
    """Two or three levels (a lookup at the bottom half the time), random sets, int8 weights now and then."""
    levels = ["lookup"] if rng.random() < 0.5 else []
    for _ in range(rng.randint(2 - len(levels), 2)):
        skip = random_skip(rng)
        levels.append(DraftConfig(skip, draft_weights="int8") if rng.random() < 0.3 else skip)
    return cascade(levels, controller=controller or rng.choice(["fixed", "dynamic"]), gamma=rng.randint(1, 5),
                   explore=rng.randint(1, 4))


def random_policy(rng):
    return rng.choice([FixedK(rng.randint(1, 6)), StaticThreshold(rng.random(), rng.randint(1, 8)),
                       AdaptiveThreshold(max_draft=rng.randint(1, 8))])


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("seed", range(3))
def test_greedy_cascades_are_token_identical_to_plain_decoding(arch, seed):
    rng = random.Random(seed)
    model = tiny_model(arch, n_layers=4, seed=seed)
    for _ in range(3):
        prompt = torch.tensor([[rng.randrange(97) for _ in range(rng.choice([1, rng.randint(2, 14)]))]])
        n_new = rng.randint(1, 30)
        eos = [rng.randrange(97)] if rng.random() < 0.5 else []
        drafter = random_cascade(rng)
        out = speculative_generate(model, prompt, drafter=drafter, policy=random_policy(rng), max_new_tokens=n_new,
                                   eos_token_id=eos)
        plain = autoregressive_generate(model, prompt, n_new, eos_token_id=eos)
        assert out.sequences.equal(plain.sequences), [level.name for level in drafter.levels]
        for step in out.trace.steps:
            if step.levels is None:                  # the last token of the budget: a plain step, nothing drafted
                assert not step.drafted
                continue
            top = step.levels[-1]
            assert top["used"] and top["proposed"] == step.n_drafted and top["accepted"] == step.n_accepted
            assert all(lv["accepted"] <= lv["proposed"] for lv in step.levels)


def test_eos_inside_a_lower_draft_ends_the_text_there():
    """Prompt lookup copies a continuation that holds the EOS token: the cascade drafts up to it and no further."""
    model = tiny_model("llama", n_layers=4, seed=1)
    prompt = torch.tensor([[5, 6, 7, 8, 9, 5, 6, 7]])
    plain = autoregressive_generate(model, prompt, 20)
    for eos in {8, 9, *plain.new_tokens[:6]}:
        out = speculative_generate(model, prompt, drafter=cascade(["lookup", SkipSet(mlp=[2]), SkipSet(mlp=[1])],
                                                                  gamma=6), policy=FixedK(8), max_new_tokens=20,
                                   eos_token_id=[eos])
        assert out.sequences.equal(autoregressive_generate(model, prompt, 20, eos_token_id=[eos]).sequences)


def decoding_state(model, prompt) -> DecodingState:
    state = DecodingState(model, new_cache(model), prompt[0].tolist(), prompt.shape[1], Warp(), frozenset(), None)
    if prompt.shape[1] > 1:
        prefill(model, prompt[:, :-1], state.cache)
    return state


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_top_drafts_what_it_would_draft_alone_and_leaves_the_target_cache_alone(arch):
    """Greedy: whatever the levels below propose, the top's draft (tokens and q) is the one a plain self-draft with
    the top's set makes; every level kept to its own cache, so the target's cache still holds the prefix only."""
    rng = random.Random(7)
    model = tiny_model(arch, n_layers=4, seed=2)
    for _ in range(4):
        prompt = torch.tensor([[rng.randrange(97) for _ in range(rng.randint(1, 12))]])
        state = decoding_state(model, prompt)
        drafter = random_cascade(rng, controller="fixed")
        budget = rng.randint(1, 8)
        before = layer_lengths(state.cache)
        top = drafter.levels[-1]
        with torch.inference_mode():
            draft = drafter.draft(state, budget, FixedK(budget))
            assert layer_lengths(state.cache) == before
            alone = SelfDrafter(model, top.skip, weights="int8" if top.weights is not None else None).draft(
                state, budget, FixedK(budget))
        assert draft.tokens == alone.tokens
        torch.testing.assert_close(torch.tensor(draft.q), torch.tensor(alone.q), rtol=1e-4, atol=1e-4)


def test_a_level_feeds_only_what_its_cache_lacks():
    """After a rejection the level crops to the tokens that still match and feeds the changed tail: the same logits
    as a fresh level fed everything."""
    model = tiny_model("qwen2", n_layers=4)
    state = decoding_state(model, torch.tensor([[3, 14, 15, 92, 65]]))
    level, fresh = ModelLevel(SkipSet(attention=[1], mlp=[2]), model=model), ModelLevel(SkipSet(attention=[1], mlp=[2]),
                                                                                         model=model)
    level.begin(state)
    fresh.begin(state)
    with torch.no_grad(), level.active():
        level.logits([65, 10, 11, 12, 13], keep=2)
        changed = level.logits([65, 10, 11, 40], keep=1)
        assert len(level.cache.layers[0].keys[0, 0]) == state.position - 1 + 4      # cropped to 3, fed 1
        torch.testing.assert_close(changed, fresh.logits([65, 10, 11, 40], keep=1), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def target():
    return sharp_tiny_model(n_layers=3, seed=3)


CASCADES = {                   # with the full model on top, q = p: the target corrects nothing the cascade got wrong
    "top = the full model": lambda target: cascade([SelfDrafter(target, SkipSet(mlp=[0]), head=random_draft_head(
        target, SkipSet(mlp=[0]), scale=2.0)), SkipSet()], gamma=2),          # under it, a draft unlike p
    "two levels": lambda target: cascade([SkipSet(attention=[0, 1], mlp=[1, 2]), SkipSet(mlp=[1])], gamma=2),
    "lookup, int8, top": lambda target: cascade(["lookup", DraftConfig(SkipSet(mlp=[0, 2]), draft_weights="int8"),
                                          SkipSet(attention=[2])], gamma=[2, 2]),
}


@pytest.mark.parametrize("name", list(CASCADES))
def test_cascade_sampling_draws_exactly_from_p(target, name):
    warp = WARPS[1] if name == "two levels" else WARPS[0]           # one warp with top-k and top-p
    dist = exact_two_token_distribution(target, warp, n_tokens=3)
    counts = empirical(lambda g: speculative_generate(target, PROMPT, drafter=CASCADES[name](target), policy=FixedK(3),
                                                      max_new_tokens=3, do_sample=True, temperature=warp.temperature,
                                                      top_k=warp.top_k, top_p=warp.top_p, generator=g).new_tokens, 3)
    assert chi_square_p_value(counts, dist) > 1e-3
    assert total_variation(counts, dist) < tv_bound(dist)


def test_a_level_that_takes_the_lower_q_as_its_own_fails_the_same_test(target, monkeypatch):
    """Keeping every proposal (the upper level never judges the lower one's tokens against its own q) hands the
    target tokens that are not distributed as the q it is told: caught."""
    monkeypatch.setattr(cascade_module, "verify_sampling",
                        lambda p, q_dists, drafted, g: (len(drafted), sample(p[len(drafted)], g)))
    dist = exact_two_token_distribution(target, WARPS[0], n_tokens=3)
    counts = empirical(lambda g: speculative_generate(target, PROMPT, drafter=CASCADES["top = the full model"](target),
                                                      policy=FixedK(3), max_new_tokens=3, do_sample=True,
                                                      generator=g).new_tokens, 3)
    assert chi_square_p_value(counts, dist) < 1e-3


def test_the_dynamic_controller_bypasses_a_level_that_never_agrees_and_drafts_more_when_it_does():
    controller = DynamicController(3, [4, 4], [8, 8, 8], [False, False, False], explore=100,
                                   costs=[1e-4, 2e-4, 6e-4])
    controller.plan()                                      # the first step runs the whole cascade
    controller.observe_step([{"forwards": 0}] * 3, 4, 2, 1e-3)
    for _ in range(30):
        controller.observe_round(1, 2, 4, 0)               # the middle level never agrees with the top
        controller.observe_round(0, 2, 4, 4)               # the bottom one always does
    plan = controller.plan()
    assert 1 not in plan.route and plan.route == (0, 2) and plan.gamma[0] == 8
    for _ in range(30):
        controller.observe_round(0, 2, 4, 0)
    assert controller.plan().route == (2,)                  # nobody helps: the top drafts alone
    for _ in range(30):
        controller.observe_round(0, 1, 4, 3)
        controller.observe_round(1, 2, 4, 3)
    low = controller.plan().gamma.get(1)
    for _ in range(60):
        controller.observe_round(1, 2, 4, 4)
    assert controller.plan().gamma.get(1, 0) > (low or 0)    # more agreement, longer proposals


def test_the_dynamic_cascade_learns_to_skip_a_useless_middle_level():
    """A middle level that skips every block drafts nonsense; after its first measurements the dynamic controller
    leaves it out of most steps, while the fixed one always runs it."""
    model = tiny_model("llama", n_layers=4, seed=4)
    prompt = torch.tensor([[7, 3, 9, 1, 4, 4, 2]])
    levels = [SkipSet(attention=[0, 3], mlp=[1, 3]), SkipSet.all(4), SkipSet(mlp=[2])]
    used = {}
    for controller in ("fixed", "dynamic"):
        out = speculative_generate(model, prompt, drafter=cascade(levels, controller=controller, explore=50),
                                   policy=FixedK(4), max_new_tokens=60)
        steps = [s for s in out.trace.steps if s.levels is not None]
        used[controller] = sum(s.levels[1]["used"] for s in steps) / len(steps)
    assert used["fixed"] == 1.0 and used["dynamic"] < 0.5


def test_a_cost_model_gives_the_levels_costs():
    class Costs:
        def draft_ms(self, skip):
            return 1.0 - 0.05 * skip.n_skipped

    drafter = cascade(["lookup", SkipSet(mlp=[0, 1]), SkipSet(mlp=[1])], controller="dynamic", cost_model=Costs())
    assert drafter.controller.cost == pytest.approx([None, 0.9e-3, 0.95e-3])


def test_bad_arguments_are_named():
    skip = SkipSet(mlp=[1])
    with pytest.raises(TypeError, match="levels must be a list"):
        cascade(skip)
    with pytest.raises(ValueError, match="at least two"):
        cascade([skip])
    with pytest.raises(ValueError, match=r"levels\[1\]: prompt lookup can only be the bottom"):
        cascade([skip, "lookup"])
    with pytest.raises(TypeError, match=r"levels\[0\] must be 'lookup'"):
        cascade(["lookups", skip])
    with pytest.raises(ValueError, match=r"levels\[0\]: a LookupDrafter level must have no fallback"):
        cascade([LookupDrafter(3, fallback=SelfDrafter(tiny_model("llama", n_layers=2))), skip])
    with pytest.raises(ValueError, match="controller must be one of"):
        cascade(["lookup", skip], controller="dytc")
    with pytest.raises(ValueError, match="gamma must be one number or one per level"):
        cascade(["lookup", skip, skip], gamma=[1, 2, 3])
    with pytest.raises(ValueError, match=r"gamma\[1\] must be an integer >= 1"):
        cascade(["lookup", skip, skip], gamma=[1, 0])
    with pytest.raises(TypeError, match="cost_model must have a draft_ms"):
        cascade(["lookup", skip], controller="dynamic", cost_model=object())
    model = tiny_model("llama", n_layers=2)
    with pytest.raises(ValueError, match="layer index 5"):
        cascade(["lookup", SkipSet(mlp=[5])], model=model)
    with pytest.raises(ValueError, match="a SelfDrafter level needs a fixed skip set"):
        cascade([SelfDrafter(model, skip, tree=labkit.draft_tree("static")), skip])
    with pytest.raises(ValueError, match="give a drafter or skip"):
        speculative_generate(model, torch.tensor([[1, 2]]), drafter=cascade(["lookup", skip]), skip=skip)
