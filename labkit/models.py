"""Loading the lab's models (and any Hugging Face causal LM of a supported family)."""
from __future__ import annotations

import os
from pathlib import Path

import torch

__all__ = ["load_model", "SUPPORTED_ARCHITECTURES", "SHIPPED_MODELS", "MODELS_DIR", "check_supported", "n_layers",
           "model_folder"]

MODELS_DIR = Path(__file__).resolve().parent.parent / "data" / "models"
#: Models trained by this lab and shipped in data/models/.
SHIPPED_MODELS = ("default", "plain", "draft")
#: Causal LM classes whose decoder layers labkit knows how to skip.
SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Gemma2ForCausalLM")


def check_supported(model) -> None:
    """Raise TypeError unless ``model`` is an instance of a supported causal LM class."""
    name = type(model).__name__
    if name not in SUPPORTED_ARCHITECTURES:
        raise TypeError(
            f"unsupported model class {name}: labkit supports {', '.join(SUPPORTED_ARCHITECTURES)}"
        )


def n_layers(model) -> int:
    return int(model.config.num_hidden_layers)


def model_folder(name_or_path: str | os.PathLike) -> Path:
    """The folder of a shipped model name, else ``name_or_path`` as a path (for a hub id: a folder that is not there)."""
    text = str(name_or_path)
    return MODELS_DIR / text if text in SHIPPED_MODELS else Path(text).expanduser()


def _resolve(name_or_path: str | os.PathLike) -> tuple[str, list[str]]:
    """Where to load from, and a description of what was tried (for error messages)."""
    text = str(name_or_path)
    if text in SHIPPED_MODELS:
        path = MODELS_DIR / text
        if not (path / "config.json").exists():
            raise FileNotFoundError(
                f"shipped model {text!r} not found at {path}; rebuild it with "
                f"`python -m labkit.train --name {text}` (see README)"
            )
        return str(path), [f"shipped model folder {path}"]
    path = Path(text).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path} exists but holds no config.json: not a Hugging Face model folder")
        return str(path), [f"local folder {path}"]
    looks_like_path = text.startswith((".", "/", "~")) or os.sep in text and text.count("/") != 1
    if looks_like_path:
        raise FileNotFoundError(f"model folder {path} does not exist (shipped models: {', '.join(SHIPPED_MODELS)})")
    return text, [f"shipped names {SHIPPED_MODELS}", f"local folder ./{text}", f"Hugging Face hub id {text!r}"]


def load_model(name_or_path: str | os.PathLike = "default", *, trust_remote_code: bool = False):
    """Load ``(model, tokenizer)``: eval mode, fp32, on CPU, safetensors weights only.

    ``name_or_path``: ``"default"``, ``"plain"`` or ``"draft"`` (shipped in ``data/models``), a
    local Hugging Face folder, or a hub id already in the local cache (or reachable online).
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source, tried = _resolve(name_or_path)
    is_local = Path(source).exists()
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    attempts = [True] if (is_local or offline) else [True, False]
    config, last_error = None, None
    for local_only in attempts:
        try:
            config = AutoConfig.from_pretrained(source, local_files_only=local_only, trust_remote_code=trust_remote_code)
            break
        except (OSError, ValueError) as err:  # not cached / not reachable / not a model
            last_error = err
    if config is None:
        raise OSError(
            f"could not load model {str(name_or_path)!r}; tried: {'; '.join(tried)} "
            f"(hub cache{', then network' if len(attempts) > 1 else ' only (offline)'}). "
            f"Last error: {type(last_error).__name__}: {str(last_error).splitlines()[0] if str(last_error) else ''}"
        ) from last_error
    archs = list(getattr(config, "architectures", None) or [])
    if not any(a in SUPPORTED_ARCHITECTURES for a in archs):
        raise ValueError(
            f"model {str(name_or_path)!r} is a {archs or config.model_type}; labkit supports "
            f"{', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    model = AutoModelForCausalLM.from_pretrained(
        source, dtype=torch.float32, use_safetensors=True, trust_remote_code=trust_remote_code,
        attn_implementation="eager" if "Gemma2ForCausalLM" in archs else "sdpa",  # Gemma2 has no sdpa path
    )
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    model.to("cpu").eval()
    check_supported(model)
    return model, tokenizer
