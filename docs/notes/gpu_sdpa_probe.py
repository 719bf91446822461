"""Why a bf16 verify forward cost about two plain steps on the H200 (data/bench/device/nvidia-h200.md) when the
fp32 one cost 1.2: time one verify forward (5 tokens) and one plain step of the shipped model on a cache that grows
by 5 positions per call, as decoding grows it, in fp32 and bf16, with PyTorch's cuDNN attention backend allowed and
not (a process-wide switch: set here, in a script, never in labkit). A new key/value length is a new shape for an
attention kernel; a backend that builds a plan per shape pays that on every verify.

Run on a machine with a CUDA GPU: PYTHONPATH=. python docs/notes/gpu_sdpa_probe.py
"""
import statistics

import torch

import labkit
from labkit.core.cache import new_cache
from labkit.core.devices import clock
from labkit.core.forward import forward_tokens


def probe(dtype: str, steps: int = 40) -> tuple[float, float]:
    model, _ = labkit.load_model("default", device="cuda", dtype=dtype)
    cache, position, plain, verify = new_cache(model), 0, [], []
    forward_tokens(model, list(range(1, 65)), 0, cache)
    position = 64
    with torch.inference_mode():
        for _ in range(steps):
            t0 = clock()
            forward_tokens(model, [7], position, cache, logits_to_keep=1)
            t1 = clock()
            forward_tokens(model, [7, 8, 9, 10, 11], position + 1, cache)
            t2 = clock()
            plain.append(t1 - t0)
            verify.append(t2 - t1)
            position += 6
    return 1e3 * statistics.median(plain), 1e3 * statistics.median(verify)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__)
    for cudnn in (True, False):
        torch.backends.cuda.enable_cudnn_sdp(cudnn)
        for dtype in ("fp32", "bf16"):
            plain_ms, verify_ms = probe(dtype)
            print(f"cudnn sdp {'on ' if cudnn else 'off'} {dtype}: plain step {plain_ms:.2f} ms, verify of 5 tokens "
                  f"{verify_ms:.2f} ms = {verify_ms / plain_ms:.2f} plain steps")
