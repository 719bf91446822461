"""Medusa heads as a drafter: token-identical greedy output (chain and tree) with random heads on every family, an
exact sampler, h reused from the verify forward equal to h recomputed, save/load and the wrong-model error."""
import random

import pytest
import torch

from labkit.core.decoding import autoregressive_generate, speculative_generate
from labkit.core.medusa import HeadsDrafter, MedusaHeads, lm_logits, model_signature, predecessor_hidden
from labkit.core.policies import FixedK, StaticThreshold
from labkit.core.tree_shapes import MEDUSA_CHOICES
from labkit.measure.lossless import random_heads as random_medusa_heads

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


def random_heads(model, n_heads: int = 3, *, scale: float = 0.5, seed: int = 0) -> MedusaHeads:
    return random_medusa_heads(model, n_heads, scale=scale, seed=seed)


class CheckedDrafter(HeadsDrafter):
    """Checks before every draft that the h kept from the last verify forward is h recomputed from scratch."""

    checked = 0

    def draft(self, state, budget, policy):
        if self.hidden is not None and self.owner is not None and self.owner() is state:
            kept = self.hidden.clone()
            assert torch.allclose(kept, predecessor_hidden(state), atol=1e-4), "h is not the predecessor's"
            CheckedDrafter.checked += 1
        return super().draft(state, budget, policy)


def test_a_new_head_is_the_lm_head_and_the_lm_head_is_the_model_s():
    model = tiny_model("gemma2")                                         # a soft cap on the logits
    heads = MedusaHeads(model.config.hidden_size, 2)
    out = model(torch.tensor([[3, 1, 4, 1, 5]]), output_hidden_states=True)
    h = out.hidden_states[-1][0]
    assert torch.allclose(lm_logits(model, h), out.logits[0], atol=1e-5)
    logits = heads.logits(model, h)
    assert logits.shape == (5, 2, model.config.vocab_size)
    assert torch.allclose(logits[:, 1], out.logits[0], atol=1e-5)


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("seed", range(2))
def test_greedy_output_is_plain_decoding_s_with_random_heads(arch, seed):
    rng = random.Random(seed)
    model = tiny_model(arch, n_layers=3, seed=seed)
    heads = random_heads(model, rng.randint(1, 4), seed=seed)
    for trial in range(4):
        prompt = torch.tensor([[rng.randrange(97) for _ in range(rng.choice([1, 2, rng.randint(3, 12)]))]])
        n_new = rng.randint(1, 30)
        eos = [rng.randrange(97)] if rng.random() < 0.5 else []
        choices = MEDUSA_CHOICES if trial % 2 and heads.n_heads == 4 else None
        policy = rng.choice([FixedK(rng.randint(1, 5)), StaticThreshold(threshold=rng.random())])
        drafter = CheckedDrafter(model, heads, choices)
        out = speculative_generate(model, prompt, drafter=drafter, policy=policy, max_new_tokens=n_new,
                                   eos_token_id=eos)
        plain = autoregressive_generate(model, prompt, n_new, eos_token_id=eos)
        assert out.sequences.equal(plain.sequences), (prompt, n_new, eos, choices)
        assert all(len(s.drafted) <= heads.n_heads or choices for s in out.trace.steps)


@pytest.mark.parametrize("choices", [None, MEDUSA_CHOICES])
def test_the_kept_h_is_the_recomputed_one_and_the_drafter_is_reusable(choices):
    model = tiny_model("llama", n_layers=2)
    drafter = CheckedDrafter(model, random_heads(model, 4), choices)
    CheckedDrafter.checked = 0
    for prompt in ([[5, 6, 7, 8]], [[9]], [[1, 2]]):                    # a second call starts afresh
        out = speculative_generate(model, torch.tensor(prompt), drafter=drafter, policy=FixedK(4), max_new_tokens=20)
        assert out.sequences.equal(autoregressive_generate(model, torch.tensor(prompt), 20).sequences)
    assert CheckedDrafter.checked > 10


def test_heads_that_predict_the_future_are_accepted():
    """Heads that know the greedy text (a model that repeats one token) are accepted in full."""
    model = tiny_model("llama", n_layers=2)
    with torch.no_grad():
        model.get_output_embeddings().weight.zero_()
        model.get_output_embeddings().weight[7].fill_(1.0)            # every position: argmax 7 (the norm is > 0)
        model.get_output_embeddings().weight[7, 1::2] = 0.0
    heads = MedusaHeads(model.config.hidden_size, 3)
    out = speculative_generate(model, torch.tensor([[1, 2, 3]]), drafter=HeadsDrafter(model, heads),
                               policy=FixedK(3), max_new_tokens=17)
    assert out.new_tokens == [7] * 17
    assert [s.n_accepted for s in out.trace.steps[1:-1]] == [3] * (len(out.trace.steps) - 2)


@pytest.fixture(scope="module")
def target():
    return sharp_tiny_model(n_layers=2, seed=3)


@pytest.mark.parametrize("choices", [None, MEDUSA_CHOICES])
@pytest.mark.parametrize("warp", WARPS, ids=["t1", "t0.7-topk-topp"])
def test_sampling_draws_exactly_from_p(target, choices, warp):
    heads = random_heads(target, 4, scale=1.0, seed=5)
    dist = exact_two_token_distribution(target, warp, n_tokens=3)
    drafter = HeadsDrafter(target, heads, choices)
    counts = empirical(lambda g: speculative_generate(
        target, PROMPT, drafter=drafter, policy=FixedK(3), max_new_tokens=3, do_sample=True, generator=g,
        temperature=warp.temperature, top_k=warp.top_k, top_p=warp.top_p).new_tokens, 3)
    assert chi_square_p_value(counts, dist) > 1e-3
    assert total_variation(counts, dist) < tv_bound(dist)


def test_save_load_round_trip_and_the_wrong_model(tmp_path):
    model, other = tiny_model("llama", seed=0), tiny_model("llama", seed=1)
    heads = random_heads(model, 3)
    heads.signature, heads.info = model_signature(model), {"note": "test"}
    loaded = MedusaHeads.load(heads.save(tmp_path / "heads"), model)
    assert (loaded.n_heads, loaded.hidden_size, loaded.signature, loaded.info) == (3, 32, heads.signature,
                                                                                   {"note": "test"})
    h = torch.randn(5, 32)
    assert torch.equal(loaded.logits(model, h), heads.logits(model, h))
    assert model_signature(model) == model_signature(tiny_model("llama", seed=0)) != model_signature(other)
    with pytest.raises(ValueError, match="another model"):
        MedusaHeads.load(tmp_path / "heads", other)
    with pytest.raises(ValueError, match="another model"):
        HeadsDrafter(other, loaded)
    with pytest.raises(ValueError, match="hidden size"):
        HeadsDrafter(tiny_model("llama", hidden_size=16), MedusaHeads(32, 2))
    with pytest.raises(FileNotFoundError, match="train-heads"):
        MedusaHeads.load(tmp_path / "nothing")


def test_clear_errors():
    model = tiny_model("llama", n_layers=2)
    with pytest.raises(TypeError, match="heads must be"):
        HeadsDrafter(model, object())
    with pytest.raises(ValueError, match="depth 4"):
        HeadsDrafter(model, MedusaHeads(32, 3), MEDUSA_CHOICES)
    with pytest.raises(ValueError, match="prefixes"):
        HeadsDrafter(model, MedusaHeads(32, 3), ((0, 0),))
    with pytest.raises(ValueError, match="n_heads"):
        MedusaHeads(32, 0)
