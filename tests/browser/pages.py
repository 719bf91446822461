"""Reading a live page: what plotly.js drew, what the widgets show, and what the kernel holds; comparing them.

Everything read from the page comes from what the browser actually uses: each plot's ``_fullData`` (the traces
plotly.js drew, typed arrays turned into plain arrays) and ``_fullLayout`` (title, x range, shapes), and the text
of each HTML widget as rendered. The Python side of a widget is asked from its kernel over the page's own kernel
connection (an execute request that prints JSON; no cell is added to the notebook).
"""
from __future__ import annotations

import base64
import math
import re
import time
from html.parser import HTMLParser

import numpy as np

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
TOL = 1e-6
PAIRED = ("scatter", "scattergl", "bar")      # trace types whose x and y are one point each, index by index

# Every plot under the element matched by the selector: traces, title, x range and shapes as plotly.js holds
# them after drawing; and the text of every HTML widget there, in page order (= the widget tree's order).
JS_DOM_STATE = """(sel) => {
  const root = document.querySelector(sel);
  if (!root) return null;
  const arr = v => (v === undefined || v === null) ? null : Array.from(v, e =>
      (e === undefined || (typeof e === 'number' && !isFinite(e))) ? null : e);
  const deep = v => (v === undefined || v === null) ? null
      : (Array.isArray(v) || ArrayBuffer.isView(v)) ? Array.from(v, deep)
      : (typeof v === 'number' && !isFinite(v)) ? null : v;
  const figures = Array.from(root.querySelectorAll('.js-plotly-plot')).map(gd => {
    const L = gd._fullLayout || {};
    return {
      ready: !!gd._fullData,
      title: L.title ? (L.title.text || '') : '',
      xrange: L.xaxis ? arr(L.xaxis.range) : null,
      shapes: (L.shapes || []).map(s => [s.x0, s.x1, s.y0, s.y1]),
      traces: (gd._fullData || []).map(t => ({uid: t.uid, type: t.type, name: t.name || '',
                                               x: arr(t.x), y: arr(t.y), z: deep(t.z)})),
    };
  });
  const html = Array.from(root.querySelectorAll('.widget-html-content')).map(e => e.textContent);
  return {figures, html};
}"""

# The same, asked from Python: every FigureWidget and HTML widget under the widget with this model id.
PY_WIDGET_STATE = r'''
def __labkit_widget_state(model_id):
    import math
    import ipywidgets
    from plotly.basewidget import BaseFigureWidget

    def plain(v):
        if v is None:
            return None
        if hasattr(v, "tolist"):
            v = v.tolist()
        if isinstance(v, (list, tuple)):
            return [plain(e) for e in v]
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v

    figures, html = [], []
    def walk(w):
        if isinstance(w, BaseFigureWidget):
            figures.append({"title": w.layout.title.text or "", "xrange": plain(w.layout.xaxis.range),
                            "shapes": [[plain(s.x0), plain(s.x1), plain(s.y0), plain(s.y1)] for s in w.layout.shapes],
                            "traces": [{"uid": t.uid, "type": t.type, "name": t.name or "", "x": plain(t.x),
                                        "y": plain(t.y), "z": plain(getattr(t, "z", None))} for t in w.data]})
        elif isinstance(w, ipywidgets.HTML):
            html.append(w.value)
        for child in getattr(w, "children", ()):
            walk(child)
    walk(ipywidgets.Widget.widgets[model_id])
    return {"figures": figures, "html": html}
'''

JS_KERNEL_EXEC = """async (code) => {
  const kernel = jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute({code, silent: false, store_history: false, allow_stdin: false,
                                        stop_on_error: false});
  let out = '', error = '';
  future.onIOPub = msg => {
    const t = msg.header.msg_type;
    if (t === 'stream' && msg.content.name === 'stdout') out += msg.content.text;
    if (t === 'error') error += msg.content.ename + ': ' + msg.content.evalue + String.fromCharCode(10)
                                + msg.content.traceback.join(String.fromCharCode(10));
  };
  await future.done;
  return {out, error};
}"""


# -- page errors -------------------------------------------------------------------------------------
def _local(url: str) -> bool:
    return url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:"))


def watch_errors(page) -> list[str]:
    """Start collecting the page's uncaught exceptions, console errors and failed requests; returns the list.

    A resource that failed to load from outside 127.0.0.1 is not counted: the machine may be offline, and Voila's
    page template links Font Awesome from a CDN although its own bundle already carries it."""
    errors: list[str] = []

    def console(message):
        url = (message.location or {}).get("url", "")
        if message.type == "error" and not (message.text.startswith("Failed to load resource") and not _local(url)):
            errors.append(f"console.error: {message.text} ({url})")

    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.on("console", console)
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} ({r.failure})") if _local(r.url)
            else None)
    return errors


# -- text ------------------------------------------------------------------------------------------
class _TextOf(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []

    def handle_data(self, data):
        self.parts.append(data)


def squash(text: str) -> str:
    """Whitespace runs (non-breaking spaces and line breaks included) as one space, ends stripped."""
    return " ".join(text.split())


def html_text(value: str) -> str:
    """The text a browser shows for an HTML widget's value (tags dropped, entities decoded), squashed."""
    parser = _TextOf()
    parser.feed(value)
    parser.close()
    return squash("".join(parser.parts))


# -- values ----------------------------------------------------------------------------------------
_DTYPES = {"f8": "<f8", "f4": "<f4", "i1": "i1", "u1": "u1", "i2": "<i2", "u2": "<u2", "i4": "<i4", "u4": "<u4",
           "float64": "<f8", "float32": "<f4", "int8": "i1", "uint8": "u1", "int16": "<i2", "uint16": "<u2",
           "int32": "<i4", "uint32": "<u4"}


def decode(value):
    """A trace array as Python saw it in a figure's JSON output: lists as they are, plotly's base64
    typed-array specs (``{"dtype": "f8", "bdata": ...}``) decoded; non-finite numbers as None."""
    if isinstance(value, dict) and "bdata" in value:
        a = np.frombuffer(base64.b64decode(value["bdata"]), dtype=_DTYPES[value["dtype"]])
        value = a.tolist()
    if isinstance(value, list):
        return [None if isinstance(v, float) and not math.isfinite(v) else v for v in value]
    return value


def close(a, b, tol: float = TOL) -> bool:
    """Equal, numbers within ``tol`` (relative above 1); lists element by element."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return abs(a - b) <= tol * max(1.0, abs(a), abs(b))
    return a == b


def _short(v) -> str:
    if isinstance(v, list):
        return f"[{', '.join(map(repr, v[:4]))}{', …' if len(v) > 4 else ''}] (n={len(v)})"
    return repr(v)


def figure_mismatches(py: dict, dom: dict, where: str) -> list[str]:
    """What differs between a figure as Python holds it and as plotly.js drew it (empty: none)."""
    out = []
    if len(py["traces"]) != len(dom["traces"]):
        return [f"{where}: {len(py['traces'])} traces in Python, {len(dom['traces'])} drawn"]
    for i, (p, d) in enumerate(zip(py["traces"], dom["traces"])):
        if p["type"] in PAIRED and p["x"] and p["y"] and len(d["x"] or []) != len(d["y"] or []):
            out.append(f"{where}, trace {i} ({p.get('name')}): drawn x/y lengths {len(d['x'] or [])}/"
                       f"{len(d['y'] or [])}")
        for key in ("x", "y", "z"):                           # z: heatmaps
            if p.get(key) is not None and not close(p[key], d.get(key)):
                out.append(f"{where}, trace {i} ({p.get('name') or p.get('type')}) {key}: "
                           f"Python {_short(p[key])}, drawn {_short(d[key])}")
    if squash(py.get("title") or "") != squash(dom.get("title") or ""):
        out.append(f"{where}: title {py.get('title')!r} in Python, {dom.get('title')!r} drawn")
    if py.get("xrange") is not None and not close(py["xrange"], dom.get("xrange")):
        out.append(f"{where}: x range {py['xrange']} in Python, {dom.get('xrange')} drawn")
    if "shapes" in py and not close(py["shapes"], dom.get("shapes")):
        out.append(f"{where}: shapes {py['shapes']} in Python, {dom.get('shapes')} drawn")
    return out


def widget_mismatches(py: dict, dom: dict | None) -> list[str]:
    """What differs between a widget tree in Python (figures, HTML values) and in the page."""
    if dom is None:
        return ["the widget's output is not on the page"]
    if len(py["figures"]) != len(dom["figures"]) or not all(f["ready"] for f in dom["figures"]):
        return [f"{len(py['figures'])} figure(s) in Python, {sum(f['ready'] for f in dom['figures'])} drawn"]
    out = []
    for k, (p, d) in enumerate(zip(py["figures"], dom["figures"])):
        out += figure_mismatches(p, d, f"figure {k}")
    texts_py = [html_text(v) for v in py["html"]]
    texts_dom = [squash(t) for t in dom["html"]]
    if texts_py != texts_dom:
        pairs = [(a, b) for a, b in zip(texts_py, texts_dom) if a != b] or [(texts_py, texts_dom)]
        out.append(f"HTML text: Python {pairs[0][0]!r:.300}, page {pairs[0][1]!r:.300}")
    return out


def figure_part(state: dict) -> list:
    """The drawn part of a widget state (traces, shapes, x ranges), for 'did it change' checks."""
    return [(f["traces"], f.get("shapes"), f.get("xrange")) for f in state["figures"]]


def text_part(state: dict) -> list:
    """The readable part of a widget state (HTML texts and figure titles)."""
    return [html_text(v) for v in state["html"]] + [f["title"] for f in state["figures"]]


def wait_until(check, timeout_s: float, interval_s: float = 0.25):
    """Call ``check()`` until it returns something truthy; returns it, or None after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(interval_s)


def exact(text: str) -> re.Pattern:
    """A has_text pattern for exactly ``text`` (surrounding whitespace allowed)."""
    return re.compile(rf"^\s*{re.escape(text)}\s*$")
