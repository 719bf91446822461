"""One call of the model with the shared KV cache and explicit positions, and the checks on a call's inputs.

Positions are always passed explicitly: while drafting, skipped attention blocks leave cache layers
at different lengths, so no layer's length can be trusted to say where a token sits.
"""
from __future__ import annotations

import torch

from .architectures import check_supported
from .checks import check_int
from .devices import model_device

__all__ = ["forward_tokens", "model_output", "cache_argument", "check_inputs", "check_custom_mask", "eos_set"]


def cache_argument(model, cache) -> dict:
    """The keyword under which a model takes its KV cache: ``cache`` (transformers >= 5.24, the pinned version; the
    older ``past_key_values`` is deprecated there and gone in 5.40). ``model`` is kept so callers need not change
    should a model class ever take it otherwise."""
    return {"cache": cache}


def forward_tokens(model, token_ids: list[int] | torch.Tensor, start: int, cache,
                   logits_to_keep: int = 0) -> torch.Tensor:
    """Feed tokens at positions start.. into the model with the cache; returns (T or logits_to_keep, V) logits."""
    return model_output(model, token_ids, start, cache, logits_to_keep).logits[0]                # (T', V)


def model_output(model, token_ids: list[int] | torch.Tensor, start: int, cache, logits_to_keep: int = 0,
                 output_hidden_states: bool = False):
    """The model's whole output (logits (1, T', V), and every layer's hidden states when asked) for tokens fed
    at positions start.. with the cache."""
    device = model_device(model)
    ids = token_ids.to(device) if isinstance(token_ids, torch.Tensor) else torch.tensor([token_ids], device=device)
    if ids.dim() == 1:
        ids = ids[None]
    positions = torch.arange(start, start + ids.shape[1], device=device)[None]              # (1, T)
    extra = {}
    layer_types = getattr(model.config, "layer_types", None)
    if ids.shape[1] == 1 and layer_types:
        # One query token attends to everything cached, in every layer: no mask. Passing the
        # mapping skips mask building, which would size the mask from one cache layer while
        # drafting has left layers at different lengths.
        extra["attention_mask"] = dict.fromkeys(set(layer_types))
    return model(input_ids=ids, position_ids=positions, **cache_argument(model, cache), use_cache=True,
                 logits_to_keep=logits_to_keep, output_hidden_states=output_hidden_states, **extra)


def check_inputs(model, input_ids, max_new_tokens) -> torch.LongTensor:
    """``input_ids`` as a (1, T) LongTensor, or a TypeError/ValueError naming the bad argument."""
    check_supported(model)
    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"input_ids must be a torch.LongTensor, got {type(input_ids).__name__}")
    if input_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"input_ids must hold integer token ids, got dtype {input_ids.dtype}")
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (1, T), got {tuple(input_ids.shape)}")
    if input_ids.shape[0] != 1:
        raise ValueError(f"input_ids has batch size {input_ids.shape[0]}; this decoder reads one sequence "
                         f"(autoregressive_generate and speculative_generate also take a batch)")
    if input_ids.shape[1] == 0:
        raise ValueError("input_ids is empty: the prompt needs at least one token")
    check_int("max_new_tokens", max_new_tokens, 0)
    vocab = model.config.vocab_size
    if int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab:
        raise ValueError(f"input_ids holds token ids outside the vocabulary [0, {vocab})")
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and input_ids.shape[1] + max_new_tokens > limit:
        raise ValueError(
            f"prompt ({input_ids.shape[1]} tokens) + max_new_tokens ({max_new_tokens}) exceeds the model's "
            f"context of {limit} positions"
        )
    return input_ids.long().to(model_device(model))


def check_custom_mask(model, length: int, what: str) -> None:
    """``what`` (a tree draft, a batch) passes its own 4D attention mask over ``length`` cache positions: that needs
    eager or sdpa attention, and a sliding-window cache that has not dropped positions yet (a window larger than
    ``length``); a ValueError naming the limit otherwise."""
    implementation = getattr(model.config, "_attn_implementation", "sdpa")
    if implementation not in ("sdpa", "eager"):
        raise ValueError(f"{what} needs attn_implementation 'sdpa' or 'eager' (a custom attention mask); the model "
                         f"uses {implementation!r}")
    window = getattr(model.config, "sliding_window", None)
    if window is not None and length > window - 1:
        raise ValueError(f"{what} over {length} positions exceeds the model's sliding window of {window}: the "
                         f"window's cache would drop positions its attention mask needs")


def eos_set(model, eos_token_id) -> frozenset[int]:
    """The token ids that end generation: ``eos_token_id`` if given (``[]`` for none), else the model's own."""
    if eos_token_id is None:
        eos_token_id = getattr(model.generation_config, "eos_token_id", None)
    if eos_token_id is None:
        return frozenset()
    if isinstance(eos_token_id, int):
        return frozenset([eos_token_id])
    return frozenset(int(e) for e in eos_token_id)
