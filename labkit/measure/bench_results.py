"""Reading the benchmark's results (``data/bench/bench.json``, written by :mod:`labkit.measure.bench`): loading,
older files' rows brought to the harness's column vocabulary, and the tables ``python -m labkit bench`` prints.

A row has the columns of :mod:`labkit.measure.harness` (NaN where a column does not apply) plus
``speedup_vs_generate`` (``model.generate``'s median ms per token / the row's). Files written before the harness
used other names (``speedup_vs_plain_loop``, ``identical_to_plain``, ``mean_accepted``, ``mean_drafted``) and
``null`` for "does not apply"; :func:`load_results` renames them and reads ``null`` as NaN.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..artifacts.paths import BENCH_DIR

__all__ = ["load_results", "upgrade_row", "format_table", "format_strategy_table", "format_profiles", "is_number"]

#: Older names of harness columns (bench files before the harness).
RENAMED = {"speedup_vs_plain_loop": "speedup", "identical_to_plain": "identical", "mean_accepted": "accepted_per_step",
           "mean_drafted": "drafted_per_step"}


def is_number(v) -> bool:
    """True for a number that is not NaN (a column that applies)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)


def upgrade_row(row: dict) -> dict:
    """A row with the harness's names, ``None`` read as NaN (a row already in them is returned equal)."""
    out = {RENAMED.get(k, k): v for k, v in row.items()}
    return {k: float("nan") if v is None else v for k, v in out.items()}


def load_results(path: str | Path | None = None) -> dict:
    """The committed benchmark (data/bench/bench.json), with a clear error naming the command that makes it; every
    row in the harness's vocabulary (:func:`upgrade_row`)."""
    path = Path(path) if path else BENCH_DIR / "bench.json"
    if not path.exists():
        raise FileNotFoundError(f"no benchmark results at {path}: run `python -m labkit bench`")
    result = json.loads(path.read_text())
    for section in ("greedy", "sampling"):
        result[section] = [upgrade_row(r) for r in result.get(section) or []]
    if result.get("strategies"):
        result["strategies"]["rows"] = [upgrade_row(r) for r in result["strategies"]["rows"]]
    return result


def _f(v, spec: str) -> str:
    return format(v, spec) if is_number(v) else "-"


def format_table(rows: list[dict]) -> str:
    """One line per row: ms per token (min-max), speedups, acceptance, tokens per step, limit, identity."""
    rows = [upgrade_row(r) for r in rows]
    w = max([44] + [len(r["method"]) for r in rows])
    head = (f"{'method':<{w}} {'ms/tok':>7} {'(min-max)':>13} {'vs gen':>7} {'vs loop':>7} {'accept':>7} "
            f"{'tok/step':>8} {'limit':>6} {'meas/lim':>8} {'same':>5}")
    lines = [head, "-" * len(head)]
    for r in rows:
        same = r.get("identical")
        same = "yes" if same is True else "NO" if same is False else "-"
        lines.append(f"{r['method']:<{w}} {r['ms_per_token']:>7.2f} {r['ms_min']:>6.2f}-{r['ms_max']:<6.2f} "
                     f"{_f(r.get('speedup_vs_generate'), '.2f'):>7} {_f(r.get('speedup'), '.2f'):>7} "
                     f"{_f(r.get('acceptance'), '.3f'):>7} {_f(r.get('tokens_per_step'), '.2f'):>8} "
                     f"{_f(r.get('limit'), '.2f'):>6} {_f(r.get('measured_over_limit'), '.2f'):>8} {same:>5}")
    return "\n".join(lines)


def format_strategy_table(rows: list[dict]) -> str:
    """The strategy section: one block per prompt source, the selection overhead in its own column."""
    lines = []
    for source in dict.fromkeys(r["prompts"] for r in rows):
        sel = [r for r in rows if r["prompts"] == source]
        lines.append(f"\n{source} prompts")
        table = format_table(sel).splitlines()
        lines.append(table[0] + f" {'select%':>8}")
        lines.append(table[1] + "-" * 9)
        for line, r in zip(table[2:], sel):
            share = r.get("select_share")
            lines.append(line + f" {f'{100 * share:.1f}' if is_number(share) else '-':>8}")
    return "\n".join(lines)


def format_profiles(profiles: dict) -> str:
    """The early-exit call profiles (see :mod:`labkit.measure.early_exit`), one line per implementation."""
    head = (f"{'':14} {'ms/tok':>7} {'accept':>7} {'tok/step':>8} {'full':>6} {'early':>6} {'late':>6} "
            f"{'outside':>7} {'layer-0 tok':>11} {'last-layer tok':>14}")
    lines = [head]
    for label, p in profiles.items():
        lines.append(f"{label:14} {p['ms_per_token']:>7.2f} {p['acceptance']:>7.3f} {p['tokens_per_step']:>8.2f} "
                     f"{p['full_ms_per_token']:>6.2f} {p['early_ms_per_token']:>6.2f} {p['late_ms_per_token']:>6.2f} "
                     f"{p['outside_ms_per_token']:>7.2f} {p['first_layer_tokens']:>11} {p['last_layer_tokens']:>14}")
    return "\n".join(lines)
