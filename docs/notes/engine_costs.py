"""Where one decoding step's time goes on this CPU (docs/decisions.md, 2026-11-23 later session): the costs of a
1-token full forward, a draft with the trained 8-block path (c) and a 5-token verify (c_v) of `default`, and how an
fp32 linear's time grows with its tokens (plain `F.linear` against MKL's prepacked linear).

    python docs/notes/engine_costs.py
"""
import time

import torch
import torch.nn.functional as F

import labkit
from labkit.artifacts.results import trained_draft_path
from labkit.core.cache import crop_to, new_cache
from labkit.core.forward import forward_tokens
from labkit.core.skip import skipping


def per_call_us(fn, n=3000):
    with torch.inference_mode():
        for _ in range(200):
            fn()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
    return (time.perf_counter() - t0) / n * 1e6


def one_token_calls(model, tokenizer, skip):
    """{name: call} on a 34-token outside prompt read into a cache: a 1-token full forward, a 1-token draft with
    ``skip`` and a 5-token verify, each cropping the cache back afterwards."""
    ids = tokenizer(labkit.prompts(8, source="packages")[5].text, return_tensors="pt")["input_ids"]
    T = ids.shape[1]
    with torch.inference_mode():
        cache = new_cache(model)
        forward_tokens(model, ids, 0, cache)

    def full():
        forward_tokens(model, [5], T, cache, logits_to_keep=1)
        crop_to(cache, T)

    def draft():
        with skipping(model, skip):
            forward_tokens(model, [5], T, cache, logits_to_keep=1)
        crop_to(cache, T)

    def verify5():
        forward_tokens(model, [5, 6, 7, 8, 9], T, cache)
        crop_to(cache, T)

    return {"full": full, "draft": draft, "verify5": verify5}


def step_costs(rounds=3, n=300):
    model, tokenizer = labkit.load_model("default")
    skip = next(iter(trained_draft_path("default").values()))
    calls = one_token_calls(model, tokenizer, skip)
    for _ in range(rounds):
        a, b, c = (per_call_us(calls[k], n) / 1e3 for k in ("full", "draft", "verify5"))
        print(f"full {a:.3f} ms  draft {b:.3f} ms (c = {b / a:.3f})  verify 5 {c:.3f} ms (c_v = {c / a:.3f})")


def linear_costs():
    for n_out, n_in in ((688, 256), (256, 256), (4096, 256)):
        w = torch.randn(n_out, n_in)
        packed = torch.ops.mkl._mkl_reorder_linear_weight(w, 1)
        row = []
        for tokens in (1, 5, 8):
            x = torch.randn(tokens, n_in)
            plain = per_call_us(lambda: F.linear(x, w))
            mkl = per_call_us(lambda: torch.ops.mkl._mkl_linear(x, packed, w, None, 1))
            row.append(f"{tokens} tok: {plain:.1f} / {mkl:.1f} us")
        print(f"linear {n_in}->{n_out} (F.linear / MKL prepacked): " + " | ".join(row))


if __name__ == "__main__":
    torch.set_num_threads(1)
    step_costs()
    linear_costs()
