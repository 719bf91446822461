"""int8 draft weights: each stand-in computes its linear layer to int8 precision, the swap always undoes itself,
the copies follow the model's weights, and decoding with them is still lossless (greedy: 0 mismatches with the
plain loop on every architecture; sampling: tests/core/test_sampling.py)."""
import random

import pytest
import torch
from torch import nn

from labkit import FixedK, SkipSet, StaticThreshold, autoregressive_generate, speculative_generate
from labkit.core.draft_weights import Int8DraftWeights, Int8Linear, draft_weights
from labkit.core.strategies import InContextStrategy, OnTheFlyStrategy

from tiny_models import ARCHITECTURES, tiny_model

N_LAYERS, VOCAB = 4, 97


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param, n_layers=N_LAYERS, vocab_size=VOCAB)


@pytest.mark.parametrize("bias", [False, True])
def test_int8_linear_is_the_linear_to_int8_precision(bias):
    torch.manual_seed(0)
    linear = nn.Linear(64, 48, bias=bias)
    x = torch.randn(3, 5, 64)                                                    # (B, T, K)
    y, y8 = linear(x), Int8Linear(linear)(x)
    assert y8.shape == y.shape and y8.dtype == y.dtype
    err = (y8 - y).abs().max() / y.abs().max()
    assert 0 < err < 0.03                                                        # rounded, and only slightly
    assert Int8Linear(linear).weight.dtype == torch.int8


def test_swap_covers_every_linear_and_always_undoes_itself(model):
    weights = Int8DraftWeights(model)
    before = [(n, id(m)) for n, m in model.named_modules()]
    n_linear = sum(isinstance(m, nn.Linear) for m in model.modules())
    with weights.swapped():
        assert not any(isinstance(m, nn.Linear) for m in model.modules())
        assert sum(isinstance(m, Int8Linear) for m in model.modules()) == n_linear
    with pytest.raises(KeyError):
        with weights.swapped():
            raise KeyError("inside a draft")
    assert [(n, id(m)) for n, m in model.named_modules()] == before


def test_draft_logits_differ_a_little_from_the_model_s(model):
    ids = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        exact = model(ids).logits
        with draft_weights(model, "int8").swapped():
            drafted = model(ids).logits
    assert not torch.equal(drafted, exact)
    assert (drafted.argmax(-1) == exact.argmax(-1)).float().mean() > 0.8


def test_built_once_and_rebuilt_when_the_weights_change():
    model = tiny_model("llama", n_layers=2, vocab_size=VOCAB)
    first = draft_weights(model, "int8")
    assert draft_weights(model, "int8") is first and draft_weights(model, None) is None
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.mul_(2.0)
    second = draft_weights(model, "int8")
    assert second is not first and second.current()


def test_bad_arguments_name_themselves(model):
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="draft_weights"):
        speculative_generate(model, ids, skip=SkipSet(mlp=[1]), draft_weights="int4", max_new_tokens=3)
    with pytest.raises(ValueError, match="draft_weights"):
        speculative_generate(model, ids, draft_model=model, draft_weights="int8", max_new_tokens=3)


@pytest.mark.parametrize("seed", range(4))
def test_greedy_with_int8_drafts_matches_plain_decoding(model, seed):
    """Static sets, strategies and prompt lookup with int8 drafts: 0 mismatches with plain greedy decoding."""
    rng = random.Random(seed)
    for call in range(3):
        ids = torch.randint(0, VOCAB, (1, rng.choice([1, 4, 11])),
                            generator=torch.Generator().manual_seed(seed * 7 + call))
        max_new = rng.choice([3, 9, 24])
        expected = autoregressive_generate(model, ids, max_new).sequences    # == generate(): test_decoding.py
        skip = rng.choice([SkipSet(mlp=[1, 2]), SkipSet(attention=[1, 3], mlp=[0]), SkipSet(),
                           OnTheFlyStrategy(SkipSet(attention=[2], mlp=[1]), every=1, budget=1.0, seed=seed,
                                            trust_initial=False, trial_tokens=1),
                           InContextStrategy(SkipSet(attention=[3], mlp=[2]), every=1, budget=1.0, redo_below=1.0,
                                             trial_tokens=1)])
        policy = rng.choice([FixedK(rng.randint(1, 6)), StaticThreshold(rng.choice([0.0, 0.5]), 8)])
        out = speculative_generate(model, ids, skip=skip, policy=policy, max_new_tokens=max_new,
                                   lookup=rng.choice([0, 3]), draft_weights="int8")
        assert torch.equal(out.sequences, expected), (skip, policy)
