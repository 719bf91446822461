"""The one KV cache that draft and verify share, and how to realign its layers.

While drafting with skipped attention, a skipped layer appends no keys/values, so cache
layers drift to different lengths. transformers 5's ``Cache.crop(-n)`` cuts every layer by
the same count, which would cut the short layers too far; :func:`crop_to` instead cuts each
layer back to the same absolute length.
"""
from __future__ import annotations

from transformers import DynamicCache

__all__ = ["new_cache", "crop_to", "layer_lengths", "fork_cache"]


def new_cache(model) -> DynamicCache:
    return DynamicCache(config=model.config)


def layer_lengths(cache) -> list[int]:
    return [layer.get_seq_length() for layer in cache.layers]


def crop_to(cache, length: int) -> None:
    """Cut every cache layer back to hold exactly the first ``length`` positions (or fewer, if it has fewer)."""
    for layer in cache.layers:
        extra = layer.get_seq_length() - length
        if extra > 0:
            layer.crop(-extra)


def fork_cache(model, cache, length: int, batch: int = 1, layers=None) -> DynamicCache:
    """A new cache holding the first ``length`` positions of ``cache``, repeated ``batch`` times (a view, no copy
    until the fork grows): what a side computation (scoring candidate skip sets) runs on while ``cache`` itself
    stays untouched. ``layers``: only these layer indices are filled (default: all)."""
    fork = new_cache(model)
    for i, (src, dst) in enumerate(zip(cache.layers, fork.layers)):
        if (layers is not None and i not in layers) or src.get_seq_length() == 0:
            continue
        if src.keys.shape[-2] != src.get_seq_length():
            raise ValueError("fork_cache: a sliding-window cache layer has dropped positions; cannot fork it")
        keys = src.keys[..., :length, :].expand(batch, -1, -1, -1)         # (batch, heads, length, head_dim)
        values = src.values[..., :length, :].expand(batch, -1, -1, -1)
        dst.update(keys, values)
    return fork
