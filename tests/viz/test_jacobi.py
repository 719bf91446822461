"""labkit.viz.jacobi: notebook 06's figures draw what the trace says (the positions x iterations grid, tokens fixed
per iteration, the methods compared), fit the column, and carry titles and axis labels."""
import pandas as pd
import pytest
import torch

from labkit import jacobi_generate
from labkit.viz import jacobi as vj
from labkit.viz.style import FIGURE_WIDTH

from tiny_models import ToyTokenizer, tiny_model


def test_grid_states_follow_the_trace():
    model = tiny_model("llama", n_layers=2, vocab_size=97)
    result = jacobi_generate(model, torch.tensor([[3, 4, 5]]), 12, block_size=5)
    trace = result.trace
    view = vj.grid_view(result, ToyTokenizer())
    assert len(view["x"]) == len(trace.iterations) and len(view["y"]) == 12
    for k, it in enumerate(trace.iterations):
        for row, pos in enumerate(range(3, 15)):
            state = view["z"][row][k]
            if pos < it.position:
                assert state == vj.STATES.index("final")
            elif pos >= it.position + it.width:
                assert state is None
            elif pos - it.position < it.n_fixed:
                assert state == vj.STATES.index("fixed")
            else:
                j = pos - it.position
                assert state == vj.STATES.index("changed" if it.guess[j] != it.output[j] else "unchanged")
    masked = vj.grid_view(result, ToyTokenizer(), upto=1)
    assert all(row[k] is None for row in masked["z"] for k in range(2, len(trace.iterations)))
    assert masked["fixed_so_far"] == sum(it.n_emitted for it in trace.iterations[:2])
    fig = vj.iteration_grid_figure(result, ToyTokenizer(), upto=1)
    assert fig.layout.width <= FIGURE_WIDTH and "after iteration 2" in fig.layout.title.text

def test_comparison_and_histogram_figures():
    frame = pd.DataFrame({"ms_per_token": [5.0, 6.0], "ms_min": [4.8, 5.5], "ms_max": [5.3, 6.4],
                          "forwards_per_token": [1.0, 0.95], "speedup": [1.0, 5 / 6],
                          "speedup_min": [1.0, 0.80], "speedup_max": [1.0, 0.86]},
                         index=pd.Index(["plain loop", "jacobi, pad"], name="method"))
    fig = vj.decoder_comparison_figure(frame)
    assert list(fig.data[0].x) == [1.0, 0.95] and list(fig.data[1].x) == [1.0, 5 / 6]
    # the error bars are the per-repetition ratios' min–max (what the sentence says); the plain loop has none
    assert fig.data[1].error_x.array[0] == 0.0 and fig.data[1].error_x.arrayminus[0] == 0.0
    assert fig.data[1].error_x.array[1] == pytest.approx(0.86 - 5 / 6)
    assert fig.data[1].error_x.arrayminus[1] == pytest.approx(5 / 6 - 0.80)
    assert len(fig.data) == 2                                      # no reference: this machine's bars alone
    fig = vj.decoder_comparison_figure(frame, reference={"jacobi, pad": [0.76, 0.74, 0.77], "other": [1, 1, 1]})
    diamonds = fig.data[2]
    assert list(diamonds.y) == ["jacobi, pad"] and list(diamonds.x) == [0.76] and fig.data[1].showlegend
    model = tiny_model("llama", n_layers=2, vocab_size=97)
    trace = jacobi_generate(model, torch.tensor([[3, 4, 5]]), 10, block_size=4).trace
    fig = vj.fixed_per_iteration_figure({"jacobi, pad": [trace]})
    shares = list(fig.data[0].y)
    assert sum(shares) == pytest.approx(1.0) and shares[0] == pytest.approx(
        sum(it.n_fixed == 1 for it in trace.iterations) / len(trace.iterations))
