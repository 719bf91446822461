"""Early-exit drafting: lossless on every architecture, and the verify really reuses the draft's early layers."""
import random

import pytest
import torch

from labkit import (
    AdaptiveThreshold,
    EarlyExitDrafter,
    FixedK,
    StaticThreshold,
    TargetConfidenceGate,
    speculative_generate,
)
from labkit.core.cache import layer_lengths, new_cache
from labkit.core.decoding import prefill
from labkit.core.drafters import LookupDrafter
from labkit.core.early_exit import exit_skip_set
from labkit.core.forward import eos_set
from labkit.core.sampling import Warp
from labkit.core.skip import decoder_layers
from labkit.core.state import DecodingState
from labkit.core.verify import target_forward

from tiny_models import ARCHITECTURES, tiny_model

N_LAYERS = 4
VOCAB = 97


def hf_greedy(model, ids, max_new_tokens, eos=None):
    return model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos, pad_token_id=0)


def random_policy(rng: random.Random):
    inner = rng.choice([FixedK(rng.randint(1, 6)), StaticThreshold(rng.choice([0.0, 0.2, 0.5]), rng.randint(1, 8)),
                        AdaptiveThreshold(max_draft=rng.randint(1, 12), initial_threshold=rng.choice([0.1, 0.6]))])
    return TargetConfidenceGate(inner, rng.choice([0.3, 0.6])) if rng.random() < 0.4 else inner


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param, n_layers=N_LAYERS, vocab_size=VOCAB)


@pytest.mark.parametrize("seed", range(4))
def test_early_exit_matches_transformers_greedy(model, seed):
    rng = random.Random(seed)
    ids = torch.randint(0, VOCAB, (1, rng.choice([1, 2, 5, 17])), generator=torch.Generator().manual_seed(seed))
    max_new = rng.choice([1, 3, 7, 24])
    expected = hf_greedy(model, ids, max_new)
    for exit_layer in range(1, N_LAYERS):
        policy = random_policy(rng)
        out = speculative_generate(model, ids, drafter=EarlyExitDrafter(model, exit_layer), policy=policy,
                                   max_new_tokens=max_new)
        assert torch.equal(out.sequences, expected), (exit_layer, policy)
        assert out.trace.n_emitted == max_new


def test_early_exit_stops_at_eos_and_at_the_budget(model):
    ids = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(101))
    free = hf_greedy(model, ids, 30)[0, 4:].tolist()
    eos = free[5]
    expected = hf_greedy(model, ids, 30, eos=eos)
    for exit_layer in (1, 3):
        for policy in (FixedK(8), StaticThreshold(0.0, 12)):
            out = speculative_generate(model, ids, drafter=EarlyExitDrafter(model, exit_layer), policy=policy,
                                       max_new_tokens=30, eos_token_id=eos)
            assert torch.equal(out.sequences, expected)
    for max_new in range(0, 10):
        out = speculative_generate(model, ids, drafter=EarlyExitDrafter(model, 2), policy=FixedK(5),
                                   max_new_tokens=max_new)
        assert torch.equal(out.sequences, hf_greedy(model, ids, max_new) if max_new else ids)


@torch.no_grad()   # as speculative_generate runs it
def test_shared_verify_gives_the_full_forwards_logits(model):
    """The draft's own forward (early layers kept from the draft + late layers) == one plain full forward."""
    ids = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(3))

    def fresh_state():
        state = DecodingState(model, new_cache(model), ids[0].tolist(), ids.shape[1], Warp(), eos_set(model, []))
        prefill(model, ids[:, :-1], state.cache)
        return state

    for exit_layer in range(1, N_LAYERS):
        state = fresh_state()
        drafter = EarlyExitDrafter(model, exit_layer)
        draft = drafter.draft(state, 5, FixedK(5))
        lengths = layer_lengths(state.cache)                  # early layers hold t_0..d_{γ-1}, late ones not
        assert (lengths[:exit_layer] == [8 + len(draft)] * exit_layer
                and lengths[exit_layer:] == [8] * (N_LAYERS - exit_layer))
        shared, _ = draft.forward(state, draft)
        assert layer_lengths(state.cache) == [8 + len(draft) + 1] * N_LAYERS
        plain, _ = target_forward(fresh_state(), draft.tokens)
        assert shared.shape == plain.shape == (len(draft) + 1, VOCAB)
        torch.testing.assert_close(shared, plain, rtol=1e-4, atol=1e-4)


def count_tokens(module, counts, key):
    return module.register_forward_hook(lambda m, args, out: counts.__setitem__(key, counts[key] + args[0].shape[1]))


def test_every_layer_reads_each_position_once_per_step():
    """With the cache shared, layer 0 and the last layer process the same tokens: prefill + (d + 1) per step.
    (A verify that re-ran the early layers would make layer 0 read the d drafted tokens twice.)"""
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)
    layers = decoder_layers(model)
    counts = {"first": 0, "last": 0}
    handles = [count_tokens(layers[0], counts, "first"), count_tokens(layers[-1], counts, "last")]
    try:
        ids = torch.randint(0, VOCAB, (1, 6), generator=torch.Generator().manual_seed(0))
        out = speculative_generate(model, ids, drafter=EarlyExitDrafter(model, 2), policy=FixedK(4), max_new_tokens=30)
    finally:
        for h in handles:
            h.remove()
    per_step = sum(s.n_drafted + 1 for s in out.trace.steps)
    assert counts == {"first": 5 + per_step, "last": 5 + per_step}
    assert out.trace.n_drafted > len(out.trace.steps)          # the draft really ran


def test_prompt_lookup_in_front_of_early_exit_is_lossless(model):
    rng = random.Random(5)
    base = [rng.randrange(VOCAB) for _ in range(6)]
    ids = torch.tensor([base + base[:4] + base])
    expected = hf_greedy(model, ids, 20)
    out = speculative_generate(model, ids, drafter=LookupDrafter(4, EarlyExitDrafter(model, 2)), policy=FixedK(3),
                               max_new_tokens=20)
    assert torch.equal(out.sequences, expected)
    assert {s.draft_source for s in out.trace.steps if s.n_drafted} == {"lookup", "model"}


def test_early_exit_draft_is_the_skipped_model():
    """Drafting = the model with every block of layers E..L-1 skipped (the same q as a SelfDrafter)."""
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)
    ids = torch.randint(0, VOCAB, (1, 7), generator=torch.Generator().manual_seed(2))
    a = speculative_generate(model, ids, drafter=EarlyExitDrafter(model, 1), policy=FixedK(3), max_new_tokens=15)
    b = speculative_generate(model, ids, skip=exit_skip_set(N_LAYERS, 1), policy=FixedK(3), max_new_tokens=15)
    assert [s.drafted for s in a.trace.steps] == [s.drafted for s in b.trace.steps]
    assert [q for s in a.trace.steps for q in s.q] == pytest.approx([q for s in b.trace.steps for q in s.q], abs=1e-5)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (N_LAYERS, ValueError), (-1, ValueError), (1.5, TypeError),
                                        (True, TypeError)])
def test_exit_layer_is_checked(bad, error):
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)
    with pytest.raises(error, match="exit_layer"):
        EarlyExitDrafter(model, bad)


def test_model_is_unchanged_after_early_exit():
    model = tiny_model("gemma2", n_layers=N_LAYERS, vocab_size=VOCAB)
    modules_before = [(n, id(m)) for n, m in model.named_modules()]
    ids = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(0))
    before = model(ids).logits
    speculative_generate(model, ids, drafter=EarlyExitDrafter(model, 2), max_new_tokens=10)
    assert [(n, id(m)) for n, m in model.named_modules()] == modules_before
    assert torch.equal(model(ids).logits, before)
    assert not any(layer._forward_hooks for layer in decoder_layers(model))
