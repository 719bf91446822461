"""The benchmark's figure: speedup over transformers' ``generate`` per method, with the run-to-run spread."""
from __future__ import annotations

import plotly.graph_objects as go

from ..measure.bench_results import is_number
from .style import PALETTE

__all__ = ["bench_figure"]


def bench_figure(rows: list[dict], title: str = "Speedup over transformers' generate (greedy, batch 1)"):
    """Horizontal bars: speedup vs HF generate, min-max spread as error bars; 1.0 marked."""
    labels = {"baseline": "plain decoding", "labkit": "labkit decoders", "transformers": "transformers built-in"}
    fig = go.Figure()
    for family in ("baseline", "transformers", "labkit"):
        sel = [r for r in rows if r["family"] == family and is_number(r.get("speedup_vs_generate"))]
        if not sel:
            continue
        base = {r["model"]: r["ms_per_token"] * r["speedup_vs_generate"] for r in sel}
        fig.add_bar(
            y=[r["method"] for r in sel], x=[r["speedup_vs_generate"] for r in sel], orientation="h",
            name=labels[family], marker_color=PALETTE[family],
            error_x=dict(type="data", symmetric=False,
                         array=[base[r["model"]] / r["ms_min"] - r["speedup_vs_generate"] for r in sel],
                         arrayminus=[r["speedup_vs_generate"] - base[r["model"]] / r["ms_max"] for r in sel]),
            hovertemplate="%{y}<br>%{x:.2f}x<extra></extra>",
        )
    fig.add_vline(x=1.0, line_dash="dash", line_color="black")
    fig.add_annotation(x=1.0, y=1.0, yref="paper", yanchor="bottom", text="as fast as generate", showarrow=False)
    fig.update_layout(title=title, xaxis_title="speedup vs model.generate (x, higher is faster)",
                      yaxis_title="method", yaxis_autorange="reversed", height=120 + 28 * len(rows),
                      legend_title_text="kind", margin=dict(l=320))
    return fig
