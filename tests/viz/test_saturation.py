"""labkit.viz.saturation: notebook 08's saturation, logit-lens and exit-signal figures, built from real (tiny)
measurements, sized to the column, every trace fed lists."""
import plotly.graph_objects as go
import pytest

from labkit.measure.signals.saturation import exit_signal_rocs, fit_exit_classifier, measure_saturation
from labkit.viz import saturation as vs
from labkit.viz.style import FIGURE_WIDTH

from tiny_models import ToyTokenizer, tiny_model


@pytest.fixture(scope="module")
def sats():
    out = {}
    for name, seed in (("a", 0), ("b", 1)):
        model = tiny_model("llama", n_layers=3, vocab_size=97, seed=seed)
        out[name] = measure_saturation(model, ToyTokenizer(), ["def f(x):", "import os"], max_new_tokens=8,
                                       name=name, progress=False)
    return out

def check(fig):
    assert isinstance(fig, go.Figure) and fig.layout.title.text and len(fig.data) >= 1
    assert fig.layout.width is None or fig.layout.width <= FIGURE_WIDTH
    fig.to_json()                                                   # serialisable (what the browser receives)

def test_saturation_figures(sats):
    fig = vs.saturation_curves_figure(sats)
    check(fig)
    assert len(fig.data) == 3 * len(sats) and list(fig.data[0].x) == sats["a"].stages
    check(vs.lens_heatmap_figure(sats["a"], ToyTokenizer(), prompt=1, max_tokens=5))
    fig = vs.exit_roc_figure({k: exit_signal_rocs(v, classifier=fit_exit_classifier(v)) for k, v in sats.items()})
    check(fig)
    assert sum(t.name is not None and "AUC" in t.name for t in fig.data) == 3 * len(sats)
    with pytest.raises(ValueError):
        vs.lens_heatmap_figure(sats["a"], ToyTokenizer(), prompt=5)
