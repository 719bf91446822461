"""Figures of notebooks 05 and 06: they draw what the data says (values, states, masks), fit the column, and
carry titles and axis labels."""
import pandas as pd
import pytest
import torch

from labkit import jacobi_generate
from labkit.measure.comparisons import speculative_sampling as ss
from labkit.viz import jacobi as vj
from labkit.viz import sampling as vs
from labkit.viz.style import FIGURE_WIDTH

from tiny_models import ToyTokenizer, tiny_model

LABELS = {i: f"t{i}" for i in range(50)}


def pq():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(3 * torch.randn(50, generator=g), 0)
    q = torch.softmax(torch.log(p) + torch.randn(50, generator=g), 0)
    return p, q


def test_distribution_view_and_figure():
    p, q = pq()
    view = vs.distribution_view(p, q, LABELS, k=5, drafted=int(q.argmax()))
    ids = view["ids"]
    assert ids[0] == int(p.argmax()) and int(q.argmax()) in ids
    assert view["p"] == [float(p[i]) for i in ids] and view["residual"][0] >= 0
    assert all(0 <= a <= 1 for a in view["accept"]) and sum(view["outline"]) == 3
    assert view["alpha"] == pytest.approx(ss.alpha(p, q))
    fig = vs.distributions_figure(view, where="here")
    assert fig.layout.width <= FIGURE_WIDTH and "α = Σ min(p, q)" in fig.layout.title.text
    assert [list(fig.data[i].y) for i in range(4)] == [view[k] for k in ("p", "q", "accept", "residual")]


def test_names_stay_unique():
    p, q = pq()
    view = vs.distribution_view(p, q, {i: "same" for i in range(50)}, k=4)
    assert len(set(view["x"])) == len(view["x"])


def test_monte_carlo_figure_titles_carry_the_verdicts():
    p, q = pq()
    rows = ss.monte_carlo(p, q, 5000, seed=1)
    fig = vs.monte_carlo_figure(p, rows, LABELS)
    titles = [a.text for a in fig.layout.annotations]
    assert len(fig.data) == 6 and fig.layout.width <= FIGURE_WIDTH
    for row, title in zip(rows, titles):
        assert row["rule"] in title and ("consistent with p" if row["consistent_with_p"] else "NOT") in title
    view = vs.monte_carlo_view(p, rows[1], LABELS)                  # what is drawn: emitted − p, and the noise band
    assert view["deviation"] == pytest.approx([e - q for e, q in zip(view["empirical"], view["p"])])
    assert list(fig.data[3].y) == pytest.approx(view["deviation"]) and all(n >= 0 for n in view["noise"])
    for i, row in enumerate(rows, start=1):   # an exact rule's bars stay inside half its panel: it does not look wrong
        top = fig.layout[f"yaxis{i if i > 1 else ''}"].range[1]
        mine = vs.monte_carlo_view(p, row, LABELS)
        assert top >= 2 * max(mine["noise"]) and top >= max(abs(d) for d in mine["deviation"])
        if row["exact"]:
            assert max(abs(d) for d in mine["deviation"]) <= 0.75 * top


def test_tick_labels_are_upright_and_wrapped():
    assert vs._wrap("abcdefghijkl", 5) == "abcde<br>fghij<br>kl"
    fig = vs.distributions_figure(vs.distribution_view(*pq(), LABELS))
    assert fig.layout.xaxis3.tickangle == 0


def test_lossless_schematic_stacks_to_p():
    view = vs.lossless_view()
    assert [a + r for a, r in zip(view["accepted"], view["residual"])] == pytest.approx(view["p"])
    assert view["alpha"] + view["rest"] == pytest.approx(1.0)
    fig = vs.lossless_schematic(view)
    assert len(fig.data) == 4 and "= p" in fig.layout.title.text
    with pytest.raises(ValueError):
        vs.lossless_view({"a": 1.0}, {"b": 1.0})


def test_temperature_figure_marks_the_current_temperature():
    frame = pd.DataFrame({"temperature": [0.5, 1.0], "measured_alpha": [0.7, 0.6], "predicted_alpha": [0.72, 0.61],
                          "tokens_per_step": [2.5, 2.2], "expected_tokens_per_step": [2.8, 2.4],
                          "measured_speedup": [1.1, 0.9], "speedup_min": [1.0, 0.85], "speedup_max": [1.15, 1.0],
                          "predicted_speedup": [1.2, 1.0], "predicted_speedup_cv": [1.0, 0.9]})
    view = vs.temperature_view(frame, ([0.5, 0.75, 1.0], [0.7, 0.65, 0.6]))
    fig = vs.temperature_figure(view, gamma=4, current=0.75)
    lines = [s for s in fig.layout.shapes if s.name == vs.CURRENT_T]
    assert len(lines) == 3 and all(s.x0 == 0.75 and s.visible for s in lines)
    assert list(fig.data[0].y) == [0.7, 0.6] and fig.layout.width <= FIGURE_WIDTH
    speedup = next(d for d in fig.data if d.name.startswith("speedup, measured"))     # its spread as error bars
    assert list(speedup.error_y.array) == pytest.approx([0.05, 0.1])
    assert list(speedup.error_y.arrayminus) == pytest.approx([0.1, 0.05])
    assert fig.layout.yaxis2.rangemode == "tozero"          # tokens per step from 0: 2.2 vs 2.5 not a cliff


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
