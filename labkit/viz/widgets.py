"""FigureWidgets whose data reach plotly.js intact: the one place every widget of the lab builds and updates them.

Why this module exists. plotly 7's FigureWidget runs in the browser as an anywidget; its front-end model keeps
the figure's traces (``_widget_data``) and applies every Python-side update message to them *before*
deserializing it. ``FigureWidget.batch_update`` sends one message for all traces it touched, and for a trace
whose property did not change (``x`` of a curve whose grid stayed the same while its ``y`` moved) it sends the
placeholder ``"_undefined_"``. The front-end model writes that string into the trace; the next view rendered
from the model (a widget displayed after it was updated, as the playground and the BO stepper are after
timing their sliders, or any second view of it) deserializes it to ``undefined``: plotly.js gets ``y`` without
``x`` and draws each curve against its index 0, 1, 2, ...

So here:

* :func:`as_widget` turns a ``go.Figure`` into a FigureWidget whose arrays are plain Python lists;
* :func:`update_widget` assigns new trace data (and layout) with every property given for every trace in the
  message, never a placeholder, the arrays as plain lists.

Widgets get plain Python lists, never numpy arrays (a project convention): lists serialize to JSON the same way
on every path, so what plotly.js draws is what Python computed. numpy arrays travel as binary buffers instead: a
non-contiguous view (a column of a grid) cannot be sent at all ("Buffer ... is not contiguous"), float32 arrive
rounded to float32, and each dtype takes its own path. Non-finite numbers become ``None`` (a gap in a line;
JSON has no NaN).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from .style import FIGURE_WIDTH

__all__ = ["WIDGET_WIDTH", "plain", "as_widget", "update_widget"]

# A FigureWidget is drawn before the page attaches it to the notebook, so it cannot take the output column's width
# as a static figure does (plotly.js falls back to 700 px): it gets this width unless its figure sets one.
WIDGET_WIDTH = FIGURE_WIDTH


def plain(value: Any) -> Any:
    """``value`` with every array (numpy, torch, pandas; views included) as a nested Python list, every
    number as a Python int/float, and NaN/±inf as ``None``; dicts, lists and tuples are walked."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, bytes, bool)) or value is None:
        return value
    if hasattr(value, "detach"):                        # torch tensor
        value = value.detach().cpu().numpy()
    if hasattr(value, "to_numpy"):                      # pandas Series / Index
        value = value.to_numpy()
    if hasattr(value, "tolist"):                        # numpy array, view or scalar
        return plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def as_widget(fig: go.Figure) -> go.FigureWidget:
    """A FigureWidget of ``fig`` whose trace and layout arrays are plain Python lists, :data:`WIDGET_WIDTH` wide
    unless ``fig`` sets a width.

    (``fig.to_dict()`` is no shortcut: it encodes numpy arrays as base64 typed-array specs.)"""
    layout = plain(fig.layout.to_plotly_json())
    layout.setdefault("width", WIDGET_WIDTH)
    return go.FigureWidget(data=plain([trace.to_plotly_json() for trace in fig.data]), layout=layout)


def _groups(traces: Mapping[int, Mapping[str, Any]]) -> dict[tuple[str, ...], list[int]]:
    """Trace indexes grouped by the exact set of properties they update (each group is one complete message)."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, props in sorted(traces.items()):
        if props:
            groups.setdefault(tuple(sorted(props)), []).append(int(index))
    return groups


def update_widget(fig: go.Figure, traces: Mapping[int, Mapping[str, Any]] | None = None,
                  layout: Mapping[str, Any] | None = None) -> None:
    """Set trace properties and layout of ``fig`` (a FigureWidget, or a plain Figure: same effect, no message).

    ``traces``: ``{trace index: {property path: value}}``, e.g. ``{0: {"x": xs, "y": ys}, 6: {"name": "EI",
    "line.color": "#1f77b4"}}``; ``layout``: ``{property path: value}``, e.g. ``{"title.text": "step 3"}``.
    Values are converted with :func:`plain`. Traces that update the same properties go in one
    ``plotly_update`` message that names every property for every one of its traces (unlike ``batch_update``,
    which fills the gaps with placeholders the front end mishandles, see the module docstring), so a figure
    with one kind of update (x and y of every trace) still refreshes in one message.
    """
    layout = {k: plain(v) for k, v in (layout or {}).items()}
    for keys, indexes in _groups(traces or {}).items():
        restyle = {key: [plain(traces[i][key]) for i in indexes] for key in keys}
        fig.plotly_update(restyle_data=restyle, relayout_data=layout or None, trace_indexes=indexes)
        layout = {}
    if layout:
        fig.plotly_update(relayout_data=layout)
