"""labkit.viz.widgets: what the FigureWidgets of the lab send to plotly.js (no browser; see tests/browser)."""
import math

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.basedatatypes import Undefined
from plotly.subplots import make_subplots

from labkit.viz.widgets import WIDGET_WIDTH, as_widget, plain, update_widget


def _messages(widget):
    """Every update/restyle/relayout message the widget sends to the front end, as sent."""
    sent = []
    widget.observe(lambda change: sent.append(change["new"]) if change["new"] is not None else None,
                   names=["_py2js_update", "_py2js_restyle", "_py2js_relayout"])
    return sent


def _arrays_in(value):
    if isinstance(value, dict):
        return [a for v in value.values() for a in _arrays_in(v)]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _arrays_in(v)]
    return [value] if isinstance(value, np.ndarray) else []


def test_plain_turns_arrays_views_tensors_and_scalars_into_python_values():
    grid = np.arange(12.0).reshape(3, 4)
    out = plain({"view": grid[:, 1], "tensor": torch.tensor([1.5, float("nan")]), "f32": np.float32(0.5),
                 "ints": (np.int64(3), 4), "inf": -math.inf, "text": "α", "none": None})
    assert out == {"view": [1.0, 5.0, 9.0], "tensor": [1.5, None], "f32": 0.5, "ints": [3, 4], "inf": None,
                   "text": "α", "none": None}
    assert type(out["f32"]) is float and type(out["ints"][0]) is int


def test_as_widget_holds_plain_lists_and_a_width_that_fits_the_column():
    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Scatter(x=np.linspace(0, 1, 5), y=np.arange(5.0)[::-1]), row=1, col=2)
    fig.add_hline(y=np.float64(1.0), row=1, col=2)
    widget = as_widget(fig)
    assert isinstance(widget, go.FigureWidget)
    assert not _arrays_in(widget._widget_data) and not _arrays_in(widget._widget_layout)
    assert widget._widget_data[0]["x"] == [0.0, 0.25, 0.5, 0.75, 1.0] and widget.data[0].xaxis == "x2"
    assert widget.layout.width == WIDGET_WIDTH and as_widget(fig.update_layout(width=600)).layout.width == 600


def test_update_widget_names_every_property_of_every_trace_it_sends():
    """The bug it fixes: batch_update sends "_undefined_" for the x of a trace whose x did not change, which the
    front-end model stores as the trace's x; here every message is complete and holds lists only."""
    fig = go.Figure([go.Scatter(x=[0.0, 1.0], y=[0.0, 1.0]), go.Scatter(x=[0.5], y=[0.5]), go.Scatter(y=[1, 2])])
    widget = as_widget(fig)
    sent = _messages(widget)
    ys = np.array([[2.0, 3.0], [4.0, 5.0]])
    update_widget(widget, {0: {"x": np.array([0.0, 1.0]), "y": ys[:, 1]},          # x unchanged, y a strided view
                           1: {"x": np.array([0.25]), "y": torch.tensor([0.75])},
                           2: {"name": "renamed", "line.color": "red"}},
                  layout={"title.text": "step 2"})
    assert len(sent) == 2 and not _arrays_in(sent)
    first, second = sent
    assert first["style_traces"] == [0, 1] and first["style_data"] == {"x": [[0.0, 1.0], [0.25]],
                                                                       "y": [[3.0, 5.0], [0.75]]}
    assert first["layout_data"] == {"title.text": "step 2"}
    assert second["style_traces"] == [2] and second["style_data"] == {"line.color": ["red"], "name": ["renamed"]}
    assert list(widget.data[0].y) == [3.0, 5.0] and widget.data[2].name == "renamed"
    assert widget.layout.title.text == "step 2"


def test_update_widget_sends_nothing_when_nothing_changed_and_works_on_plain_figures():
    widget = as_widget(go.Figure(go.Scatter(x=[1.0, 2.0], y=[3.0, 4.0])))
    sent = _messages(widget)
    update_widget(widget, {0: {"x": np.array([1.0, 2.0]), "y": [3.0, 4.0]}})
    assert sent == []
    fig = go.Figure(go.Scatter(x=[1.0], y=[2.0]))
    update_widget(fig, {0: {"y": np.array([float("nan")])}}, layout={"xaxis.range": np.array([0.0, 3.0])})
    assert list(fig.data[0].y) == [None] and list(fig.layout.xaxis.range) == [0.0, 3.0]


def _placeholders(value) -> int:
    if isinstance(value, dict):
        return sum(_placeholders(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_placeholders(v) for v in value)
    return int(value is Undefined)


def test_bo_stepper_sends_complete_messages_of_lists():
    """A widget of the lab end to end: steps and a re-run send lists, and no trace property left as a placeholder."""
    from labkit.lessons.bayesian_optimization import BOStepper

    stepper = BOStepper(n_iter=4, n_init=2, seed=1)
    assert not _arrays_in(stepper.figure._widget_data)
    sent = _messages(stepper.figure)
    stepper.step(+1)
    stepper.acquisition_dropdown.value = "LCB"
    assert len(sent) >= 2 and not _arrays_in(sent) and _placeholders(sent) == 0
    assert stepper.figure.data[6].name == "acquisition: LCB"
