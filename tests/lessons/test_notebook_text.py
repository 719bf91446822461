"""labkit.lessons.notebook_text: a run's text without figures, widgets, progress bars and "this machine" outputs, and
the lines two runs do not share (fed runs that agree, runs whose live lines differ, and a run whose verdict moved)."""
import nbformat

from labkit.lessons import notebook_text as nt


def run(*outputs_per_cell):
    nb = nbformat.v4.new_notebook()
    for outputs in outputs_per_cell:
        cell = nbformat.v4.new_code_cell("pass")
        cell.outputs = list(outputs)
        nb.cells.append(cell)
    return nb


def stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def display(data):
    return nbformat.v4.new_output("display_data", data=data)


def test_text_lines_keep_what_a_reader_compares():
    nb = run([stream("identical to plain: True\nOn this machine X measured 1.31x (1.20-1.41)\n"),
              stream("prompts:  40%|####      | 2/5 [00:01<00:02,  1.9it/s]\n")],
             [display({"text/markdown": "* In the reference run the fastest is lookup at 1.90×."}),
              display({"text/plain": "    speedup\nlive run on this machine\nA  1.23"}),
              display({"application/vnd.plotly.v1+json": {}, "text/plain": "Figure()"}),
              display({"application/vnd.jupyter.widget-view+json": {"model_id": "abc"}, "text/plain": "VBox()"})])
    assert nt.text_lines(nb) == ["[0] identical to plain: True",
                                 "[1] * In the reference run the fastest is lookup at 1.90×."]


def test_two_runs_agree_unless_a_line_without_this_machine_moves():
    first = run([stream("On this machine A measured 1.28x\nverdict: within the noise\n")])
    second = run([stream("On this machine A measured 1.43x\nverdict: within the noise\n")])
    assert nt.differing_lines(first, second) == []
    flipped = run([stream("On this machine A measured 1.43x\nverdict: slower than no gate\n")])
    assert nt.differing_lines(first, flipped) == ["- [0] verdict: within the noise",
                                                  "+ [0] verdict: slower than no gate"]
    table = run([display({"text/plain": "speedup\nA 1.28"})])              # a live table that does not say so
    assert nt.differing_lines(table, run([display({"text/plain": "speedup\nA 1.43"})]))


def test_papermills_injected_parameters_cell_does_not_shift_the_cells():
    """A browser run has no injected cell, a papermill run one: the same outputs must still line up."""
    browser = run([stream("FAST=True\n")], [stream("verdict: within the noise\n")])
    papermill = run([], [stream("FAST=True\n")], [stream("verdict: within the noise\n")])
    papermill.cells[0].metadata["tags"] = ["injected-parameters"]
    assert nt.differing_lines(browser, papermill) == []
    untagged = run([], [stream("FAST=True\n")], [stream("verdict: within the noise\n")])
    assert nt.differing_lines(browser, untagged)                       # without the tag the cells do shift
