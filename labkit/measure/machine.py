"""What a measurement ran on: one dict, recorded beside every stored timing."""
from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

import torch

__all__ = ["machine_info", "cpu_model", "accelerators"]

#: instruction-set flags that change which CPU kernels run (int8 and bf16 matrix products above all)
_KERNEL_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> dict:
    """The processor's model name and the kernel-relevant flags it has ({} where /proc/cpuinfo is not readable):
    the same code can speed up very differently on two CPUs of one architecture, so every timing names its CPU."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return {}
    first = {}                                          # the first processor's fields (all cores alike here)
    for line in text.splitlines():
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
    flags = set(first.get("flags", "").split())
    return {"cpu_model": first.get("model name", ""), "cpu_flags": [f for f in _KERNEL_FLAGS if f in flags]}


def accelerators() -> list[str]:
    """The accelerators torch sees, named (``["NVIDIA H200"]``, ``["mps"]``; [] on a CPU-only machine)."""
    if torch.cuda.is_available():
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    return ["mps"] if mps is not None and mps.is_available() else []


def machine_info() -> dict:
    """Host, processor (model and kernel-relevant flags), the accelerators (GPUs named), Python/torch versions and
    the torch thread count in effect now."""
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), **cpu_model(), "accelerators": accelerators(),
            "python": platform.python_version(), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count()}
