"""Notebook plumbing: metrics records, PNG export, and executing/exporting the notebooks.

Every notebook ends by calling :func:`record_metrics`, which writes a small JSON of its key
numbers to the output folder given as a notebook parameter; the papermill tests assert on
those ranges. ``python -m labkit notebooks html`` executes every notebook (FAST mode) and
writes HTML copies for readers who only want to look (``--full``: full mode, into build/html-full).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import pandas as pd

from ..artifacts.models import SHIPPED_MODELS
from ..artifacts.paths import BUILD_DIR, MODELS_DIR, NOTEBOOK_DIR, SEARCH_DIR
from ..measure.machine import cpu_model

__all__ = ["record_metrics", "display_table", "execute_notebook", "notebook_paths", "versions", "where_things_are", "main"]


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


def export_html(executed: Path, out_dir: Path) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(str(executed), as_version=4))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / executed.with_suffix(".html").name
    target.write_text(body, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Execute the lab's notebooks and export them to HTML.")
    parser.add_argument("command", choices=["html", "run"])
    parser.add_argument("--full", action="store_true",
                        help="full mode instead of FAST (executed copies in build/notebooks-full, HTML in build/html-full)")
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
