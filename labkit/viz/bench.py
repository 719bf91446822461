"""The benchmark's figure: speedup over the lab's plain loop for the rows that teach, with the run-to-run spread."""
from __future__ import annotations

import plotly.graph_objects as go

from ..measure.bench.results import is_number, upgrade_row
from .style import PALETTE

__all__ = ["TEACHING_ROWS", "teaching_rows", "bench_figure"]

# The rows notebook 04 shows, in reading order: (which model: the benchmark's first, or its second, the plain
# twin; how the method's label begins after "<model>: "): the reference, what transformers offers, the playground's
# method with each stop rule, prompt lookup in front, and the same method on the plain twin (why the skip-robust
# training matters). The other rows belong to notebooks 06-09.
TEACHING_ROWS = (("first", "labkit plain loop"), ("first", "HF generate"), ("first", "self-spec, fixed K"),
                 ("first", "self-spec, static threshold"), ("first", "self-spec, adaptive threshold"),
                 ("first", "self-spec adaptive + prompt lookup"), ("first", "HF prompt lookup"),
                 ("first", "HF assistant model"), ("first", "HF early exit"),
                 ("second", "self-spec, adaptive threshold"))


def teaching_rows(rows: list[dict], wanted=TEACHING_ROWS) -> list[dict]:
    """The benchmark rows ``wanted`` names that were timed, in that order, each with its speedup over its own
    model's plain loop and that speedup's spread (the plain loop's median ms / the row's max and min ms per token
    over the repetitions): ``speedup``, ``speedup_lo``, ``speedup_hi``."""
    rows = [upgrade_row(r) for r in rows]
    models = list(dict.fromkeys(r["model"] for r in rows))
    plain = {r["model"]: r["ms_per_token"] for r in rows if r["method"].endswith("labkit plain loop")}
    out = []
    for which, begins in wanted:
        model = models[0 if which == "first" else 1] if len(models) > (which != "first") else None
        row = next((r for r in rows if r["model"] == model
                    and r["method"].split(": ", 1)[-1].startswith(begins)), None)
        if row is None or model not in plain or not is_number(row.get("ms_per_token")):
            continue
        base = plain[model]
        out.append({**row, "speedup": base / row["ms_per_token"], "speedup_lo": base / row["ms_max"],
                    "speedup_hi": base / row["ms_min"]})
    return out


def bench_figure(rows: list[dict], title: str = "Speedup over the lab's plain loop (greedy, batch 1)"):
    """Horizontal bars for :func:`teaching_rows`: speedup over the plain loop (1.0, dashed), min-max of the row's
    ms per token over the repetitions as error bars, coloured by who made the method."""
    labels = {"baseline": "plain decoding", "labkit": "labkit decoders", "transformers": "transformers built-in"}
    shown = teaching_rows(rows)
    fig = go.Figure()
    for family in ("baseline", "transformers", "labkit"):
        sel = [r for r in shown if r["family"] == family]
        if not sel:
            continue
        fig.add_bar(
            y=[r["method"] for r in sel], x=[r["speedup"] for r in sel], orientation="h",
            name=labels[family], marker_color=PALETTE[family],
            error_x=dict(type="data", symmetric=False, array=[r["speedup_hi"] - r["speedup"] for r in sel],
                         arrayminus=[r["speedup"] - r["speedup_lo"] for r in sel]),
            hovertemplate="%{y}<br>%{x:.2f}x the plain loop<extra></extra>",
        )
    fig.add_vline(x=1.0, line_dash="dash", line_color="black")
    fig.add_annotation(x=1.0, y=1.0, yref="paper", yanchor="bottom", text="as fast as the plain loop",
                       showarrow=False)
    fig.update_layout(title=title, xaxis_title="speedup over the lab's plain loop (×, higher is faster)",
                      yaxis_title="method", height=160 + 30 * len(shown), legend_title_text="kind",
                      margin=dict(l=320), template="plotly_white",
                      yaxis=dict(categoryorder="array", categoryarray=[r["method"] for r in shown],
                                 autorange="reversed"))
    return fig
