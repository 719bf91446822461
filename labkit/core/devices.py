"""Where a model runs and in what precision: device and dtype names, the model's own, and a clock that waits for it.

Every tensor the engine makes to feed a model is made on the model's device (``model_device``), so one call of
``speculative_generate`` runs wherever ``load_model(..., device=, dtype=)`` put the model: the CPU, a CUDA GPU or
Apple's MPS, in fp32, bf16 or fp16. An accelerator runs its kernels asynchronously: a timing read before the
device has finished measures the launch, not the work, so every clock in labkit reads ``synchronize`` first
(``clock``). On the CPU it costs nothing.

Lossless in reduced precision means token-identical to the plain loop *in the same precision*: the verify's
argmax in bf16 is the reference, not fp32's (two precisions can round a near-tie differently).
"""
from __future__ import annotations

import time

import torch

__all__ = ["DTYPES", "resolve_device", "resolve_dtype", "dtype_name", "model_device", "model_dtype", "synchronize",
           "clock", "device_name"]

#: the precisions labkit accepts by name (``torch.dtype`` objects are accepted too)
DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
          "fp16": torch.float16, "float16": torch.float16, "half": torch.float16}


def _available(kind: str) -> bool:
    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "mps":
        return getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    return kind == "cpu"


def resolve_device(device=None) -> torch.device:
    """``device`` as a ``torch.device``: None or ``"cpu"`` → the CPU (the lab's default, reproducible anywhere),
    ``"auto"`` → CUDA, else MPS, else the CPU; ``"cuda"``, ``"cuda:1"``, ``"mps"`` or a ``torch.device``.
    ValueError naming ``device`` when it is malformed or not on this machine."""
    if device is None:
        return torch.device("cpu")
    if isinstance(device, str) and device.strip().lower() == "auto":
        return torch.device(next(k for k in ("cuda", "mps", "cpu") if _available(k)))
    try:
        resolved = torch.device(device.strip().lower() if isinstance(device, str) else device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto', got {device!r}") from error
    if resolved.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto', got {device!r}")
    if not _available(resolved.type):
        raise ValueError(f"device={device!r}: no {resolved.type.upper()} device on this machine "
                         f"(torch {torch.__version__}); use 'cpu' or 'auto'")
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return resolved


def resolve_dtype(dtype=None) -> torch.dtype:
    """``dtype`` as a floating ``torch.dtype``: None → fp32; ``"fp32"``, ``"bf16"``, ``"fp16"`` (and their long
    names) or the ``torch.dtype`` itself. ValueError naming ``dtype`` otherwise."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise ValueError(f"dtype must be one of float32, bfloat16, float16, got {dtype}")
        return dtype
    key = str(dtype).strip().lower().removeprefix("torch.")
    if key not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (or a torch.dtype), got {dtype!r}")
    return DTYPES[key]


def dtype_name(dtype) -> str:
    """The short name of a precision (``"fp32"``, ``"bf16"``, ``"fp16"``): what results and study records say;
    ``dtype`` as :func:`resolve_dtype` takes it."""
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[resolve_dtype(dtype)]


def model_device(model) -> torch.device:
    """The device of the model's first parameter (labkit keeps a model on one device)."""
    return next(model.parameters()).device


def model_dtype(model) -> torch.dtype:
    """The floating dtype of the model's first parameter."""
    return next(model.parameters()).dtype


def synchronize(device) -> None:
    """Wait until ``device`` has finished the work queued on it (nothing to wait for on the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def clock(device=None) -> float:
    """``time.perf_counter()`` once ``device`` has finished its queued work (None: every accelerator this process
    has used): the one way labkit reads a wall clock around model calls."""
    if device is not None:
        synchronize(device)
    elif torch.cuda.is_initialized():
        torch.cuda.synchronize()
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        torch.mps.synchronize()
    return time.perf_counter()


def device_name(device) -> str:
    """What a device is in words, for tables: ``"cpu"``, or the GPU's product name (``"NVIDIA H200"``)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type
