"""Reading the benchmark's results (``data/bench/bench.json``, written by :mod:`labkit.measure.bench.run`): loading,
older files' rows brought to the harness's column vocabulary, and the tables ``python -m labkit bench`` prints.

A row has the columns of :mod:`labkit.measure.harness` (NaN where a column does not apply) plus
``speedup_vs_generate`` (``model.generate``'s median ms per token / the row's). Files written before the harness
used other names (``speedup_vs_plain_loop``, ``identical_to_plain``, ``mean_accepted``, ``mean_drafted``) and
``null`` for "does not apply"; :func:`load_results` renames them and reads ``null`` as NaN.

The strategy section's drafter rows (issue 29: the shipped draft's chain, its trees, cascades and Medusa heads;
:func:`drafter_rows`, :func:`format_drafter_table`) are ordinary rows of kinds 'tree', 'cascade' and 'medusa'; files
written before them simply have none (the table is then empty).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ...artifacts.paths import BENCH_DIR

__all__ = ["load_results", "upgrade_row", "format_table", "format_strategy_table", "format_profiles", "is_number",
           "drafter_rows", "format_drafter_table", "DRAFTER_KINDS", "CHAIN_METHOD"]

#: Older names of harness columns (bench files before the harness).
RENAMED = {"speedup_vs_plain_loop": "speedup", "identical_to_plain": "identical", "mean_accepted": "accepted_per_step",
           "mean_drafted": "drafted_per_step"}
#: Kinds of the strategy section's rows that draft with the shipped draft in other shapes, or with Medusa heads...
DRAFTER_KINDS = ("tree", "cascade", "medusa", "lookahead", "recycling")
#: ... and the label (after "model: ") of their baseline, the shipped draft drafting one continuation.
CHAIN_METHOD = "shipped draft, chain"


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


def drafter_rows(rows: list[dict]) -> list[dict]:
    """The strategy section's rows of the shipped draft's chain (:data:`CHAIN_METHOD`) and of the
    :data:`DRAFTER_KINDS`, in the section's order, each with ``vs_chain`` (the chain's median ms per token on the same
    prompts / the row's; NaN without a chain row); [] for a file written before them."""
    rows = [upgrade_row(r) for r in rows]
    chain = {r.get("prompts"): r["ms_per_token"] for r in rows if r["method"].endswith(": " + CHAIN_METHOD)}
    out = []
    for r in rows:
        if r.get("kind") in DRAFTER_KINDS or r["method"].endswith(": " + CHAIN_METHOD):
            base = chain.get(r.get("prompts"))
            out.append({**r, "vs_chain": base / r["ms_per_token"] if base and is_number(r["ms_per_token"])
                        else float("nan")})
    return out


def format_drafter_table(rows: list[dict]) -> str:
    """The drafter rows (:func:`drafter_rows`) per prompt source: × the plain loop (min-max over repetitions) and
    × the chain, acceptance, tokens per verify (emitted per step), the costs c and c_v (× a plain step), the analytic
    limit (A + 1)/(d·c + c_v) and measured / limit, identity; '' when there are none."""
    rows = drafter_rows(rows)
    if not rows:
        return ""
    w = max([40] + [len(r["method"]) for r in rows])
    head = (f"{'method':<{w}} {'vs loop':>7} {'(min-max)':>11} {'vs chain':>8} {'accept':>7} {'tok/verify':>10} "
            f"{'c':>5} {'c_v':>5} {'limit':>6} {'meas/lim':>8} {'same':>5}")
    lines = []
    for source in dict.fromkeys(r.get("prompts") for r in rows):
        lines += [f"\n{source} prompts", head, "-" * len(head)]
        for r in (r for r in rows if r.get("prompts") == source):
            same = r.get("identical")
            same = "yes" if same is True else "NO" if same is False else "-"
            lines.append(f"{r['method']:<{w}} {_f(r.get('speedup'), '.2f'):>7} "
                         f"{_f(r.get('speedup_min'), '.2f'):>5}-{_f(r.get('speedup_max'), '.2f'):<5} "
                         f"{_f(r['vs_chain'], '.2f'):>8} {_f(r.get('acceptance'), '.3f'):>7} "
                         f"{_f(r.get('tokens_per_step'), '.2f'):>10} {_f(r.get('c'), '.2f'):>5} "
                         f"{_f(r.get('c_v'), '.2f'):>5} {_f(r.get('limit'), '.2f'):>6} "
                         f"{_f(r.get('measured_over_limit'), '.2f'):>8} {same:>5}")
    return "\n".join(lines)


def format_profiles(profiles: dict) -> str:
    """The early-exit call profiles (see :mod:`labkit.measure.signals.early_exit`), one line per implementation."""
    head = (f"{'':14} {'ms/tok':>7} {'accept':>7} {'tok/step':>8} {'full':>6} {'early':>6} {'late':>6} "
            f"{'outside':>7} {'layer-0 tok':>11} {'last-layer tok':>14}")
    lines = [head]
    for label, p in profiles.items():
        lines.append(f"{label:14} {p['ms_per_token']:>7.2f} {p['acceptance']:>7.3f} {p['tokens_per_step']:>8.2f} "
                     f"{p['full_ms_per_token']:>6.2f} {p['early_ms_per_token']:>6.2f} {p['late_ms_per_token']:>6.2f} "
                     f"{p['outside_ms_per_token']:>7.2f} {p['first_layer_tokens']:>11} {p['last_layer_tokens']:>14}")
    return "\n".join(lines)
