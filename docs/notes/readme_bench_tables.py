"""The README's benchmark tables, printed from a benchmark run's bench.json (default: the committed data/bench/), so
that every number the README quotes from the run can be regenerated, not retyped: the greedy section (when the run
has one), the strategy section per pair of prompt sources the run has (stdlib / packages, and their long variants),
and the shipped draft's chain beside its trees, cascades and Medusa heads (issue 29) with tokens per verify, c, c_v
and the analytic limit. A run without some of these rows (an older file, or ``--only-strategies``) prints what it has.

    python docs/notes/readme_bench_tables.py [path/to/bench.json]
"""
import sys
from pathlib import Path

from labkit.measure.bench.results import drafter_rows, load_results

REPO = Path(__file__).resolve().parents[2]

#: README label -> the benchmark's method name(s); several names make one "a / b / c" row. {d} and {p}: the early-exit
#: layers the run chose for `default` and `plain` (the bench picks the fastest on calibration prompts; see its notes).
GREEDY_ROWS = [
    ("HF `generate`", ["default: HF generate"]),
    ("labkit plain loop", ["default: labkit plain loop"]),
    ("self-spec, fixed K = 4", ["default: self-spec, fixed K"]),
    ("self-spec, static threshold 0.5", ["default: self-spec, static threshold"]),
    ("**self-spec, adaptive threshold** (paper's defaults)", ["default: self-spec, adaptive threshold"]),
    ("**self-spec adaptive + prompt lookup** (6 tokens)", ["default: self-spec adaptive + prompt lookup"]),
    ("self-spec adaptive + target-confidence gate 0.4", ["default: self-spec adaptive + gate 0.4"]),
    ("self-spec fixed K = 4 + gate 0.4", ["default: self-spec fixed K + gate 0.4"]),
    ("labkit early exit (layer {d}), transformers' drafting rule", ["default: labkit early exit (layer {d}), HF rule"]),
    ("labkit early exit (layer {d}), adaptive", ["default: labkit early exit (layer {d}), adaptive"]),
    ("labkit, separate `draft` model, adaptive", ["default: labkit, separate draft model"]),
    ("HF `assistant_early_exit` (layer {d})", ["default: HF early exit (layer {d})"]),
    ("HF prompt lookup", ["default: HF prompt lookup"]),
    ("HF `assistant_model` (`draft`)", ["default: HF assistant model (draft)"]),
    ("Jacobi, initial guess pad / repeat / self-draft", [f"default: jacobi, {i} (block 4)" for i in
                                                         ("pad", "repeat", "self-draft")]),
    ("Gauss-Seidel (GS-Jacobi), pad / repeat / self-draft", [f"default: gauss-seidel, {i} (block 4)" for i in
                                                             ("pad", "repeat", "self-draft")]),
    ("`plain`: self-spec, adaptive", ["plain: self-spec, adaptive threshold"]),
    ("`plain`: self-spec adaptive + prompt lookup", ["plain: self-spec adaptive + prompt lookup"]),
    ("`plain`: self-spec adaptive + gate 0.4", ["plain: self-spec adaptive + gate 0.4"]),
    ("`plain`: labkit early exit (layer {p}), adaptive", ["plain: labkit early exit (layer {p}), adaptive"]),
]

STRATEGY_ROWS = [
    ("static: searched set", "static: searched set"),
    ("static: searched set, int8 draft", "static: searched set, int8 draft"),
    ("static: trained draft path (8 blocks)", "static: trained draft path"),
    ("static: trained draft path, int8 draft", "static: trained draft path, int8 draft"),
    ("static: trained draft path + draft head", "static: trained draft path + draft head"),
    ("static: trained draft path + draft head, int8 draft", "static: trained draft path + draft head, int8 draft"),
    ("on-the-fly (SWIFT-style)", "on-the-fly"),
    ("in-context (CLaSp-style)", "in-context"),
    ("knapsack (KnapSpec-style)", "knapsack"),
    ("shipped draft (int8, static 0.4), chain", "shipped draft, chain"),
    ("shipped draft, confidence tree (below 0.6, 2 siblings)",
     "shipped draft, confidence tree (below 0.6, siblings 2)"),
    ("shipped draft, dynamic tree (top 2, 8 nodes)", "shipped draft, dynamic tree (top_k 2, nodes 8)"),
]


def cell(rows: list[dict], key: str, spec: str) -> str:
    values = [row.get(key) for row in rows]
    if any(v is None or v != v for v in values):                 # None or NaN: does not apply
        return ""
    return " / ".join(format(v, spec) for v in values)


def greedy_table(result: dict) -> list[str]:
    by_name = {row["method"]: row for row in result["greedy"]}
    notes = result["notes"]
    layers = {"d": notes["default"]["early_exit_layer"], "p": notes["plain"]["labkit_early_exit_layer"]}
    lines = []
    for label, names in GREEDY_ROWS:
        label = label.format(**layers)
        rows = [by_name[n.format(**layers)] for n in names]
        ratio = [r["measured_over_limit"] for r in rows]
        span = sorted({format(v, ".2f") for v in ratio}) if all(v is not None and v == v for v in ratio) else []
        measured = "–".join([span[0], span[-1]] if len(span) > 1 else span)
        limit = cell(rows, "limit", ".2f") if len(rows) == 1 else ""
        lines.append(f"| {label} | {cell(rows, 'ms_per_token', '.2f')} | {cell(rows, 'speedup_vs_generate', '.2f')} | "
                     f"{cell(rows, 'speedup', '.2f')} | {cell(rows, 'acceptance', '.2f')} | "
                     f"{cell(rows, 'tokens_per_step', '.2f')} | {limit} | {measured} | yes |")
    sampled = next(r for r in result["sampling"] if "self-spec" in r["method"])
    lines.append(f"| sampling T = 0.7: self-spec adaptive vs plain loop | {sampled['ms_per_token']:.2f} | | "
                 f"{sampled['speedup']:.2f} | {sampled['acceptance']:.2f} | "
                 f"{sampled['tokens_per_step']:.2f} | {sampled['limit']:.2f} | {sampled['measured_over_limit']:.2f} | "
                 "(exact in distribution) |")
    return lines


#: The strategy table's pairs of prompt sources (columns): the short prompts, then the long ones.
SOURCE_PAIRS = (("stdlib", "packages"), ("stdlib-long", "packages-long"))


def strategy_table(result: dict, sources: tuple[str, str] = SOURCE_PAIRS[0]) -> list[str]:
    rows = {(r["prompts"], r["method"].split(": ", 1)[1]): r for r in result["strategies"]["rows"]}
    lines = []
    for label, name in STRATEGY_ROWS:
        if not all((source, name) in rows for source in sources):     # a row this run did not have (an older run)
            continue
        cells = []
        for source in sources:
            row, lookup = rows[(source, name)], rows.get((source, name + " + prompt lookup"))
            cells += [f"{row['speedup']:.2f} ({row['acceptance']:.2f})",
                      f"{lookup['speedup']:.2f}" if lookup else "–"]
        select = [100 * rows[(s, name)]["select_share"] for s in sources]
        select_text = f"{select[0]:.1f}" if round(select[0], 1) == round(select[1], 1) else \
            f"{select[0]:.1f} / {select[1]:.1f}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {select_text} |")
    return lines


def drafter_table(result: dict) -> list[str]:
    """One line per prompt source and drafter row (the shipped draft's chain, trees, cascades, Medusa heads): x the
    plain loop (min-max over repetitions), x the chain, accepted / drafted, tokens per verify, c, c_v, the analytic
    limit and measured / limit; no lines for a run without them."""
    lines = []
    for r in drafter_rows(result["strategies"]["rows"]):
        name = r["method"].split(": ", 1)[1]
        lines.append(f"| {r['prompts']} | {name} | {cell([r], 'speedup', '.2f')} "
                     f"({cell([r], 'speedup_min', '.2f')}–{cell([r], 'speedup_max', '.2f')}) | "
                     f"{cell([r], 'vs_chain', '.2f')} | {cell([r], 'acceptance', '.2f')} | "
                     f"{cell([r], 'tokens_per_step', '.2f')} | {cell([r], 'c', '.2f')} | {cell([r], 'c_v', '.2f')} | "
                     f"{cell([r], 'limit', '.2f')} | {cell([r], 'measured_over_limit', '.2f')} | "
                     f"{'yes' if r.get('identical') is True else 'NO'} |")
    return lines


def tables(result: dict) -> list[str]:
    """Every table the run has rows for, each after a blank line."""
    out = []
    if result["greedy"]:
        out += [""] + greedy_table(result)
    if result.get("strategies"):
        present = {r["prompts"] for r in result["strategies"]["rows"]}
        for pair in SOURCE_PAIRS:
            if set(pair) <= present:
                out += ["", f"strategies: {' / '.join(pair)} prompts"] + strategy_table(result, pair)
        drafters = drafter_table(result)
        if drafters:
            out += ["", "| prompts | drafter | x plain loop (min–max) | x chain | accepted / drafted | tokens / verify "
                    "| c | c_v | limit | measured / limit | output identical |",
                    "|---|---|---|---|---|---|---|---|---|---|---|"] + drafters
    return out


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "data" / "bench" / "bench.json"
    result = load_results(path)
    plain = next((r for r in result["greedy"] if r["method"] == "default: labkit plain loop"), None)
    print(f"{path}: {result['seconds']:.0f} s" + (f", plain loop {plain['ms_per_token']:.2f} ms/token" if plain
                                                   else ""))
    print("\n".join(tables(result)))
