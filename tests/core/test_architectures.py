"""labkit.core.architectures: which model classes labkit decodes, and the early, named errors for the others (a
model name where a loaded model belongs is told how to load it)."""
import pytest
import torch

from labkit import SkipSet, autoregressive_generate, speculative_generate
from labkit.core.architectures import SUPPORTED_ARCHITECTURES, check_mask_free_drafting, check_supported, n_layers
from labkit.measure.strategy_inputs import block_importance, skip_strategy, strategy_cost_model

from tiny_models import ARCHITECTURES, tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4, vocab_size=97, max_positions=128)


IDS = torch.tensor([[5, 6, 7]])


def test_unsupported_model_class():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    with pytest.raises(TypeError, match="LlamaForCausalLM"):
        speculative_generate(gpt2, IDS, max_new_tokens=2)
    with pytest.raises(TypeError, match="unsupported model class GPT2LMHeadModel"):
        autoregressive_generate(gpt2, IDS, 2)


@pytest.mark.parametrize("call", [
    lambda: skip_strategy("knapsack", "default"),
    lambda: skip_strategy("static", "default", skip=SkipSet()),
    lambda: block_importance("default", None),
    lambda: strategy_cost_model("default"),
    lambda: speculative_generate("default", IDS, max_new_tokens=2),
])
def test_a_model_name_where_a_loaded_model_belongs(call):
    with pytest.raises(TypeError, match=r"model must be a loaded model, got the name 'default'.*labkit\.load_model"):
        call()


def test_a_draft_model_name_names_the_argument(model):
    with pytest.raises(TypeError, match="draft_model must be a loaded model"):
        speculative_generate(model, IDS, draft_model="draft", max_new_tokens=2)


# -- added with the mirrored layout --------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_tested_family_is_supported_and_counts_its_layers(arch):
    model = tiny_model(arch, n_layers=3)
    assert type(model).__name__ in SUPPORTED_ARCHITECTURES
    check_supported(model)                                          # no error
    assert n_layers(model) == 3


def test_check_supported_names_the_argument_and_takes_paths_as_names(tmp_path):
    with pytest.raises(TypeError, match=r"^draft_model must be a loaded model, got the name"):
        check_supported(tmp_path, "draft_model")
    with pytest.raises(TypeError, match="unsupported model class Linear"):
        check_supported(torch.nn.Linear(2, 2))


def test_skipped_attention_without_layer_type_masks_needs_sdpa():
    model = tiny_model("llama", n_layers=2)
    check_mask_free_drafting(model, skipped_attention=True)        # sdpa: fine
    model.config._attn_implementation = "eager"
    try:
        check_mask_free_drafting(model, skipped_attention=False)   # nothing skipped in attention: fine
        with pytest.raises(ValueError, match="attn_implementation='sdpa'"):
            check_mask_free_drafting(model, skipped_attention=True)
    finally:
        model.config._attn_implementation = "sdpa"
    gemma = tiny_model("gemma2", n_layers=2)                        # eager, but per-layer-type masks: fine
    assert gemma.config._attn_implementation == "eager"
    check_mask_free_drafting(gemma, skipped_attention=True)
