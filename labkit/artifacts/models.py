"""Loading the lab's models (and any Hugging Face causal LM of a supported family), and naming them.

A model is named by a shipped name (``default``, ``plain``, ``draft``: folders in ``data/models``), a
local Hugging Face folder, or a hub id already in the local cache. Studies and results record
:func:`model_id` (and :func:`fingerprint`, a hash of the weights, so results of other weights are
never mistaken for this model's); folders of results are named by :func:`model_key`. :func:`identify` resolves a
name into all of them at once (a :class:`ModelIdentity`), so code that needs several reads the name only once.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.architectures import SUPPORTED_ARCHITECTURES, check_supported
from ..core.checks import take_options
from ..core.devices import resolve_device, resolve_dtype
from ..core.draft_head import DraftHead
from ..core.medusa import MedusaHeads
from .paths import MODELS_DIR

__all__ = ["load_model", "SHIPPED_MODELS", "model_folder", "model_id", "model_key", "fingerprint",
           "ModelIdentity", "identify", "load_draft_model", "load_draft_head", "draft_head_folder", "random_model",
           "family_config", "FAMILIES", "medusa_heads_folder", "load_medusa_heads"]

#: Models trained by this lab and shipped in data/models/.
SHIPPED_MODELS = ("default", "plain", "draft")


def model_folder(name_or_path: str | os.PathLike) -> Path:
    """The folder of a shipped model name, else ``name_or_path`` as a path (for a hub id: a folder that is not
    there)."""
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
                f"`python -m labkit train --name {text}` (see README)"
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


def _check_safetensors(folder: Path, shipped: bool) -> None:
    """OSError naming a ``*.safetensors`` file of ``folder`` that is truncated or corrupt (shorter than its
    header says, or a header that is not one), and how to get a whole copy; before safetensors' own terse error."""
    for file in sorted(folder.glob("*.safetensors")):
        size = file.stat().st_size
        with open(file, "rb") as fh:
            head = fh.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            try:
                header = json.loads(fh.read(n)) if 0 < n <= size - 8 else None
                end = max((int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"), default=0)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                header = None
        if header is None or size < 8 + n + end:
            fix = ("reinstall the lab, or restore the shipped models with `git checkout data/models`" if shipped
                   else "copy the checkpoint again from where it came from")
            raise OSError(f"{file} is truncated or corrupt ({size} bytes"
                          f"{f', its header promises {8 + n + end}' if header is not None else ''}): {fix}")


def load_model(name_or_path: str | os.PathLike = "default", *, device=None, dtype=None,
               trust_remote_code: bool = False):
    """Load ``(model, tokenizer)``: eval mode, safetensors weights only, on ``device`` in ``dtype``.

    ``name_or_path``: ``"default"``, ``"plain"`` or ``"draft"`` (shipped in ``data/models``), a
    local Hugging Face folder, or a hub id already in the local cache (or reachable online).
    ``device``: None or ``"cpu"`` (the default), ``"cuda"``, ``"cuda:N"``, ``"mps"`` or ``"auto"``;
    ``dtype``: None or ``"fp32"`` (the default), ``"bf16"``, ``"fp16"`` or a ``torch.dtype``
    (``labkit.core.devices``). Both are checked before anything is read.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    device, dtype = resolve_device(device), resolve_dtype(dtype)
    source, tried = _resolve(name_or_path)
    is_local = Path(source).exists()
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    attempts = [True] if (is_local or offline) else [True, False]
    config, last_error = None, None
    for local_only in attempts:
        try:
            config = AutoConfig.from_pretrained(source, local_files_only=local_only,
                                                trust_remote_code=trust_remote_code)
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
    if is_local:
        _check_safetensors(Path(source), shipped=str(name_or_path) in SHIPPED_MODELS)
    model = AutoModelForCausalLM.from_pretrained(
        source, dtype=dtype, use_safetensors=True, trust_remote_code=trust_remote_code,
        attn_implementation="eager" if "Gemma2ForCausalLM" in archs else "sdpa",  # Gemma2 has no sdpa path
    )
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    model.to(device).eval()
    check_supported(model)
    return model, tokenizer


#: the supported families by their ``model_type`` (tiny random configurations: :func:`family_config`)
FAMILIES = ("llama", "mistral", "qwen2", "gemma2")


def family_config(family: str, *, n_layers: int = 4, vocab_size: int = 97, hidden_size: int = 32,
                  max_positions: int = 256):
    """A small transformers configuration of one supported family (what the tests and the lossless checks build
    random models from): ``hidden_size`` / 8 per head, 4 query and 2 key/value heads, an MLP twice as wide; Gemma2
    with eager attention (it has no sdpa path) and a window as long as the context."""
    import transformers as tf

    common = dict(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                  num_hidden_layers=n_layers, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=max_positions, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    makers = {"llama": lambda: tf.LlamaConfig(**common),
              "mistral": lambda: tf.MistralConfig(**common, sliding_window=None),
              "qwen2": lambda: tf.Qwen2Config(**common, use_sliding_window=False),
              "gemma2": lambda: tf.Gemma2Config(**common, head_dim=hidden_size // 4, sliding_window=max_positions,
                                                query_pre_attn_scalar=hidden_size // 4)}
    if family not in makers:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    config = makers[family]()
    config._attn_implementation = "eager" if family == "gemma2" else "sdpa"
    return config


#: The sizes :func:`random_model` may change, by name.
RANDOM_MODEL_SIZES = ("hidden_size", "n_layers", "intermediate_size", "vocab_size", "tie_word_embeddings")


def random_model(like="default", *, device=None, dtype=None, seed: int = 0, **sizes):
    """A randomly initialised causal LM with ``like``'s configuration (a model name or folder, or a transformers
    config) and the ``sizes`` given changed (:data:`RANDOM_MODEL_SIZES`, by name); attention heads follow the
    hidden size at the same head dimension, the MLP keeps its ratio unless ``intermediate_size`` is given;
    ``tie_word_embeddings`` None keeps ``like``'s. Built directly on ``device`` in ``dtype``.

    For timing only: what a forward costs depends on the shapes, not on the values, so a model of a few hundred
    million parameters (or billions on a GPU) needs no training to show where decoding spends its time. Its
    draft-target agreement means nothing for a trained model."""
    from transformers import AutoConfig, AutoModelForCausalLM

    take_options("random_model", sizes, RANDOM_MODEL_SIZES)
    hidden_size, n_layers, intermediate_size, vocab_size, tie_word_embeddings = (sizes.get(k) for k in
                                                                                 RANDOM_MODEL_SIZES)
    device, dtype = resolve_device(device), resolve_dtype(dtype)
    config = like if not isinstance(like, (str, os.PathLike)) else AutoConfig.from_pretrained(_resolve(like)[0])
    attention = getattr(config, "_attn_implementation", None)
    config = config.__class__.from_dict(config.to_dict())                         # a copy: ``like`` stays as it was
    if tie_word_embeddings is not None:
        config.tie_word_embeddings = bool(tie_word_embeddings)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    group = config.num_attention_heads // config.num_key_value_heads
    if hidden_size is not None:
        if isinstance(hidden_size, bool) or not isinstance(hidden_size, int) or hidden_size < 1 \
                or hidden_size % (head_dim * group):
            raise ValueError(f"hidden_size must be a positive multiple of {head_dim * group} (head_dim {head_dim} x "
                             f"{group} query heads per key/value head), got {hidden_size}")
        ratio = config.intermediate_size / config.hidden_size
        config.num_attention_heads = hidden_size // head_dim
        config.num_key_value_heads = config.num_attention_heads // group
        config.head_dim, config.intermediate_size = head_dim, max(64, int(round(ratio * hidden_size / 64)) * 64)
        config.hidden_size = hidden_size
    for name, value in (("num_hidden_layers", n_layers), ("intermediate_size", intermediate_size),
                        ("vocab_size", vocab_size)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            setattr(config, name, value)
    if hasattr(config, "layer_types") and config.layer_types is not None:
        config.layer_types = [config.layer_types[i % len(config.layer_types)] for i in range(config.num_hidden_layers)]
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.device(device):
        torch.manual_seed(seed)                                     # inside the fork: the caller's RNG is untouched
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attention)
    model.eval().requires_grad_(False)
    check_supported(model)
    return model


def load_draft_model(name: str = "draft", *, verbose: bool = True, device=None, dtype=None):
    """(model, tokenizer) of a separate draft model on ``device`` in ``dtype`` (as :func:`load_model` takes them:
    its target's), or None (with a note) when it is not there yet."""
    if name in SHIPPED_MODELS and not (MODELS_DIR / name / "config.json").exists():
        if verbose:
            print(f"No separate draft model yet: {MODELS_DIR / name} does not exist "
                  f"(train it with `python -m labkit train --name {name}`); skipping this section.")
        return None
    if name not in SHIPPED_MODELS and not (Path(name) / "config.json").exists():
        if verbose:
            print(f"No draft model at {name}; skipping this section.")
        return None
    return load_model(name, device=device, dtype=dtype)


def draft_head_folder(name_or_path: str | os.PathLike = "default") -> Path:
    """Where a model's draft head lives: ``<model folder>/draft_head`` (``python -m labkit train-draft-head``)."""
    return model_folder(name_or_path) / "draft_head"


def load_draft_head(name_or_path: str | os.PathLike = "default") -> DraftHead:
    """The draft head fitted for a model (shipped name or folder), for ``speculative_generate(draft_head=...)``
    with ``skip=head.skip``; FileNotFoundError saying how to fit one when the model has none."""
    folder = draft_head_folder(name_or_path)
    try:
        return DraftHead.load(folder)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"{error}; fit one with `python -m labkit train-draft-head --model "
                                f"{name_or_path}`") from None


def medusa_heads_folder(name_or_path: str | os.PathLike = "default") -> Path:
    """Where a model's Medusa heads live: ``<model folder>/medusa_heads`` (``python -m labkit train-heads``)."""
    return model_folder(name_or_path) / "medusa_heads"


def load_medusa_heads(name_or_path: str | os.PathLike, model) -> MedusaHeads:
    """The Medusa heads fitted for a model (shipped name or folder), checked against ``model`` (ValueError if they
    belong to another), for ``HeadsDrafter(model, heads)``; FileNotFoundError saying how to fit them when the model
    has none."""
    return MedusaHeads.load(medusa_heads_folder(name_or_path), model)


def model_id(name) -> str:
    """What a study records as its model: a shipped name as is, a local folder as its resolved path."""
    text = str(name)
    if text in SHIPPED_MODELS:
        return text
    path = Path(text).expanduser()
    return str(path.resolve()) if path.exists() else text


def model_key(name) -> str:
    """Folder name under data/search/ (and file name under data/playground/) for a model: the shipped
    name, the folder's name, or a hub id with / -> --."""
    text = str(name)
    if text in SHIPPED_MODELS:
        return text
    path = Path(text).expanduser()
    if path.exists() or text.startswith((".", "/", "~")):
        return path.resolve().name
    return text.replace("/", "--")


def fingerprint(name) -> str:
    """SHA-256 (16 hex) of the model's safetensors weights when it is a local folder, else of its id."""
    return _weights_hash(model_folder(name), model_id(name))


def _weights_hash(folder: Path, mid: str) -> str:
    """:func:`fingerprint` of a model whose folder and id are known: its safetensors files, else its id."""
    h = hashlib.sha256()
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files:
        h.update(mid.encode())
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class ModelIdentity:
    """Everything results record about one model, resolved from its name once: the name as given, the id a study
    records (:func:`model_id`), the key its result folders are named by (:func:`model_key`), its folder
    (:func:`model_folder`; for a hub id a path that is not there) and the fingerprint of its weights."""

    name: str
    id: str
    key: str
    folder: Path
    fingerprint: str


def identify(name_or_path: str | os.PathLike) -> ModelIdentity:
    """The :class:`ModelIdentity` of a shipped name, a local folder or a hub id (the weights are hashed once, here)."""
    text = str(name_or_path)
    mid = model_id(text)
    folder = model_folder(text)
    return ModelIdentity(text, mid, model_key(text), folder, _weights_hash(folder, mid))
