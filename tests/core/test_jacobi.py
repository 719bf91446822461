"""Jacobi / Gauss-Seidel parallel decoding is token-identical to plain greedy decoding, never needs more
iterations than tokens, and records every iteration consistently."""
import math
import random

import pytest
import torch

from labkit import SkipSet, autoregressive_generate, jacobi_generate
from labkit.core.jacobi import INITS, METHODS, JacobiTrace, fixed_prefix

from tiny_models import ARCHITECTURES, tiny_model

N_LAYERS = 4
VOCAB = 97


def hf_greedy(model, ids, max_new_tokens, eos=None):
    return model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos, pad_token_id=0)


def random_skip(rng: random.Random) -> SkipSet:
    kind = rng.random()
    if kind < 0.15:
        return SkipSet.all(N_LAYERS)
    if kind < 0.3:
        return SkipSet()
    return SkipSet.from_mask([rng.random() < 0.5 for _ in range(2 * N_LAYERS)])


def run(model, ids, max_new, method, init, block_size, rng=None, **kw):
    skip = random_skip(rng or random.Random(0)) if init == "self-draft" else None
    return jacobi_generate(model, ids, max_new, block_size=block_size, method=method, init=init, skip=skip, **kw)


def check_trace(out, max_new):
    """Iterations never exceed tokens, and every record agrees with the output."""
    trace = out.trace
    assert isinstance(trace, JacobiTrace)
    new = out.new_tokens
    assert trace.n_emitted == len(new) <= max_new
    assert len(trace.iterations) <= len(new)                       # at most one iteration per token
    position = out.prompt_length
    for it in trace.iterations:
        assert it.position == position
        assert 1 <= it.n_emitted <= it.n_fixed <= it.width <= trace.block_size
        assert it.n_fixed == fixed_prefix(it.guess, it.output)
        assert out.sequences[0, position: position + it.n_emitted].tolist() == it.output[: it.n_emitted]
        assert it.guess[: it.n_fixed - 1] == it.output[: it.n_fixed - 1]    # the matched guesses were right
        assert 0 <= it.n_initialised <= it.width and it.forward_s > 0 and it.init_s >= 0
        position += it.n_emitted
    assert position == out.sequences.shape[1]


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param, n_layers=N_LAYERS, vocab_size=VOCAB)


@pytest.mark.parametrize("seed", range(5))
def test_matches_plain_greedy_decoding(model, seed):
    rng = random.Random(seed)
    prompt_len = rng.choice([1, 2, 5, 17])
    ids = torch.randint(0, VOCAB, (1, prompt_len), generator=torch.Generator().manual_seed(seed))
    max_new = rng.choice([1, 3, 7, 24, 40])
    expected = hf_greedy(model, ids, max_new)
    assert torch.equal(autoregressive_generate(model, ids, max_new).sequences, expected)
    for method in METHODS:
        for init in INITS:
            block_size = rng.choice([1, 2, 3, 5, 8, 16, 64])
            out = run(model, ids, max_new, method, init, block_size, rng)
            assert torch.equal(out.sequences, expected), (method, init, block_size)
            check_trace(out, max_new)


@pytest.mark.parametrize("seed", range(3))
def test_eos_inside_a_block_stops_where_plain_decoding_stops(model, seed):
    ids = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(100 + seed))
    free = hf_greedy(model, ids, 30)[0, 4:].tolist()
    eos = free[3 + seed]                                           # a token the greedy path really produces
    expected = hf_greedy(model, ids, 30, eos=eos)
    assert expected[0, -1].item() == eos and expected.shape[1] < 4 + 30
    for method in METHODS:
        for init in INITS:
            for block_size in (3, 8, 40):
                out = run(model, ids, 30, method, init, block_size, random.Random(seed), eos_token_id=eos)
                assert torch.equal(out.sequences, expected), (method, init, block_size)
                check_trace(out, 30)


def test_budget_ending_inside_a_block(model):
    ids = torch.randint(0, VOCAB, (1, 6), generator=torch.Generator().manual_seed(7))
    full = hf_greedy(model, ids, 12)
    for max_new in range(0, 13):
        expected = full[:, : 6 + max_new]
        for method in METHODS:
            for init in INITS:
                out = run(model, ids, max_new, method, init, 5)
                assert torch.equal(out.sequences, expected), (max_new, method, init)
                check_trace(out, max_new)


def test_block_size_one_is_plain_decoding():
    """A sweep that updates one token at a time from the ones before it is greedy decoding: 1 iteration per token."""
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    for method in METHODS:
        out = jacobi_generate(model, ids, 20, block_size=1, method=method)
        assert out.trace.summary()["iterations"] == 20
        assert out.trace.summary()["iterations_per_token"] == 1.0


@pytest.mark.parametrize("method", METHODS)
def test_a_perfect_guess_converges_in_one_iteration_per_block(method):
    """Self-drafting with nothing skipped guesses the target's own greedy tokens: each block is exact at once."""
    model = tiny_model("qwen2", n_layers=N_LAYERS, vocab_size=VOCAB)
    ids = torch.tensor([[9, 8, 7, 6]])
    out = jacobi_generate(model, ids, 22, block_size=5, method=method, init="self-draft", skip=SkipSet())
    assert torch.equal(out.sequences, hf_greedy(model, ids, 22))
    assert [it.n_fixed for it in out.trace.iterations] == [5, 5, 5, 5, 2]
    assert all(not any(it.changed) for it in out.trace.iterations)


def test_gauss_seidel_solves_one_block_at_a_time():
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)
    ids = torch.tensor([[2, 7, 1, 8]])
    out = jacobi_generate(model, ids, 23, block_size=6, method="gauss-seidel")
    iterations = out.trace.iterations
    starts = {}
    for it in iterations:
        starts.setdefault(it.block, it.position)
        end = starts[it.block] + (6 if it.block < 3 else 5)
        assert it.position + it.width == end                          # the iterate never reaches past its block
        assert it.n_initialised == (it.width if it.position == starts[it.block] else 0)
    assert sorted(starts) == [0, 1, 2, 3]
    assert [starts[b] for b in range(4)] == [4, 10, 16, 22]
    jac = jacobi_generate(model, ids, 23, block_size=6, method="jacobi").trace.iterations
    assert all(it.width == min(6, 23 - (it.position - 4)) for it in jac)      # the window always holds 6 slots
    assert all(it.block == 0 for it in jac)


def test_unfixed_slots_carry_over_as_the_next_guess():
    """Jacobi: y^(k+1) = F(y^(k)): what the last iteration computed for a slot it did not fix is the next guess."""
    model = tiny_model("mistral", n_layers=N_LAYERS, vocab_size=VOCAB)
    ids = torch.tensor([[11, 12, 13]])
    for method in METHODS:
        its = jacobi_generate(model, ids, 30, block_size=7, method=method, init="pad").trace.iterations
        for prev, it in zip(its, its[1:]):
            carried = prev.output[prev.n_fixed:]
            assert it.guess[: len(carried)] == carried[: it.width]
            assert it.guess[len(carried):] == [0] * (it.width - len(carried))           # new slots: pad


def test_fixed_prefix_rule():
    assert fixed_prefix([5, 6, 7], [1, 2, 3]) == 1            # slot 1 depends on nothing unknown
    assert fixed_prefix([5, 6, 7], [5, 2, 3]) == 2
    assert fixed_prefix([5, 6, 7], [5, 6, 3]) == 3            # the last guess is never read: all slots exact
    assert fixed_prefix([5, 6, 7], [5, 6, 7]) == 3
    assert fixed_prefix([4], [9]) == 1


def test_summary_and_frame():
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)
    out = jacobi_generate(model, torch.tensor([[1, 2, 3]]), 25, block_size=4, init="repeat")
    s = out.trace.summary()
    n = len(out.trace.iterations)
    assert s["iterations"] == n and s["tokens"] == 25
    assert math.isclose(s["iterations_per_token"], n / 25) and math.isclose(s["tokens_per_iteration"], 25 / n)
    assert s["matched"] == 25 - n                        # every iteration commits its matched guesses + 1
    frame = out.trace.to_frame()
    assert len(frame) == sum(it.width for it in out.trace.iterations)
    assert frame["fixed"].sum() == sum(it.n_fixed for it in out.trace.iterations)
    assert frame["changed"].sum() == sum(sum(it.changed) for it in out.trace.iterations)


def test_model_is_unchanged_after_self_drafting():
    model = tiny_model("gemma2", n_layers=N_LAYERS, vocab_size=VOCAB)
    modules_before = [(n, id(m)) for n, m in model.named_modules()]
    ids = torch.tensor([[5, 6, 7, 8]])
    before = model(ids).logits
    jacobi_generate(model, ids, 12, init="self-draft", skip=SkipSet(attention=[0, 2], mlp=[1, 3]))
    assert [(n, id(m)) for n, m in model.named_modules()] == modules_before
    assert torch.equal(model(ids).logits, before)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(block_size=0), ValueError, "block_size"),
    (dict(block_size="8"), TypeError, "block_size"),
    (dict(block_size=True), TypeError, "block_size"),
    (dict(method="gs"), ValueError, "method"),
    (dict(init="zeros"), ValueError, "init"),
    (dict(init="self-draft"), ValueError, "skip"),
    (dict(init="pad", skip=SkipSet(mlp=[1])), ValueError, "skip"),
    (dict(init="self-draft", skip=[1, 2]), TypeError, "skip"),
    (dict(init="self-draft", skip=SkipSet(attention=[7])), ValueError, "layer index 7"),
    (dict(pad_token_id=500), ValueError, "pad_token_id"),
    (dict(pad_token_id=1.5), TypeError, "pad_token_id"),
    (dict(max_new_tokens=-2), ValueError, "max_new_tokens"),
    (dict(max_new_tokens=200), ValueError, "context"),
])
def test_argument_errors(kwargs, error, words):
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB, max_positions=128)
    kwargs = {"max_new_tokens": 4, **kwargs}
    with pytest.raises(error, match=words):
        jacobi_generate(model, torch.tensor([[5, 6, 7]]), **kwargs)
