"""The one KV cache that draft and verify share, and how to realign its layers.

While drafting with skipped attention, a skipped layer appends no keys/values, so cache
layers drift to different lengths. transformers 5's ``Cache.crop(-n)`` cuts every layer by
the same count, which would cut the short layers too far; :func:`crop_to` instead cuts each
layer back to the same absolute length.
"""
from __future__ import annotations

from transformers import DynamicCache

__all__ = ["new_cache", "crop_to", "layer_lengths"]


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
