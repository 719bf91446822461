"""Why the fp32 verify runs slower right after int8 drafts (docs/decisions.md, 2026-11-25): a 4-token verify of
`default` timed right after three one-token drafts with the trained 8-block path, on a 60-token stdlib context, with
what runs between them varied. If the int8 kernel left the core slower (clock, tile state), one int8 call or a pause
would show it; if it is the memory hierarchy (fp32 drafts read the kept blocks' fp32 weights, which the verify reads
again a moment later; int8 drafts read other bytes), reading the fp32 weights after the int8 drafts brings the verify
back, and unrelated traffic makes it worse.

    python docs/notes/verify_after_int8.py
"""

import time

import torch

import labkit
from labkit.artifacts.results import trained_draft_path
from labkit.core.cache import crop_to, new_cache
from labkit.core.draft_weights import draft_weights
from labkit.core.forward import forward_tokens
from labkit.core.skip import skipping

T = 60


def setup():
    model, tokenizer = labkit.load_model("default")
    text = "\n".join(p.text for p in labkit.prompts(6, source="stdlib"))
    ids = tokenizer(text, return_tensors="pt")["input_ids"][:, :T]
    cache = new_cache(model)
    with torch.inference_mode():
        forward_tokens(model, ids, 0, cache)
    return model, cache


def three_drafts(model, cache, skip, int8):
    with torch.inference_mode(), skipping(model, skip), (int8.swapped() if int8 else torch.inference_mode()):
        for i in range(3):
            forward_tokens(model, [5 + i], T + i, cache, logits_to_keep=1)
    crop_to(cache, T)


def verify_ms(model, cache, before, n=150, warmup=20):
    total = 0.0
    with torch.inference_mode():
        for i in range(n + warmup):
            before()
            t0 = time.perf_counter()
            forward_tokens(model, [5, 6, 7, 8], T, cache)
            crop_to(cache, T)
            total += time.perf_counter() - t0 if i >= warmup else 0.0
    return 1e3 * total / n


if __name__ == "__main__":
    torch.set_num_threads(1)
    model, cache = setup()
    skip = next(iter(trained_draft_path("default").values()))
    int8 = draft_weights(model, "int8")
    one_int8 = int8._swaps[0][3]
    x, junk = torch.randn(1, one_int8.in_features), torch.randn(1000, 1000)          # junk: 4 MB of fp32
    weights = [p for p in model.parameters() if p.dim() == 2]                          # every fp32 matrix

    def read_weights():                                                                 # memory reads, little math
        for w in weights:
            w.max()
    cases = {
        "3 fp32 drafts": lambda: three_drafts(model, cache, skip, None),
        "3 int8 drafts": lambda: three_drafts(model, cache, skip, int8),
        "3 int8 drafts, 2 ms pause": lambda: (three_drafts(model, cache, skip, int8), time.sleep(0.002)),
        "3 int8 drafts, a 4 MB fp32 matmul": lambda: (three_drafts(model, cache, skip, int8), junk @ junk),
        "3 int8 drafts, every fp32 weight read": lambda: (three_drafts(model, cache, skip, int8), read_weights()),
        "3 fp32 drafts, one int8 linear": lambda: (three_drafts(model, cache, skip, None), one_int8(x)),
        "3 fp32 drafts, 2 ms pause": lambda: (three_drafts(model, cache, skip, None), time.sleep(0.002)),
    }
    for _ in range(2):
        print(" | ".join(f"{name}: {verify_ms(model, cache, before):.3f} ms" for name, before in cases.items()),
              flush=True)
