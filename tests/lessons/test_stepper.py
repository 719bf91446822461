"""labkit.lessons.stepper: the ◀ ▶ slider every stepper shares: the buttons move the slider by one, clamped to its
range, and every change reaches the stepper's redraw once; the figure box shows a widget figure and leaves out a
static one."""
import plotly.graph_objects as go

from labkit.lessons.stepper import live_figure, step_controls, stepper_box


def test_buttons_move_the_slider_by_one_within_its_range_and_redraw():
    calls = []
    controls = step_controls("step", lambda: calls.append(controls.slider.value), (1, 1, 3))
    controls.next_button.click()
    controls.next_button.click()
    controls.next_button.click()                           # already at the end: no change, no redraw
    assert controls.slider.value == 3 and calls == [2, 3]
    controls.prev_button.click()
    assert calls == [2, 3, 2] and controls.prev_button.tooltip == "previous step"
    assert list(controls.row.children) == [controls.prev_button, controls.slider, controls.next_button]


def test_the_box_shows_the_figure_only_when_it_is_a_widget():
    controls = step_controls("stage", lambda: None, (0, 0, 2), what="stage")
    static = go.Figure()
    assert list(stepper_box([controls.row], static).children) == [controls.row]
    live = live_figure(go.Figure())
    box = stepper_box([controls.row], live)
    assert len(box.children) == (2 if live is not static and not isinstance(live, go.Figure) else 1)
