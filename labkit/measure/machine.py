"""What a measurement ran on: one dict, recorded beside every stored timing."""
from __future__ import annotations

import os
import platform
import socket

import torch

__all__ = ["machine_info"]


def machine_info() -> dict:
    """Host, processor, Python/torch versions and the torch thread count in effect now."""
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "python": platform.python_version(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count()}
