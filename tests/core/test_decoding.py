"""Greedy self-speculative decoding is token-identical to transformers' own generate(); a bad argument to
speculative_generate gets an error that names it."""
import random

import pytest
import torch

from labkit import AdaptiveThreshold, FixedK, SkipSet, StaticThreshold, autoregressive_generate, speculative_generate
from labkit.core.strategies import InContextStrategy, KnapsackStrategy, OnTheFlyStrategy, StaticStrategy

from tiny_models import ARCHITECTURES, tiny_model

N_LAYERS = 4
VOCAB = 97


def hf_greedy(model, ids, max_new_tokens, eos=None):
    out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos, pad_token_id=0)
    return out


def random_skip(rng: random.Random) -> SkipSet:
    kind = rng.random()
    if kind < 0.15:
        return SkipSet.all(N_LAYERS)
    if kind < 0.3:
        return SkipSet(attention=[0])
    mask = [rng.random() < 0.5 for _ in range(2 * N_LAYERS)]
    return SkipSet.from_mask(mask)


def random_policy(rng: random.Random):
    return rng.choice([
        FixedK(rng.randint(1, 6)),
        StaticThreshold(rng.choice([0.0, 0.2, 0.5, 0.9]), rng.randint(1, 8)),
        AdaptiveThreshold(max_draft=rng.randint(1, 12), initial_threshold=rng.choice([0.1, 0.6])),
    ])


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param, n_layers=N_LAYERS, vocab_size=VOCAB)


@pytest.mark.parametrize("seed", range(6))
def test_greedy_matches_transformers(model, seed):
    rng = random.Random(seed)
    prompt_len = rng.choice([1, 2, 5, 17])
    ids = torch.randint(0, VOCAB, (1, prompt_len), generator=torch.Generator().manual_seed(seed))
    max_new = rng.choice([1, 3, 7, 24])
    expected = hf_greedy(model, ids, max_new)
    assert torch.equal(autoregressive_generate(model, ids, max_new).sequences, expected)
    for _ in range(3):
        skip, policy = random_skip(rng), random_policy(rng)
        out = speculative_generate(model, ids, skip=skip, policy=policy, max_new_tokens=max_new)
        assert torch.equal(out.sequences, expected), (skip, policy)
        assert out.trace.n_emitted == max_new


@pytest.mark.parametrize("seed", range(3))
def test_eos_inside_a_draft_stops_where_plain_decoding_stops(model, seed):
    ids = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(100 + seed))
    free = hf_greedy(model, ids, 30)[0, 4:].tolist()
    eos = free[3 + seed]                       # a token the greedy path really produces
    expected = hf_greedy(model, ids, 30, eos=eos)
    assert expected[0, -1].item() == eos and expected.shape[1] < 4 + 30
    for policy in (FixedK(8), StaticThreshold(0.0, 12), AdaptiveThreshold()):
        for skip in (SkipSet(), SkipSet(mlp=[1, 2]), SkipSet.all(N_LAYERS)):
            out = speculative_generate(model, ids, skip=skip, policy=policy, max_new_tokens=30, eos_token_id=eos)
            assert torch.equal(out.sequences, expected)
    assert torch.equal(autoregressive_generate(model, ids, 30, eos_token_id=eos).sequences, expected)


def test_budget_ending_mid_draft(model):
    ids = torch.randint(0, VOCAB, (1, 6), generator=torch.Generator().manual_seed(7))
    for max_new in range(0, 12):
        expected = hf_greedy(model, ids, max_new) if max_new else ids
        out = speculative_generate(model, ids, skip=SkipSet(), policy=FixedK(5), max_new_tokens=max_new)
        assert torch.equal(out.sequences, expected)
        assert all(s.n_drafted <= 5 for s in out.trace.steps)


def test_separate_draft_model_is_lossless(model):
    arch = type(model).__name__.replace("ForCausalLM", "").lower()
    draft = tiny_model(arch, n_layers=2, vocab_size=VOCAB, seed=123)
    for seed in range(4):
        ids = torch.randint(0, VOCAB, (1, 1 + 5 * seed), generator=torch.Generator().manual_seed(seed))
        expected = hf_greedy(model, ids, 25)
        for policy in (FixedK(3), StaticThreshold(0.3, 6), AdaptiveThreshold()):
            out = speculative_generate(model, ids, draft_model=draft, policy=policy, max_new_tokens=25)
            assert torch.equal(out.sequences, expected)


def test_no_skip_draft_is_always_accepted():
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)
    ids = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(0))
    out = speculative_generate(model, ids, skip=SkipSet(), policy=FixedK(4), max_new_tokens=20)
    s = out.trace.summary()
    assert s["acceptance_rate"] == 1.0
    assert s["tokens_per_step"] == 5.0
    assert [st.next_kind for st in out.trace.steps] == ["bonus"] * 4


def test_prompt_lookup_drafting_is_lossless(model):
    rng = random.Random(5)
    for _ in range(3):
        base = [rng.randrange(VOCAB) for _ in range(6)]
        ids = torch.tensor([base + base[:4] + base])                 # repeated n-grams: lookup fires
        expected = hf_greedy(model, ids, 20)
        for skip in (SkipSet(), SkipSet(mlp=[1, 2]), SkipSet.all(N_LAYERS)):
            out = speculative_generate(model, ids, skip=skip, policy=FixedK(3), max_new_tokens=20, lookup=4)
            assert torch.equal(out.sequences, expected)
            assert any(st.draft_source == "lookup" for st in out.trace.steps)


def random_strategy(rng: random.Random):
    """A skip strategy that acts at every opportunity (budget 1): its side computations run between steps."""
    start = random_skip(rng)
    costs = {"attention_ms": [0.3] * N_LAYERS, "mlp_ms": [0.1] * N_LAYERS, "fixed_ms": 0.3,
             "verify_ms": [1.9 + 0.1 * k for k in range(13)]}
    return rng.choice([
        StaticStrategy(start),
        OnTheFlyStrategy(start, every=rng.randint(1, 3), window=rng.choice([1, 4, 16]), budget=1.0,
                         seed=rng.randint(0, 9)),
        InContextStrategy(start, n_skipped=rng.randint(0, 2 * N_LAYERS), every=rng.randint(1, 3), budget=1.0,
                          redo_below=1.0),
        KnapsackStrategy(costs, [rng.random() for _ in range(2 * N_LAYERS)], anchor=start, anchor_alpha=rng.random(),
                         min_tokens=rng.randint(1, 8), margin=rng.choice([0.0, 0.05])),
    ])


@pytest.mark.parametrize("seed", range(6))
def test_skip_strategies_match_transformers(model, seed):
    """Every strategy, with and without prompt lookup, carried across calls: 0 mismatches with plain greedy."""
    rng = random.Random(1000 + seed)
    strategy = random_strategy(rng)
    for call in range(3):
        prompt_len = rng.choice([1, 2, 5, 17])
        ids = torch.randint(0, VOCAB, (1, prompt_len), generator=torch.Generator().manual_seed(10 * seed + call))
        if call == 2:
            ids = torch.cat([ids, ids, ids], dim=1)                          # repeats: prompt lookup fires
        max_new = rng.choice([1, 3, 7, 24])
        expected = hf_greedy(model, ids, max_new)
        out = speculative_generate(model, ids, skip=strategy, policy=random_policy(rng), max_new_tokens=max_new,
                                   lookup=rng.choice([0, 3]))
        assert torch.equal(out.sequences, expected), (strategy.name, strategy.state())
        assert out.trace.n_emitted == max_new


@pytest.fixture(scope="module")
def small_context_model():
    """A Llama with a context of 128 positions (the parametrized ``model`` above has 256)."""
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
def test_speculative_argument_errors(small_context_model, kwargs, error, words):
    with pytest.raises(error, match=words):
        speculative_generate(small_context_model, IDS, **kwargs)
