"""Parallel decoding measured beside the plain loop: forwards per token, interleaved wall clock, identity checks."""
import pytest
import torch

from labkit import SkipSet, autoregressive_generate, jacobi_generate, speculative_generate
from labkit.core.decoding import GenerationResult
from labkit.measure.comparisons import parallel as par

from tiny_models import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4, vocab_size=97)


def test_target_forwards(model):
    ids = torch.tensor([[1, 2, 3]])
    assert par.target_forwards(autoregressive_generate(model, ids, 9)) == 9
    jac = jacobi_generate(model, ids, 9, block_size=4)
    assert par.target_forwards(jac) == len(jac.trace.iterations)
    spec = speculative_generate(model, ids, skip=SkipSet(mlp=[1]), max_new_tokens=9)
    assert par.target_forwards(spec) == len(spec.trace.steps)


def test_jacobi_statistics(model):
    runs = [jacobi_generate(model, torch.tensor([[i, 5, 9]]), 20, block_size=6) for i in range(3)]
    stats = par.jacobi_statistics([r.trace for r in runs])
    its = [it for r in runs for it in r.trace.iterations]
    assert stats["tokens"] == 60 and stats["iterations"] == len(its)
    assert stats["iterations_per_token"] == pytest.approx(len(its) / 60)
    assert stats["one_token_share"] == pytest.approx(sum(it.n_fixed == 1 for it in its) / len(its))
    assert stats["guess_right_rate"] == pytest.approx((60 - len(its)) / sum(it.width - 1 for it in its))
    with pytest.raises(ValueError):
        par.jacobi_statistics([])


def test_compare_decoders_checks_identity_and_counts_forwards(model):
    ids = [torch.tensor([[1, 2, 3, 4]]), torch.tensor([[8, 8]])]
    methods = par.decoders(model, SkipSet(mlp=[2]), block_size=5, inits=("pad", "self-draft"), lookup=3)
    assert list(methods)[0] == "plain loop" and "prompt lookup" in methods and "gauss-seidel, self-draft" in methods

    def wrong(x, n):                                   # a decoder that is not greedy decoding
        out = autoregressive_generate(model, x, n)
        return GenerationResult(out.sequences.flip(1), None, out.prompt_length, out.elapsed_s)
    frame, last = par.compare_decoders(ids, {**methods, "wrong": wrong}, max_new_tokens=12, repeats=2,
                                       progress=False)
    assert frame.loc["plain loop", "speedup"] == 1.0 and frame.loc["plain loop", "forwards_per_token"] == 1.0
    assert frame.drop(index="wrong")["identical"].all() and not frame.loc["wrong", "identical"]
    assert (frame["forwards_per_token"] <= 1.0).all() and (frame["ms_min"] <= frame["ms_per_token"]).all()
    assert len(last["jacobi, pad"]) == 2
    jac = last["jacobi, pad"]
    expected = sum(len(r.trace.iterations) for r in jac) / sum(len(r.new_tokens) for r in jac)
    assert frame.loc["jacobi, pad", "forwards_per_token"] == pytest.approx(expected)      # deterministic per repeat
    with pytest.raises(ValueError, match="repeats"):
        par.compare_decoders(ids, methods, repeats=0)
