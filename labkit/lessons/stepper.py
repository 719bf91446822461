"""What every stepper in the notebooks shares: ◀ ▶ buttons around an integer slider, the buttons moving the slider
by one (clamped to its range) and the slider's observer redrawing; a Plotly figure shown as a FigureWidget where a
widget frontend exists (updated in place), else kept as a static figure that is still updated.

Used by the BO stepper (01), the trace replayer (03), the iteration stepper (06) and the tree stepper (10)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..viz.widgets import as_widget

__all__ = ["SliderLook", "StepControls", "step_controls", "live_figure", "stepper_box"]


@dataclass(frozen=True)
class SliderLook:
    """How the controls look and react: widths, and whether the slider redraws while it is dragged."""

    slider_width: str = "520px"
    button_width: str = "44px"
    continuous_update: bool = False


@dataclass
class StepControls:
    """◀, the slider, ▶ and the row that holds them."""

    prev_button: object
    slider: object
    next_button: object
    row: object

    def step_by(self, delta: int) -> None:
        """Move the slider by ``delta``, clamped to its range (its observer does the rest)."""
        self.slider.value = min(max(self.slider.value + delta, self.slider.min), self.slider.max)


def step_controls(description: str, on_change: Callable[[], None], span: tuple[int, int, int], *, what: str = "step",
                  look: SliderLook = SliderLook(), disabled: bool = False) -> StepControls:
    """◀ slider ▶ with ``description`` on the slider, ``span`` its (value, min, max), tooltips "previous / next
    ``what``", ``on_change()`` called whenever the slider's value changes (by hand or by a button)."""
    import ipywidgets as widgets

    value, low, high = span
    narrow = widgets.Layout(width=look.button_width)
    prev_button = widgets.Button(description="◀", tooltip=f"previous {what}", layout=narrow)
    next_button = widgets.Button(description="▶", tooltip=f"next {what}", layout=narrow)
    slider = widgets.IntSlider(value=value, min=low, max=high, description=description,
                               continuous_update=look.continuous_update, disabled=disabled,
                               layout=widgets.Layout(width=look.slider_width))
    controls = StepControls(prev_button, slider, next_button, widgets.HBox([prev_button, slider, next_button]))
    prev_button.on_click(lambda _: controls.step_by(-1))
    next_button.on_click(lambda _: controls.step_by(+1))
    slider.observe(lambda _: on_change(), names="value")
    return controls


def live_figure(fig):
    """``fig`` as a FigureWidget (updated in place), or ``fig`` itself where there is no widget frontend."""
    try:
        return as_widget(fig)
    except Exception:  # no anywidget / widget frontend: keep the static figure, still updated
        return fig


def stepper_box(children: list, figure):
    """A VBox of ``children`` and, when it is a widget, the figure below them."""
    import ipywidgets as widgets

    return widgets.VBox(list(children) + ([figure] if isinstance(figure, widgets.DOMWidget) else []))
