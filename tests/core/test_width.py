"""Width drafts (contextual sparsity and pruning): token-identical greedy output on every family with random
predictors and kept fractions (prompts of one token, EOS mid-step, with and without a skip set), exact sampling by
the chi-square test (a wrong rule caught), the stand-in MLPs equal to the full one at a kept fraction of 1, the
width recorded in the trace, and clear errors."""
import random

import pytest
import torch

import labkit.core.verify as verify_module
from labkit.core.decoding import speculative_generate
from labkit.core.policies import FixedK, StaticThreshold
from labkit.core.skip import SkipSet, decoder_layers, skipping
from labkit.core.width import (
    GatheredMLP,
    PrunedMLP,
    WidthDraftWeights,
    WidthPredictors,
    WidthSet,
    neuron_contributions,
    width_drafter,
)

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
from tiny_models import ARCHITECTURES, tiny_model


def hf_greedy(model, ids, max_new_tokens, eos=None):
    out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos, pad_token_id=0)
    return out


def random_width(rng: random.Random, n_layers: int) -> WidthSet:
    return WidthSet(tuple(rng.choice([0.05, 0.25, 0.5, 0.9, 1.0]) for _ in range(n_layers)),
                    rng.choice(["dynamic", "pruned"]))


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("seed", range(2))
def test_greedy_output_is_generate_s_with_random_predictors_and_fractions(arch, seed):
    rng = random.Random(seed)
    model = tiny_model(arch, n_layers=3, seed=seed)
    predictors = WidthPredictors.random(model, rank=rng.randint(1, 6), seed=seed)
    for trial in range(4):
        width = random_width(rng, 3)
        skip = SkipSet(mlp=[rng.randrange(3)]) if trial == 3 else None          # depth and width combined
        prompt = torch.tensor([[rng.randrange(97) for _ in range(rng.choice([1, 1, rng.randint(2, 12)]))]])
        n_new = rng.randint(1, 30)
        plain = hf_greedy(model, prompt, n_new)
        eos = int(plain[0, prompt.shape[1] + n_new // 2]) if trial % 2 else None     # a token the path produces
        expected = hf_greedy(model, prompt, n_new, eos=eos)
        policy = rng.choice([FixedK(rng.randint(1, 5)), StaticThreshold(threshold=rng.random())])
        out = speculative_generate(model, prompt, drafter=width_drafter(model, predictors, width, skip),
                                   policy=policy, max_new_tokens=n_new, eos_token_id=eos)
        assert out.sequences.equal(expected), (arch, width, skip, prompt, n_new, eos)
        assert all(s.width == width for s in out.trace.steps if s.drafted)


def test_a_kept_fraction_of_one_is_the_full_mlp_and_lower_fractions_change_the_draft():
    model = tiny_model("gemma2", n_layers=2)
    mlp = decoder_layers(model)[0].mlp
    n = mlp.gate_proj.weight.shape[0]
    predictors = WidthPredictors.random(model)
    x = torch.randn(3, 5, model.config.hidden_size)
    full = mlp(x)
    assert torch.allclose(GatheredMLP(mlp, predictors.a[0], predictors.b[0], n)(x), full, atol=1e-5)
    assert torch.allclose(PrunedMLP(mlp, predictors.importance[0], n)(x), full, atol=1e-5)
    assert not torch.allclose(GatheredMLP(mlp, predictors.a[0], predictors.b[0], n // 4)(x), full, atol=1e-3)
    assert not torch.allclose(PrunedMLP(mlp, predictors.importance[0], n // 4)(x), full, atol=1e-3)


def test_the_gathered_mlp_computes_exactly_the_chosen_neurons():
    """A full-rank predictor (A = [1 | 1], B = [gate^T, up^T scaled by the down norms]) scores exactly the true
    contributions: it picks the top-k neurons, and the output is their sum alone."""
    model = tiny_model("llama", n_layers=1)
    mlp = decoder_layers(model)[0].mlp
    x = torch.randn(1, 1, model.config.hidden_size)
    contributions = neuron_contributions(mlp, x[0])[0]
    k = 7
    top = contributions.topk(k).indices
    gate, up, down = mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight
    expected = down[:, top] @ (mlp.act_fn(gate[top] @ x[0, 0]) * (up[top] @ x[0, 0]))
    eye = torch.eye(model.config.hidden_size)
    chooser = GatheredMLP(mlp, torch.cat([eye, eye], 1), torch.stack([gate.T, up.T * down.norm(dim=0)]), k)
    assert torch.allclose(chooser.scores(x[0]), contributions[None], atol=1e-5)
    assert torch.allclose(chooser(x)[0, 0], expected, atol=1e-5)


def test_skipping_wins_over_the_width_stand_in_and_everything_is_restored():
    model = tiny_model("qwen2", n_layers=2)
    own = [layer.mlp for layer in decoder_layers(model)]
    weights = WidthDraftWeights(model, WidthPredictors.random(model), WidthSet((0.5, 0.5)))
    with skipping(model, SkipSet(mlp=[1])), weights.swapped():
        layers = decoder_layers(model)
        assert isinstance(layers[0].mlp, GatheredMLP) and not isinstance(layers[1].mlp, GatheredMLP)
    assert [layer.mlp for layer in decoder_layers(model)] == own
    with pytest.raises(RuntimeError), weights.swapped():
        raise RuntimeError("inside a draft")
    assert [layer.mlp for layer in decoder_layers(model)] == own


@pytest.fixture(scope="module")
def target():
    """A sharp tiny model whose MLPs matter (down projections x 30): a width draft's q is far from p (TV about
    0.25 at the first position), so an inexact rule shows."""
    model = sharp_tiny_model(n_layers=2, seed=3)
    with torch.no_grad():
        for layer in decoder_layers(model):
            layer.mlp.down_proj.weight.mul_(30.0)
    return model


def sample_width(target, kind, warp):
    drafter = width_drafter(target, WidthPredictors.random(target, seed=5), WidthSet((0.05, 0.05), kind))
    return empirical(lambda g: speculative_generate(
        target, PROMPT, drafter=drafter, policy=FixedK(2), max_new_tokens=2, do_sample=True, generator=g,
        temperature=warp.temperature, top_k=warp.top_k, top_p=warp.top_p).new_tokens)


@pytest.mark.parametrize(("kind", "warp"), [("dynamic", WARPS[0]), ("pruned", WARPS[1])], ids=["dynamic-t1",
                                                                                                "pruned-t0.7"])
def test_sampling_draws_exactly_from_p(target, kind, warp):
    dist = exact_two_token_distribution(target, warp)
    counts = sample_width(target, kind, warp)
    assert chi_square_p_value(counts, dist) > 1e-3
    assert total_variation(counts, dist) < tv_bound(dist)


def test_a_wrong_rule_is_caught(target, monkeypatch):
    """Resampling from p itself after a rejection (not from normalise(max(0, p - q))) over-samples the drafted
    tokens: the same test rejects it."""
    monkeypatch.setattr(verify_module, "residual_distribution", lambda p, q: p)
    counts = sample_width(target, "dynamic", WARPS[0])
    assert chi_square_p_value(counts, exact_two_token_distribution(target, WARPS[0])) < 1e-3


def test_save_load_round_trip(tmp_path):
    model = tiny_model("mistral", n_layers=2)
    predictors = WidthPredictors.random(model, rank=3, seed=2)
    loaded = WidthPredictors.load(predictors.save(tmp_path / "p.pt"))
    assert all(torch.equal(x, y) for x, y in zip(loaded.a + loaded.b, predictors.a + predictors.b))
    assert loaded.info == predictors.info


def test_clear_errors():
    model = tiny_model("llama", n_layers=2)
    predictors = WidthPredictors.random(model)
    with pytest.raises(ValueError, match="kept fraction"):
        WidthSet((0.5, 0.0))
    with pytest.raises(TypeError, match="mlp must be"):
        WidthSet(0.5)
    with pytest.raises(ValueError, match="kind"):
        WidthSet((0.5,), "random")
    with pytest.raises(ValueError, match="2 layers"):
        WidthDraftWeights(model, predictors, WidthSet((0.5,)))
    with pytest.raises(ValueError, match="predictors: made for"):
        WidthDraftWeights(model, WidthPredictors.random(tiny_model("llama", n_layers=3)), WidthSet((0.5, 0.5)))
    with pytest.raises(TypeError, match="predictors must be"):
        width_drafter(model, None, WidthSet((0.5, 0.5)))
    assert WidthSet.from_dict(WidthSet((0.5, 1), "pruned").to_dict()) == WidthSet((0.5, 1.0), "pruned")
