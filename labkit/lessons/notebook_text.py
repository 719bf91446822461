"""What a notebook run printed, as text, and where two runs of it differ beyond this machine's timings.

Issue 35's rule: two FAST runs of a notebook give the same text output except outputs that report a live timing,
and every such output says "this machine". :func:`text_lines` reads an executed notebook's text (printed lines,
Markdown and plain-text displays), leaving out what is not text a reader compares (figures, widgets, progress bars)
and every output that says "this machine" (a printed line on its own; a displayed Markdown block or table as a
whole). :func:`differing_lines` compares two runs' texts: what it returns is a sentence or a number that moved
between runs without saying it was measured on this machine.
"""
from __future__ import annotations

import difflib
import re

__all__ = ["LIVE", "text_lines", "differing_lines"]

#: The phrase that marks an output as a live measurement on the reader's machine.
LIVE = "this machine"
#: Outputs that are not text a reader compares: widgets (their model ids change every run), figures.
_NOT_TEXT = ("application/vnd.jupyter.widget-view+json", "application/vnd.plotly.v1+json", "image/png")
#: A progress bar's line (tqdm: "desc:  40%|####  | 2/5 [00:01<00:02, ...]").
_PROGRESS = re.compile(r"\d+%\|.*\|\s*\d+/\d+|it/s\]|s/it\]")


def _cells(notebook) -> list:
    cells = notebook["cells"] if isinstance(notebook, dict) else notebook.cells
    return [c for c in cells if c["cell_type"] == "code"                   # papermill's injected parameters cell
            and "injected-parameters" not in c.get("metadata", {}).get("tags", [])]   # would shift every index


def _display_text(output) -> str | None:
    data = output.get("data", {})
    if any(kind in data for kind in _NOT_TEXT):
        return None
    for kind in ("text/markdown", "text/plain"):
        if kind in data:
            text = data[kind]
            return "".join(text) if isinstance(text, list) else text
    return None


def text_lines(notebook) -> list[str]:
    """Every line of text an executed notebook (a dict or nbformat node) shows, in order, tagged with its code cell
    (``"[3] ..."``), except widgets, figures, progress bars, error tracebacks' addresses, and outputs that say
    "this machine" (a printed line alone; a displayed block whole)."""
    lines = []
    for index, cell in enumerate(_cells(notebook)):
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                text = output.get("text", "")
                chunk = [ln for ln in ("".join(text) if isinstance(text, list) else text).splitlines()
                         if LIVE not in ln and not _PROGRESS.search(ln)]
            elif kind in ("display_data", "execute_result"):
                text = _display_text(output)
                chunk = [] if text is None or LIVE in text else text.splitlines()
            else:                                    # an error: its name and value, never its frame addresses
                chunk = [f"{output.get('ename', '')}: {output.get('evalue', '')}"]
            lines += [f"[{index}] {ln.rstrip()}" for ln in chunk if ln.strip()]
    return lines


def differing_lines(first, second) -> list[str]:
    """The lines of two runs' :func:`text_lines` that are not in both ("- " only in the first, "+ " only in the
    second); empty when the runs agree except on this machine's timings."""
    a, b = text_lines(first), text_lines(second)
    return [ln for ln in difflib.ndiff(a, b) if ln.startswith(("- ", "+ "))]
