"""labkit.core.forward: one model call at explicit positions with the shared cache, and the checks on a call's
inputs (a bad prompt gets a named error from every entry point)."""
import pytest
import torch

from labkit import autoregressive_generate, speculative_generate
from labkit.core.cache import layer_lengths, new_cache
from labkit.core.forward import cache_argument, check_inputs, eos_set, forward_tokens, model_output

from tiny_models import ARCHITECTURES, tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4, vocab_size=97, max_positions=128)


@pytest.mark.parametrize("ids, error, words", [
    (torch.zeros((1, 0), dtype=torch.long), ValueError, "empty"),
    (torch.ones((1, 1, 2), dtype=torch.long), ValueError, "must have shape"),    # (B, T) is a batch: decoded
    (torch.tensor([[1.0, 2.0]]), TypeError, "integer token ids"),
    ([1, 2], TypeError, "LongTensor"),                                          # a list holds prompts
    (torch.tensor([[1, 200]]), ValueError, "vocabulary"),
    (torch.ones((1, 130), dtype=torch.long), ValueError, "context"),
])
def test_prompt_errors(model, ids, error, words):
    with pytest.raises(error, match=words):
        speculative_generate(model, ids, max_new_tokens=1)
    with pytest.raises(error, match=words):
        autoregressive_generate(model, ids, 1)


# -- added with the mirrored layout --------------------------------------------------------------------------
def test_check_inputs_returns_a_long_1_by_t_tensor(model):
    out = check_inputs(model, torch.tensor([4, 5, 6], dtype=torch.int32), 3)
    assert out.dtype == torch.long and out.tolist() == [[4, 5, 6]]
    assert check_inputs(model, torch.ones((1, 120), dtype=torch.long), 8).shape == (1, 120)   # exactly the context
    with pytest.raises(ValueError, match="context of 128"):
        check_inputs(model, torch.ones((1, 120), dtype=torch.long), 9)
    with pytest.raises(ValueError, match="input_ids must have shape"):
        check_inputs(model, torch.ones((1, 1, 2), dtype=torch.long), 1)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        check_inputs(model, torch.tensor([[-1, 2]]), 1)
    with pytest.raises(TypeError, match="max_new_tokens"):
        check_inputs(model, torch.tensor([[1]]), True)


@pytest.mark.parametrize("arch", ARCHITECTURES)
@torch.inference_mode()
def test_feeding_in_pieces_at_explicit_positions_equals_one_forward(arch):
    model = tiny_model(arch, n_layers=2)
    tokens = [3, 14, 15, 92, 65, 35]
    whole = model(torch.tensor([tokens])).logits[0]                                    # (6, V)
    cache = new_cache(model)
    first = forward_tokens(model, tokens[:4], 0, cache)
    assert first.shape == (4, model.config.vocab_size) and layer_lengths(cache) == [4, 4]
    one = forward_tokens(model, [tokens[4]], 4, cache, logits_to_keep=1)                # one token: the mask-free path
    last = forward_tokens(model, torch.tensor(tokens[5:]), 5, cache)                      # a 1-D tensor works too
    torch.testing.assert_close(torch.cat([first, one, last]), whole, rtol=1e-4, atol=1e-4)
    assert layer_lengths(cache) == [6, 6]


@torch.inference_mode()
def test_model_output_gives_every_layers_hidden_states_when_asked(model):
    out = model_output(model, [1, 2, 3], 0, new_cache(model), output_hidden_states=True)
    assert out.logits.shape == (1, 3, 97) and len(out.hidden_states) == 4 + 1
    assert model_output(model, [1, 2, 3], 0, new_cache(model)).hidden_states is None
    kept = model_output(model, [1, 2, 3], 0, new_cache(model), logits_to_keep=1).logits
    torch.testing.assert_close(kept[0, -1], out.logits[0, -1])
    assert kept.shape == (1, 1, 97)


def test_cache_argument_uses_the_keyword_the_model_takes(model):
    cache = new_cache(model)
    ((keyword, value),) = cache_argument(model, cache).items()
    assert value is cache and keyword in ("cache", "past_key_values")
    import inspect
    assert keyword in inspect.signature(type(model).forward).parameters


def test_eos_set(model):
    assert eos_set(model, 5) == frozenset({5})
    assert eos_set(model, [5, 7]) == frozenset({5, 7})
    assert eos_set(model, []) == frozenset()
    assert eos_set(model, None) == frozenset()                     # the tiny model has no EOS of its own
    model.generation_config.eos_token_id = [2, 3]
    try:
        assert eos_set(model, None) == frozenset({2, 3}) and eos_set(model, 9) == frozenset({9})
    finally:
        model.generation_config.eos_token_id = None
