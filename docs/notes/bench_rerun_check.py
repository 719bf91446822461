"""Is a benchmark rerun within the noise of an earlier run? Row by row, the speedup over the plain loop of each
method the two runs share, with each run's spread (the plain loop's median ms over the row's max and min ms per token
over the repetitions), and whether the two ranges overlap. Rows whose skip set changed between the runs (the
search's shipped set is read when the benchmark runs) are marked, since they are not the same configuration.

    python docs/notes/bench_rerun_check.py OLD.json [NEW.json]     # NEW defaults to data/bench/bench.json
    python docs/notes/bench_rerun_check.py data/bench/bench.json data/bench/rerun/bench.json   # issue 27's check
"""
from __future__ import annotations

import sys
from pathlib import Path

from labkit.measure.bench.results import is_number, load_results

ROOT = Path(__file__).resolve().parents[2]


def speedups(result: dict, section: str = "greedy") -> dict[str, tuple[float, float, float]]:
    """{method: (speedup, low, high)} over the plain loop of the same model (strategy rows: of the same source)."""
    rows = result[section] if section == "greedy" else result["strategies"]["rows"]
    group = (lambda r: r["model"]) if section == "greedy" else (lambda r: r.get("prompts"))
    plain = {group(r): r["ms_per_token"] for r in rows if r["method"].endswith("labkit plain loop")}
    out = {}
    for r in rows:
        base = plain.get(group(r))
        if base and is_number(r.get("ms_per_token")) and is_number(r.get("ms_min")):
            key = r["method"] if section == "greedy" else f"{r.get('prompts')}: {r['method']}"
            out[key] = (base / r["ms_per_token"], base / r["ms_max"], base / r["ms_min"])
    return out


def compare(old: dict, new: dict) -> list[str]:
    changed = {m for m in old["notes"] if old["notes"][m].get("skip_set") != new["notes"].get(m, {}).get("skip_set")}
    lines, agree, total = [], 0, 0
    for section in ("greedy", "strategies"):
        if section == "strategies" and not (old.get("strategies") and new.get("strategies")):
            continue
        a, b = speedups(old, section), speedups(new, section)
        for method in a.keys() & b.keys():
            (s0, lo0, hi0), (s1, lo1, hi1) = a[method], b[method]
            overlap = lo0 <= hi1 and lo1 <= hi0
            model = method.split(": ")[0] if section == "greedy" else method.split(": ")[1]
            uses_set = model in changed and any(k in method for k in ("self-spec", "searched set", "self-draft"))
            note = "skip set changed" if uses_set else ("within the noise" if overlap else "ranges apart")
            if not uses_set:
                total, agree = total + 1, agree + overlap
            lines.append(f"{method[:62]:62} {s0:5.2f}× ({lo0:.2f}-{hi0:.2f})  {s1:5.2f}× ({lo1:.2f}-{hi1:.2f})  {note}")
    lines.sort()
    lines.append(f"\n{agree} of {total} rows with an unchanged configuration are within the noise of the earlier run")
    return lines


def main() -> None:
    old = load_results(Path(sys.argv[1]))
    new = load_results(Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "data" / "bench" / "bench.json")
    print(f"{'method':62} {'earlier':>17}  {'rerun':>17}")
    print("\n".join(compare(old, new)))


if __name__ == "__main__":
    main()
