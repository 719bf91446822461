"""Speculative sampling draws exactly from the target distribution (and a wrong rule is caught)."""

import pytest
import torch

import labkit.core.verify as verify_module
from labkit import (
    EarlyExitDrafter,
    FixedK,
    SkipSet,
    TargetConfidenceGate,
    autoregressive_generate,
    speculative_generate,
)
from labkit.core.sampling import Warp
from labkit.core.strategies import InContextStrategy, KnapsackStrategy, OnTheFlyStrategy

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
from tiny_models import random_draft_head


@pytest.fixture(scope="module")
def target():
    return sharp_tiny_model(n_layers=2, seed=3)


@pytest.fixture(scope="module")
def draft():
    return sharp_tiny_model(n_layers=1, seed=11)




@pytest.mark.parametrize("warp", WARPS, ids=["t1", "t0.7-k4-p0.9"])
def test_speculative_sampling_matches_exact_distribution(target, draft, warp):
    dist = exact_two_token_distribution(target, warp)
    kw = dict(max_new_tokens=2, do_sample=True, temperature=warp.temperature, top_k=warp.top_k, top_p=warp.top_p)
    # the draft really differs from the target: otherwise the test proves little
    with torch.no_grad():
        p = warp.probs(target(PROMPT).logits[0, -1])
        q = warp.probs(draft(PROMPT).logits[0, -1])
    assert 0.5 * (p - q).abs().sum() > 0.3
    head = random_draft_head(target, SkipSet(mlp=[1]))
    for name, fn in {
        "separate draft": lambda g: speculative_generate(target, PROMPT, draft_model=draft, policy=FixedK(2),
                                                         generator=g, **kw).new_tokens,
        "skip a block, int8 draft weights": lambda g: speculative_generate(
            target, PROMPT, skip=SkipSet(mlp=[1]), policy=FixedK(2), draft_weights="int8", generator=g,
            **kw).new_tokens,
        "skip a block, a draft head": lambda g: speculative_generate(
            target, PROMPT, skip=SkipSet(mlp=[1]), policy=FixedK(2), draft_head=head, generator=g, **kw).new_tokens,
        "skip everything": lambda g: speculative_generate(target, PROMPT, skip=SkipSet.all(2), policy=FixedK(2),
                                                          generator=g, **kw).new_tokens,
        "plain loop": lambda g: autoregressive_generate(target, PROMPT, generator=g, **kw).new_tokens,
        "early exit after layer 1": lambda g: speculative_generate(target, PROMPT, drafter=EarlyExitDrafter(target, 1),
                                                                   policy=FixedK(2), generator=g, **kw).new_tokens,
    }.items():
        counts = empirical(fn)
        assert chi_square_p_value(counts, dist) > 1e-3, name
        assert total_variation(counts, dist) < tv_bound(dist), name


def test_gated_early_exit_is_exact_too(target):
    """The gate decides from a sampled token's probability whether the next step drafts: still exact."""
    dist = exact_two_token_distribution(target, WARPS[0], n_tokens=3)    # 3 tokens: after a rejection in step 1,
    gate = TargetConfidenceGate(FixedK(2), 0.5)                          # step 2 may draft, or not
    counts = empirical(lambda g: speculative_generate(target, PROMPT, drafter=EarlyExitDrafter(target, 1), policy=gate,
                                                      max_new_tokens=3, do_sample=True, generator=g).new_tokens, 3)
    assert gate.n_closed > 0 and gate.n_closed < gate.n_observed       # both branches were taken
    assert chi_square_p_value(counts, dist) > 1e-3
    assert total_variation(counts, dist) < tv_bound(dist)


def test_prompt_lookup_drafts_are_lossless_too(target):
    """A copied draft is a point mass q: accepted with probability p(x), else resampled from p minus x."""
    prompt = torch.tensor([[1, 4, 2, 1, 4]])                 # the suffix [1, 4] occurred before: lookup drafts [2, 1]
    from labkit.core.drafters import ngram_lookup
    assert ngram_lookup(prompt[0].tolist(), 2) == [2, 1]
    dist = exact_two_token_distribution(target, WARPS[0], prompt)
    counts = empirical(lambda g: speculative_generate(target, prompt, skip=SkipSet.all(2), policy=FixedK(2), lookup=2,
                                                      max_new_tokens=2, do_sample=True, generator=g).new_tokens)
    assert chi_square_p_value(counts, dist) > 1e-3
    assert total_variation(counts, dist) < tv_bound(dist)


@pytest.mark.parametrize("name", ["on-the-fly", "in-context", "knapsack"])
def test_skip_strategies_sample_exactly(target, name):
    """A strategy changes the draft's set from call to call (it acts at every chance, budget 1, and carries what it
    learned); every sample is still exact: the two-token distribution of the target."""
    costs = {"attention_ms": [0.3, 0.3], "mlp_ms": [0.1, 0.1], "fixed_ms": 0.3,
             "verify_ms": [1.0 + 0.1 * k for k in range(13)]}
    strategy = {"on-the-fly": lambda: OnTheFlyStrategy(SkipSet(attention=[1], mlp=[0]), every=1, window=2, margin=1,
                                                       budget=1.0, trust_initial=False, trial_tokens=1),
                "in-context": lambda: InContextStrategy(SkipSet(attention=[1], mlp=[1]), every=1, budget=1.0,
                                                        margin=0.0, redo_below=1.0, trial_tokens=1),
                "knapsack": lambda: KnapsackStrategy(costs, [0.5, 0.2, 0.1, 0.3], anchor=SkipSet(mlp=[0]),
                                                     anchor_alpha=0.8, min_tokens=1, margin=0.0)}[name]()
    warp, sets = WARPS[1], set()

    def sample_two(g):
        out = speculative_generate(target, PROMPT, skip=strategy, policy=FixedK(1), max_new_tokens=2, do_sample=True,
                                   temperature=warp.temperature, top_k=warp.top_k, top_p=warp.top_p, generator=g)
        sets.update(s.skip for s in out.trace.steps if s.skip is not None)
        return out.new_tokens

    dist = exact_two_token_distribution(target, warp)
    counts = empirical(sample_two)
    acted = {"on-the-fly": strategy.state().get("rounds"), "in-context": strategy.state().get("n_dp"),
             "knapsack": strategy.state().get("sets_tried")}[name]
    assert acted and strategy.ledger.select_s > 0, name          # it scored sets between and inside the calls
    first = strategy.anchor if name == "knapsack" else strategy.initial
    assert len(sets | {first}) > 1, name                         # and drafted with sets other than its first
    assert chi_square_p_value(counts, dist) > 1e-3
    assert total_variation(counts, dist) < tv_bound(dist)


def test_wrong_resampling_rule_fails_the_same_test(target, draft, monkeypatch):
    """Resampling from p instead of normalise(max(0, p - q)) after a rejection is biased: caught."""
    warp = WARPS[0]
    dist = exact_two_token_distribution(target, warp)
    monkeypatch.setattr(verify_module, "residual_distribution", lambda p, q: p)
    counts = empirical(lambda g: speculative_generate(target, PROMPT, draft_model=draft, policy=FixedK(2),
                                                      max_new_tokens=2, do_sample=True, generator=g).new_tokens)
    assert chi_square_p_value(counts, dist) < 1e-3
    assert total_variation(counts, dist) > tv_bound(dist)


def test_top_k_and_top_p_warping():
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0])
    probs = Warp(True, 1.0, top_k=2).probs(logits)
    assert probs[2:].sum() == 0 and torch.isclose(probs.sum(), torch.tensor(1.0))
    full = torch.softmax(logits, -1)           # 0.636, 0.234, 0.086, ...
    probs = Warp(True, 1.0, top_p=0.8).probs(logits)
    assert (probs[:2] > 0).all() and probs[2:].sum() == 0     # 0.636 < 0.8, so the second token stays
    assert torch.allclose(probs[:2], full[:2] / full[:2].sum())
    assert torch.equal(Warp(True, 1.0, top_p=0.5).probs(logits) > 0, torch.tensor([True, False, False, False, False]))
