"""Which weight layout gathers a width draft's neurons cheapest on this CPU (labkit/core/width.py's choice).

One decoder MLP of the shipped model's size (256 -> 688 -> 256, gated), one token, one thread, the eight layers'
weights used in turn (as inside the model: not one matrix hot in cache), timed interleaved through the lab's harness
(labkit.measure.harness.interleaved_ms), at kept fractions 0.1, 0.25, 0.5 of the neurons:

- dense: the full MLP (three matrix-vector products);
- rows + columns: gate and up rows gathered, the (H, I) down projection's columns gathered;
- rows + down^T: gate and up rows gathered apart, the down projection stored transposed (I, H), rows gathered;
- fused + down^T: gate and up interleaved in one (I, 2, H) tensor (one gather brings both), down transposed (the
  layout GatheredMLP uses);
- pruned: k neurons stored contiguous and dense (no gather: PrunedMLP);
- predictor: the rank-32 predictor's scores and top-k alone; GatheredMLP: predictor, gathers and products together.

Prints each one's median microseconds per call and its ratio to dense (median, min-max over rounds).

    PYTHONPATH=. python docs/notes/width_layouts.py
"""
import torch
import torch.nn.functional as F
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP

from labkit.core.width import GatheredMLP, PrunedMLP
from labkit.measure.harness import interleaved_ms, ratio_spread

H, I, LAYERS, RANK = 256, 688, 8, 32


def mlps():
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=H, intermediate_size=I, hidden_act="silu")
    return [LlamaMLP(config).eval() for _ in range(LAYERS)]


def calls_at(kept: float, layers, x):
    k = round(kept * I)
    idx = [torch.randperm(I)[:k].sort().values for _ in layers]
    gate = [m.gate_proj.weight.detach() for m in layers]
    up = [m.up_proj.weight.detach() for m in layers]
    down = [m.down_proj.weight.detach() for m in layers]
    down_t = [d.t().contiguous() for d in down]
    fused = [torch.stack([g, u], 1).contiguous() for g, u in zip(gate, up)]
    act = F.silu
    a = [torch.randn(H, 2 * RANK) for _ in layers]
    b = [torch.randn(2, RANK, I) for _ in layers]
    gathered = [GatheredMLP(m, a_, b_, k) for m, a_, b_ in zip(layers, a, b)]
    pruned = [PrunedMLP(m, torch.rand(I), k) for m in layers]
    x1 = x[0]

    def rows_cols():
        for g, u, d, i in zip(gate, up, down, idx):
            h = act(g.index_select(0, i) @ x1) * (u.index_select(0, i) @ x1)
            d.index_select(1, i) @ h

    def rows_down_t():
        for g, u, dt, i in zip(gate, up, down_t, idx):
            h = act(g.index_select(0, i) @ x1) * (u.index_select(0, i) @ x1)
            h @ dt.index_select(0, i)

    def fused_down_t():
        for f, dt, i in zip(fused, down_t, idx):
            gu = f.index_select(0, i).reshape(2 * k, H) @ x1
            (act(gu[0::2]) * gu[1::2]) @ dt.index_select(0, i)

    return {
        "dense": lambda: [m(x) for m in layers],
        "rows + columns": rows_cols,
        "rows + down^T": rows_down_t,
        "fused + down^T": fused_down_t,
        "pruned (dense k)": lambda: [m(x) for m in pruned],
        "predictor alone": lambda: [g.scores(x).topk(k, dim=-1) for g in gathered],
        "GatheredMLP": lambda: [g(x) for g in gathered],
    }


@torch.inference_mode()
def main():
    torch.set_num_threads(1)
    layers, x = mlps(), torch.randn(1, H)
    print("one gated MLP 256 -> 688 -> 256, one token, 8 layers' weights in turn, one thread; microseconds per MLP "
          "(median over rounds) and the ratio to dense (median, min-max)")
    for kept in (0.1, 0.25, 0.5):
        samples = interleaved_ms(calls_at(kept, layers, x), repeats=15, inner=20, warmup=3)
        print(f"\nkept {kept:g} ({round(kept * I)} of {I} neurons)")
        for name, ms in samples.items():
            ratio, low, high = ratio_spread(ms, samples["dense"])
            us = 1e3 * sorted(ms)[len(ms) // 2] / LAYERS
            print(f"  {name:18s} {us:7.1f} us   x{ratio:.2f} of dense ({low:.2f}-{high:.2f})")


if __name__ == "__main__":
    main()
