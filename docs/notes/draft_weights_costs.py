"""Why int8 draft weights make a self-draft cheaper on this CPU (docs/decisions.md, 2026-11-25): the time of a
linear layer when its weights stream from memory as they do inside the model (64 different matrices in turn, not one
matrix hot in cache), fp32 against weight-only int8, int4 and bf16; the draft cost c of `default`'s trained 8-block path
with the model's own weights and with int8 copies; and how often the int8 draft's top-1 token equals the fp32
draft's, teacher-forced on benchmark prompts of both sources; and what a 5-token verify costs right after three fp32
drafts, three int8 drafts or three full forwards (the speed table itself: `python -m labkit.bench`).

    python docs/notes/draft_weights_costs.py
"""

import time

import torch
import torch.nn.functional as F
from engine_costs import one_token_calls, per_call_us  # docs/notes/engine_costs.py, beside this script

import labkit
from labkit.artifacts.prompts import benchmark_prompts
from labkit.artifacts.results import trained_draft_path
from labkit.core.draft_weights import draft_weights
from labkit.core.skip import skipping


def streamed_linear_costs(n_matrices=64):
    for n_out, n_in in ((688, 256), (256, 256)):
        weights = [torch.randn(n_out, n_in) for _ in range(n_matrices)]
        scales = [w.abs().amax(1) / 127 for w in weights]
        int8 = [(w / s[:, None]).round().to(torch.int8) for w, s in zip(weights, scales)]
        scales = [s.bfloat16() for s in scales]
        bf16 = [w.bfloat16() for w in weights]
        x = torch.randn(1, n_in)
        fp32_us = per_call_us(lambda: [F.linear(x, w) for w in weights], 50) / n_matrices
        int8_us = per_call_us(lambda: [torch._weight_int8pack_mm(x.bfloat16(), w, s).float()
                                       for w, s in zip(int8, scales)], 50) / n_matrices
        bf16_us = per_call_us(lambda: [F.linear(x.bfloat16(), w).float() for w in bf16], 50) / n_matrices
        int4 = [int4_pack(w) for w in weights]
        int4_us = per_call_us(lambda: [torch._weight_int4pack_mm_for_cpu(x.bfloat16(), w, 32, sz).float()
                                       for w, sz in int4], 50) / n_matrices
        print(f"linear {n_in}->{n_out}, 1 token, weights streamed: fp32 {fp32_us:.1f} us, int8 {int8_us:.1f} us, "
              f"int4 {int4_us:.1f} us, bf16 {bf16_us:.1f} us (casts included)")


def int4_pack(weight, group=32):
    """Asymmetric int4 in groups of ``group`` along K, packed for the CPU kernel: (packed, scales and zeros)."""
    n, k = weight.shape
    g = weight.reshape(n, k // group, group)
    low, high = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    scale = ((high - low) / 15).clamp_min(1e-8)
    q = ((g - low) / scale).round().clamp(0, 15).to(torch.int32).reshape(n, k)
    scales_zeros = torch.stack([scale.squeeze(-1).t(), (low + 8 * scale).squeeze(-1).t()], -1).contiguous()
    return torch._convert_weight_to_int4pack_for_cpu(q, 2), scales_zeros.bfloat16()


def draft_costs(model, tokenizer, skip, rounds=3):
    calls, int8 = one_token_calls(model, tokenizer, skip), draft_weights(model, "int8")

    def draft_int8():
        with int8.swapped():
            calls["draft"]()

    for _ in range(rounds):
        a, b, c = (per_call_us(f, 300) / 1e3 for f in (calls["full"], calls["draft"], draft_int8))
        print(f"full {a:.3f} ms  draft fp32 {b:.3f} ms (c = {b / a:.3f})  draft int8 {c:.3f} ms (c = {c / a:.3f})")


def verify_after_drafts(model, tokenizer, skip, rounds=3, n=300):
    """The fp32 verify's time right after 3 drafts of each kind (or 3 full forwards), with and without a 16 MB
    write in between (more than the 2 MB L2 of a core here)."""
    calls, int8, junk = one_token_calls(model, tokenizer, skip), draft_weights(model, "int8"), torch.randn(4_000_000)

    def draft_int8():
        with int8.swapped():
            calls["draft"]()

    def verify_ms(before, thrash=False):
        total = 0.0
        with torch.inference_mode():
            for i in range(n + 30):
                for _ in range(3):
                    before()
                if thrash:
                    junk.mul_(1.0)
                t0 = time.perf_counter()
                calls["verify5"]()
                total += (time.perf_counter() - t0) if i >= 30 else 0.0
        return total / n * 1e3

    for _ in range(rounds):
        print(f"5-token verify after 3 fp32 drafts {verify_ms(calls['draft']):.3f} ms, "
              f"3 int8 drafts {verify_ms(draft_int8):.3f}, 3 full forwards {verify_ms(calls['full']):.3f}; "
              f"with a 16 MB write before it: fp32 {verify_ms(calls['draft'], True):.3f}, "
              f"int8 {verify_ms(draft_int8, True):.3f}")


def top1_agreement(model, tokenizer, skip, n_prompts=6):
    int8 = draft_weights(model, "int8")
    for source in ("stdlib", "packages"):
        same = total = 0
        for prompt in benchmark_prompts(n_prompts, source=source):
            ids = tokenizer(prompt.text, return_tensors="pt")["input_ids"]
            with torch.inference_mode(), skipping(model, skip):
                fp32 = model(input_ids=ids).logits[0].argmax(-1)
                with int8.swapped():
                    quantized = model(input_ids=ids).logits[0].argmax(-1)
            same, total = same + int((fp32 == quantized).sum()), total + len(fp32)
        print(f"{source}: the int8 draft's top-1 equals the fp32 draft's at {same / total:.3f} of {total} positions")


if __name__ == "__main__":
    torch.set_num_threads(1)
    streamed_linear_costs()
    model, tokenizer = labkit.load_model("default")
    skip = next(iter(trained_draft_path("default").values()))
    draft_costs(model, tokenizer, skip)
    top1_agreement(model, tokenizer, skip)
    verify_after_drafts(model, tokenizer, skip)
