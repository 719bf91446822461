"""Notebook plumbing: metrics records, PNG export, and executing/exporting the notebooks.

Every notebook ends by calling :func:`record_metrics`, which writes a small JSON of its key
numbers to the output folder given as a notebook parameter; the papermill tests assert on
those ranges. ``python -m labkit notebooks html`` executes every notebook (FAST mode) and
writes HTML copies for readers who only want to look (``--full``: full mode, into build/html-full).
"""
from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path

import pandas as pd

from ..artifacts.arguments import command_parser
from ..artifacts.models import SHIPPED_MODELS
from ..artifacts.paths import BUILD_DIR, MODELS_DIR, NOTEBOOK_DIR, SEARCH_DIR
from ..measure.machine import cpu_model
from ..measure.reference.loader import AA, aa_sentence, load_reference

__all__ = ["record_metrics", "display_table", "execute_notebook", "notebook_paths", "versions", "where_things_are",
           "export_html", "remote_scripts", "main"]


def _clean(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):   # numpy / torch scalars
        return _clean(value.item())
    return value


def record_metrics(notebook: str, metrics: dict, output_dir: str | Path) -> Path:
    """Write ``{output_dir}/{notebook}.json`` with the notebook's key numbers; returns the path."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{notebook}.json"
    payload = {"notebook": notebook, "written_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "metrics": _clean(metrics)}
    path.write_text(json.dumps(payload, indent=2))
    return path


def display_table(frame: pd.DataFrame, spec: str = ".3f", missing: str = "–") -> pd.DataFrame:
    """``frame`` as a reader sees it: every float to ``spec``, a value that does not apply (NaN, None: plain
    decoding's acceptance, say) as ``missing``. For display only; compute from the frame itself."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if pd.api.types.is_float_dtype(values):
            out[column] = [missing if math.isnan(v) else format(v, spec) for v in values]
        elif values.dtype == object:
            out[column] = [missing if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]
    return out


def reference_or_none(name: str, folder=None):
    """The committed reference group ``name`` (:func:`labkit.measure.reference.loader.load_reference`), or None when no
    reference run is committed yet: the notebook then says so instead of comparing live numbers."""
    try:
        return load_reference(name, folder)
    except FileNotFoundError:
        return None


def noise_floor_line(reference, source: str = "stdlib") -> str:
    """The reference run's A/A pair (the plain loop timed twice in one interleaved run) in words: what "within the
    noise" means where a notebook compares timings; a note when the reference has no such row."""
    try:
        return aa_sentence(reference.speedup(AA, source), "the plain loop", live=False)
    except (AttributeError, LookupError):
        return "The reference run has no A/A pair to show the noise floor (`python -m labkit reference`)."


def short_table(frame: pd.DataFrame, keep, spec: str = ".3f", missing: str = "–", what: str = "every column"):
    """``frame`` for a reader: the columns ``keep`` (the point, at most about 8) as a table, and the whole frame one
    click away in a closed ``<details>`` block. A 28-column harness frame otherwise hides its speedup column
    behind pandas' '...'. Returns an IPython HTML object (display only; compute from the frame itself)."""
    from IPython.display import HTML

    keep = list(keep)
    unknown = [c for c in keep if c not in frame.columns]
    if unknown:
        raise KeyError(f"keep names columns the frame lacks: {unknown}")
    shown = display_table(frame[keep], spec, missing).to_html()
    full = display_table(frame, spec, missing).to_html()
    return HTML(f"{shown}<details><summary>{what} ({len(frame.columns)})</summary>{full}</details>")


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


def execute_notebook(path: Path, parameters: dict | None = None, out_dir: Path | None = None,
                     timeout: int = 900) -> Path:
    """Run one notebook with papermill (kernel python3); the executed copy goes to ``out_dir``."""
    import papermill as pm

    out_dir = Path(out_dir or BUILD_DIR / "notebooks")
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / path.name
    pm.execute_notebook(str(path), str(output), parameters=parameters or {}, kernel_name="python3",
                        cwd=str(path.parent), progress_bar=False, execution_timeout=timeout)
    return output


#: Where an HTML copy finds its scripts: beside it, so it renders offline (no CDN).
ASSETS = "assets"
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"


def _local_assets(out_dir: Path) -> dict:
    """Copy MathJax 2.7 (the ``jupyter-server-mathjax`` package) and require.js (Voila's copy) into
    ``out_dir/assets`` once, and return the HTMLExporter options that point at them by relative URL. Why: nbconvert's
    defaults load both from cdnjs, so a reader offline saw raw LaTeX. A missing package leaves its URL local anyway
    (no script is fetched from the network; the math stays unrendered), never a CDN."""
    import shutil

    from jupyter_core.paths import jupyter_path

    assets = out_dir / ASSETS
    assets.mkdir(parents=True, exist_ok=True)
    try:
        import jupyter_server_mathjax

        source = Path(jupyter_server_mathjax.__file__).parent / "static"
        if not (assets / "mathjax" / "MathJax.js").exists():
            shutil.copytree(source, assets / "mathjax", dirs_exist_ok=True)
    except ImportError:
        pass
    require = [Path(d) / "voila" / "templates" / "base" / "static" / "require.min.js" for d in jupyter_path()]
    found = next((r for r in require if r.exists()), None)
    if found is not None and not (assets / "require.min.js").exists():
        shutil.copyfile(found, assets / "require.min.js")
    # mermaid is imported only by a page that holds a mermaid diagram (the lab's notebooks hold none): local too
    return {"mathjax_url": f"{ASSETS}/mathjax/MathJax.js?config={MATHJAX_CONFIG}",
            "require_js_url": f"{ASSETS}/require.min.js", "mermaid_js_url": f"{ASSETS}/mermaid.esm.min.mjs",
            "mermaid_layout_elk_js_url": ""}


def export_html(executed: Path, out_dir: Path) -> Path:
    """``executed`` as a self-contained HTML page in ``out_dir`` whose scripts (MathJax, require.js) are local
    copies under ``out_dir/assets``: the page renders its formulas without a network connection."""
    import nbformat
    from nbconvert import HTMLExporter

    out_dir.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(**_local_assets(out_dir))
    body, _ = exporter.from_notebook_node(nbformat.read(str(executed), as_version=4))
    target = out_dir / executed.with_suffix(".html").name
    target.write_text(body, encoding="utf-8")
    return target


def remote_scripts(html: str) -> list[str]:
    """The http(s) URLs an HTML page loads scripts or stylesheets from (``<script src>``, ``<link href>``, a
    dynamic ``import(...)``, a script URL held in a variable): an offline reader gets none of them."""
    import re

    tags = re.findall(r"<(?:script|link)\b[^>]*>", html, flags=re.IGNORECASE)
    urls = [url for tag in tags for url in re.findall(r"""(?:src|href)\s*=\s*["']((?:https?:)?//[^"']+)""", tag)]
    return urls + re.findall(r"""["']((?:https?:)?//[^"'\s]+\.m?js(?:\?[^"']*)?)["']""", html)


def main(argv: list[str] | None = None) -> None:
    parser = command_parser("Execute the lab's notebooks and export them to HTML.")
    parser.add_argument("command", choices=["html", "run"])
    parser.add_argument("--full", action="store_true",
                        help="full mode instead of FAST "
                             "(executed copies in build/notebooks-full, HTML in build/html-full)")
    parser.add_argument("--solutions", action="store_true", help="run the exercises with the reference answers")
    args = parser.parse_args(argv)
    if args.command == "html":
        # the kernels inherit this: figures also as self-contained HTML, which nbconvert keeps
        os.environ["PLOTLY_RENDERER"] = "notebook+plotly_mimetype"
    suffix = "-full" if args.full else ""
    for nb in notebook_paths():
        t0 = time.perf_counter()
        executed = execute_notebook(nb, {"FAST": not args.full, "OUTPUT_DIR": str(BUILD_DIR / f"metrics{suffix}"),
                                         **({"SOLUTIONS": True} if args.solutions else {})},
                                    out_dir=BUILD_DIR / f"notebooks{suffix}")
        note = ""
        if args.command == "html":
            note = f" -> {export_html(executed, BUILD_DIR / f'html{suffix}')}"
        print(f"{nb.name}: {time.perf_counter() - t0:.1f} s{note}")


def versions() -> dict:
    """Versions of the packages the lab stands on, and the CPU (printed at the top of every notebook: the speed
    ratios a notebook measures depend on the processor as much as on the method)."""
    import importlib.metadata as md

    names = ["labkit", "torch", "transformers", "optuna", "plotly", "pandas", "ipywidgets", "papermill"]
    out = {"cpu": cpu_model().get("cpu_model") or platform.machine(), "python": platform.python_version()}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def where_things_are() -> dict:
    """The lab's folders, and which shipped models are present."""
    return {
        "notebooks": str(NOTEBOOK_DIR),
        "shipped models": str(MODELS_DIR),
        "present": [m for m in SHIPPED_MODELS if (MODELS_DIR / m / "config.json").exists()],
        "search results": str(SEARCH_DIR),
        "executed notebooks and metrics": str(BUILD_DIR),
    }
