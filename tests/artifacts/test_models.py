"""Loading: the shipped models, any local folder of a supported family, and every error path."""

import pytest
import torch

import labkit.artifacts.models as models
from labkit import load_model

from tiny_models import tiny_model

CODE = 'def add(a, b):\n    """Return a + b."""\n    return a + b\n'


@pytest.mark.parametrize("name", ["default", "plain"])
def test_shipped_models_load(name):
    model, tokenizer = load_model(name)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert not model.training and next(model.parameters()).dtype == torch.float32
    ids = tokenizer(CODE)["input_ids"]
    assert tokenizer.decode(ids) == CODE                      # byte-level BPE round trip
    assert (models.MODELS_DIR / name / "MODEL_CARD.md").exists()
    card = (models.MODELS_DIR / name / "MODEL_CARD.md").read_text()
    assert "Validation loss" in card and "Skip robustness" in card


def test_shipped_models_fit_the_size_budget():
    total = sum((models.MODELS_DIR / n / "model.safetensors").stat().st_size for n in ("default", "plain"))
    assert total <= 40 * 1024 * 1024


def test_local_folder_of_a_supported_family(tmp_path):
    tiny = tiny_model("qwen2", n_layers=2, vocab_size=97)
    tiny.save_pretrained(tmp_path)
    _, tokenizer = load_model("default")
    tokenizer.save_pretrained(tmp_path)
    model, _ = load_model(tmp_path)
    assert type(model).__name__ == "Qwen2ForCausalLM" and not model.training


def test_missing_shipped_model_names_the_rebuild_command(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "MODELS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="labkit.train --name plain"):
        load_model("plain")


def test_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_model(tmp_path)


def test_unsupported_architecture_lists_the_supported_ones(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Gemma2ForCausalLM"):
        load_model(tmp_path)


def test_uncached_hub_id_offline_says_what_was_tried(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(OSError, match=r"tried: .*hub id 'someone/not-cached'"):
        load_model("someone/not-cached")


def test_pickle_only_weights_are_refused(tmp_path):
    """safetensors only: a folder holding just a pickle checkpoint is not loaded."""
    tiny = tiny_model("llama", n_layers=1, vocab_size=97)
    tiny.config.architectures = ["LlamaForCausalLM"]
    tiny.config.save_pretrained(tmp_path)
    torch.save(tiny.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(OSError):
        load_model(tmp_path)


@pytest.mark.parametrize("keep", [4, 100, -1000])
def test_truncated_weights_name_the_file_and_the_fix(tmp_path, keep):
    from tiny_models import save_tiny_model_folder

    weights = save_tiny_model_folder(tmp_path / "tiny", n_layers=1) / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:keep])                      # a copy cut short: in the header, or in the tensors
    with pytest.raises(OSError, match="truncated or corrupt") as error:
        load_model(tmp_path / "tiny")
    assert str(weights) in str(error.value) and "copy the checkpoint again" in str(error.value)


def test_truncated_shipped_weights_say_git_checkout(tmp_path, monkeypatch):
    import shutil

    shutil.copytree(models.MODELS_DIR / "draft", tmp_path / "draft", ignore=shutil.ignore_patterns("*.safetensors"))
    weights = tmp_path / "draft" / "model.safetensors"
    weights.write_bytes((models.MODELS_DIR / "draft" / "model.safetensors").read_bytes()[:1000])
    monkeypatch.setattr(models, "MODELS_DIR", tmp_path)
    with pytest.raises(OSError, match=r"truncated or corrupt.*git checkout data/models"):
        load_model("draft")


def test_random_model_has_the_family_and_the_sizes_asked_for():
    from labkit.artifacts.models import random_model

    before = torch.random.get_rng_state()
    model = random_model("default", hidden_size=512, n_layers=3, dtype="bf16")
    assert torch.equal(torch.random.get_rng_state(), before)                 # the caller's RNG is untouched
    config = model.config
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype is torch.bfloat16
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (512, 3, 8)
    assert config.intermediate_size % 64 == 0 and 1300 < config.intermediate_size < 1460        # default's ratio
    again = random_model("default", hidden_size=512, n_layers=3, dtype="bf16")
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))   # seeded
    with pytest.raises(ValueError, match="hidden_size"):
        random_model("default", hidden_size=100)
    with pytest.raises(ValueError, match="n_layers"):
        random_model("default", n_layers=0)
    with pytest.raises(ValueError, match="dtype"):
        random_model("default", dtype="int4")


def test_load_model_takes_a_device_and_a_dtype():
    model, _ = load_model("default", device="cpu", dtype="bf16")
    assert model.dtype is torch.bfloat16 and model.device.type == "cpu"
    with pytest.raises(ValueError, match="dtype"):
        load_model("default", dtype="fp8")
    with pytest.raises(ValueError, match="device"):
        load_model("default", device="tpu")
