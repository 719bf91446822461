"""labkit.core.cache: the one KV cache draft and verify share. ``crop_to`` cuts every layer back to the same
absolute length (not by the same count), and ``fork_cache`` copies a prefix for side computations without touching
the original."""
import pytest
import torch

from labkit import SkipSet, skipping
from labkit.core.cache import crop_to, fork_cache, layer_lengths, new_cache
from labkit.core.forward import forward_tokens

from tiny_models import ARCHITECTURES, tiny_model

L = 4


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param, n_layers=L)


def uneven_cache(model):
    """Five positions in every layer, then two more drafted with layers 1 and 3's attention skipped."""
    cache = new_cache(model)
    with torch.inference_mode():
        forward_tokens(model, [1, 2, 3, 4, 5], 0, cache)
        with skipping(model, SkipSet(attention=[1, 3])):
            forward_tokens(model, [6], 5, cache)
            forward_tokens(model, [7], 6, cache)
    return cache


def test_new_cache_is_empty_with_one_layer_per_decoder_layer(model):
    assert layer_lengths(new_cache(model)) == [0] * L


def test_crop_to_cuts_each_layer_to_the_same_absolute_length(model):
    cache = uneven_cache(model)
    assert layer_lengths(cache) == [7, 5, 7, 5]
    crop_to(cache, 6)
    assert layer_lengths(cache) == [6, 5, 6, 5]                 # short layers are not cut further
    crop_to(cache, 9)
    assert layer_lengths(cache) == [6, 5, 6, 5]                 # longer than every layer: nothing happens
    crop_to(cache, 3)
    assert layer_lengths(cache) == [3] * L


@torch.inference_mode()
def test_a_cropped_cache_continues_like_a_fresh_one(model):
    tokens = [9, 8, 7, 6, 5, 4]
    cache = new_cache(model)
    forward_tokens(model, tokens + [1, 2, 3], 0, cache)
    crop_to(cache, len(tokens) - 1)
    again = forward_tokens(model, tokens[-1:], len(tokens) - 1, cache, logits_to_keep=1)[-1]
    plain = model(torch.tensor([tokens])).logits[0, -1]
    torch.testing.assert_close(again, plain, rtol=1e-4, atol=1e-4)


@torch.inference_mode()
def test_fork_copies_a_prefix_per_row_and_leaves_the_original(model):
    cache = new_cache(model)
    forward_tokens(model, [1, 2, 3, 4, 5, 6], 0, cache)
    before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
    fork = fork_cache(model, cache, 4, batch=3)
    assert layer_lengths(fork) == [4] * L
    for src, dst in zip(cache.layers, fork.layers):
        assert dst.keys.shape[0] == 3
        for row in range(3):
            assert torch.equal(dst.keys[row], src.keys[0, :, :4]) and torch.equal(dst.values[row], src.values[0, :, :4])
    forward_tokens(model, torch.tensor([[7], [8], [9]]), 4, fork)                   # the fork grows, the cache not
    assert layer_lengths(fork) == [5] * L and layer_lengths(cache) == [6] * L
    for (k, v), layer in zip(before, cache.layers):
        assert torch.equal(layer.keys, k) and torch.equal(layer.values, v)
    partial = fork_cache(model, cache, 6, layers=[0, 2])
    assert layer_lengths(partial) == [6, 0, 6, 0]
