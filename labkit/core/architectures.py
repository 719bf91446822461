"""Which transformers causal LMs the engine can skip blocks of, and the checks that say so early."""
from __future__ import annotations

import os

__all__ = ["SUPPORTED_ARCHITECTURES", "check_supported", "check_mask_free_drafting", "n_layers"]

#: Causal LM classes whose decoder layers labkit knows how to skip (pre-norm, ``model.model.layers``).
SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Gemma2ForCausalLM")


def check_supported(model, argument: str = "model") -> None:
    """Raise TypeError unless ``model`` is an instance of a supported causal LM class (``argument``: its name
    in the caller, for the message; a model name or folder where a loaded model belongs is told how to load it)."""
    if isinstance(model, (str, os.PathLike)):
        raise TypeError(
            f"{argument} must be a loaded model, got the name {str(model)!r}: load it first, e.g. "
            f"`model, _ = labkit.load_model({str(model)!r})`"
        )
    name = type(model).__name__
    if name not in SUPPORTED_ARCHITECTURES:
        raise TypeError(f"unsupported model class {name}: labkit supports {', '.join(SUPPORTED_ARCHITECTURES)}")


def n_layers(model) -> int:
    """L, the number of decoder layers (a skip set has 2L blocks)."""
    return int(model.config.num_hidden_layers)


def check_mask_free_drafting(model, skipped_attention: bool) -> None:
    """Single-token drafting passes no attention mask; models without per-layer-type masks get none only under sdpa."""
    if getattr(model.config, "layer_types", None) or not skipped_attention:
        return
    implementation = getattr(model.config, "_attn_implementation", "sdpa")
    if implementation != "sdpa":
        raise ValueError(
            f"skipping attention blocks of a {type(model).__name__} needs attn_implementation='sdpa' "
            f"(the model uses {implementation!r}); load it with labkit.load_model or pass attn_implementation='sdpa'"
        )
