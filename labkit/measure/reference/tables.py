"""The reconciled speedup table and the decision table, built from the reference runs alone.

One function writes the speed table wherever the lab states it (:func:`speed_block`: README's "Measured speed" and
``docs/summary.md``, between the markers :data:`BEGIN` and :data:`END`; :func:`write_speed_tables`), so the README,
the summary and notebook 09 give one answer per question; ``tests/measure/test_reference_tables.py`` checks that the
committed text is what the committed reference file gives. :func:`decision_table` is the end of notebook 09: for
each drafter the lab has, what the evidence says in four settings (this CPU with a small model; a GPU with a small
model, launch-bound; a large model in the memory-bound regime; a batch of sequences), every number read from a
committed file, and "not measured" where the lab has none.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ...artifacts.paths import BENCH_DIR, REPO
from .loader import AA, PLAIN, SAMPLING_METHODS, SOURCES, SUMMARY_METHODS, Reference, Spread, verdict

__all__ = ["BEGIN", "END", "SPEED_TABLE_FILES", "speed_table", "speed_block", "replace_block", "write_speed_tables",
           "DEVICE_BENCH", "DRAFTERS", "REGIMES", "decision_table", "format_decision_table", "best_rows"]

BEGIN = "<!-- speed table: generated from data/reference/summary.json by labkit.measure.reference.tables -->"
END = "<!-- end of the generated speed table -->"
#: the files that hold the speed table (relative to the repository)
SPEED_TABLE_FILES = ("README.md", "docs/summary.md")
#: the GPU run the decision table quotes (python -m labkit device-bench on an NVIDIA H200)
DEVICE_BENCH = BENCH_DIR / "device" / "nvidia-h200.json"
#: short names of the prompt kinds for table headers
_SOURCE_HEADER = {"stdlib": "stdlib", "packages": "outside", "stdlib-long": "stdlib, long",
                  "packages-long": "outside, long", "stubs": "stubs"}


def _cell(spread: Spread) -> str:
    return "–" if math.isnan(spread.median) else f"{spread.median:.2f} ({spread.low:.2f}–{spread.high:.2f})"


def speed_table(ref: Reference, sources: tuple[str, ...] = SOURCES) -> str:
    """The reconciled table as Markdown: a row per drafter (:data:`~.loader.SUMMARY_METHODS`, then
    speculative sampling at each temperature), a column per prompt kind, speedup (min–max over repetitions)."""
    rows = ref.select("summary")
    present = [s for s in sources if any(r.source == s for r in rows)]
    lines = ["| drafter | " + " | ".join(_SOURCE_HEADER.get(s, s) for s in present) + " |",
             "|---" * (len(present) + 1) + "|"]
    labels = [m for m in SUMMARY_METHODS if m != PLAIN] + [label for _, label, _ in SAMPLING_METHODS]
    for label in labels:
        cells = []
        for s in present:
            found = [r for r in rows if r.method == label and r.source == s]
            cells.append(_cell(found[0].speedup) if found else "–")
        if any(c != "–" for c in cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plan_sentence(ref: Reference) -> str:
    rows = ref.select("summary")
    greedy = next((r for r in rows if r.method == PLAIN), None)
    sampled = next((r for r in rows if r.baseline != PLAIN), None)
    machine = ref.machines["summary"]
    text = (f"Speedup over the plain loop, median (min–max over {greedy.repetitions} interleaved repetitions, order "
            f"reversed on odd ones), {greedy.prompts} held-out prompts x {greedy.tokens} new tokens per prompt kind, "
            f"the shipped `default` model; measured on {machine.describe()}, {machine.date}, by "
            "`python -m labkit reference` (`data/reference/summary.json`, `.md` with ms/token, acceptance, c, c_v).")
    if sampled is not None:
        text += (f" Speculative sampling is timed against plain *sampling* at the same temperature "
                 f"({sampled.prompts} prompt{'s' if sampled.prompts != 1 else ''} per kind).")
    ident = [r for r in rows if r.identical is False]
    text += (" Every greedy row's output is token-identical to the plain loop's." if not ident else
             f" NOT token-identical: {', '.join(sorted({r.method for r in ident}))}.")
    aa = [r for r in rows if r.method == AA]
    if aa:
        worst = max(aa, key=lambda r: r.speedup.high - r.speedup.low)
        text += (f" Noise floor: the plain loop timed against itself measured {_cell(worst.speedup)} on "
                 f"{worst.source}; rows whose ranges overlap are within the noise of each other.")
    return text


def speed_block(ref: Reference) -> str:
    """The generated block (markers included) that README.md and docs/summary.md hold."""
    return "\n".join([BEGIN, "", speed_table(ref), "", _plan_sentence(ref), "", END])


def replace_block(text: str, block: str) -> str:
    """``text`` with the part between :data:`BEGIN` and :data:`END` replaced by ``block``; a ValueError naming the
    markers when ``text`` lacks them."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the text has no generated speed table: add the lines {BEGIN!r} and {END!r} where it goes")
    return text[:start] + block + text[end + len(END):]


def write_speed_tables(ref: Reference, root: Path = REPO, files: tuple[str, ...] = SPEED_TABLE_FILES) -> list[Path]:
    """Rewrite the speed table in each file (all checked for markers before any is written)."""
    block = speed_block(ref)
    texts = {root / f: replace_block((root / f).read_text(), block) for f in files}
    for path, text in texts.items():
        path.write_text(text)
    return list(texts)


# ---------------------------------------------------------------------------------------------------------------
# the decision table (end of notebook 09)
# ---------------------------------------------------------------------------------------------------------------
#: every drafter the lab has: (its name, the summary row that measures it or None, what it needs per drafted token)
DRAFTERS = (
    ("self-draft, shipped configuration", "shipped configuration", "a forward of the kept blocks"),
    ("self-draft, paper's recipe (adaptive threshold)", "paper's recipe", "a forward of the kept blocks"),
    ("prompt lookup in front of the self-draft", "shipped + prompt lookup", "none for copied tokens"),
    ("draft head on the trained path", "draft head", "the kept blocks and a small head"),
    ("Medusa heads", "Medusa heads", "no draft forward (heads on the last verify's hidden state)"),
    ("lookahead decoding", "lookahead", "no draft forward (its window rides in the verify forward)"),
    ("token recycling", "token recycling", "no draft forward (the target's top-k from earlier verifies)"),
    ("draft tree", "best tree", "kept blocks per node; a wider verify"),
    ("cascade (lookup under the self-draft)", "best cascade", "lookup, then the kept blocks"),
    ("separate draft model", "separate draft model", "a forward of a second model"),
    ("early exit", "early exit", "the first layers"),
    ("Jacobi / Gauss-Seidel (parallel decoding)", None, "full-model iterations"),
    ("target-confidence gate", None, "none (turns drafting off)"),
)
REGIMES = ("this CPU, small model", "GPU, small model (launch-bound)", "large model (memory-bound)", "batch > 1")


def best_rows(ref: Reference, source: str = "stubs") -> list[str]:
    """The summary rows on ``source`` whose speedup range overlaps the highest median's: the ones that are within
    the noise of the best (the only ranking the reference allows)."""
    rows = [r for r in ref.select("summary", source) if r.baseline == PLAIN and r.method not in (PLAIN, AA)]
    if not rows:
        return []
    top = max(rows, key=lambda r: r.speedup.median)
    return [r.method for r in rows if verdict(r.speedup, top.speedup) == "within the noise"]


def _device_rows(path: Path) -> tuple[dict, dict]:
    """From the GPU run: ({(method, source): speedup Spread} of its fp32 benchmark rows, the large random model's
    calibration: {"model", "c" at half the blocks kept, "c_v"}); ({}, {}) without the file."""
    if not Path(path).is_file():
        return {}, {}
    data = json.loads(Path(path).read_text())
    bench = {(r["method"], r["source"]): Spread(r["speedup"], r["speedup_min"], r["speedup_max"])
             for r in data.get("bench", []) if r.get("dtype") == "fp32"}
    large = [c for c in data.get("calibration", []) if c.get("model", "").startswith("random")]
    if not large:
        return bench, {}
    big = max(large, key=lambda c: c.get("n_parameters", 0))
    half = [d["c"] for d in big.get("draft_costs", []) if d.get("kept") == 0.5]
    return bench, {"model": big["model"], "c": half[0] if half else math.nan, "c_v": big["summary"]["c_v"]}


def _large_cell(needs: str, large: dict) -> str:
    """What a memory-bound step implies for a drafter: its draft cost follows the bytes it reads."""
    if "kept blocks" in needs or "first layers" in needs:
        if not large:
            return "c ≈ blocks kept (not measured)"
        return f"c ≈ blocks kept ({large['c']:.2f} at half, {large['model']})"
    if needs.startswith(("none for", "no draft")):
        return "c ≈ 0: pays whenever α > 0"
    return "c = its bytes / the target's" if "second model" in needs else "not measured"


def _gpu_cell(label: str, gpu: dict) -> str:
    match = {"shipped configuration": "shipped draft, chain", "best tree": "shipped draft, confidence tree",
             "draft head": "draft head on its set"}.get(label)
    found = [s for (m, _), s in gpu.items() if m == match]
    if not found:
        return "not measured"
    low, high = min(s.low for s in found), max(s.high for s in found)
    return f"{low:.2f}–{high:.2f}x (H200, fp32)"


def _cpu_cell(ref: Reference, label: str | None, source: str, best: list[str]) -> str:
    if label is None:
        return "see 06 / 09"
    found = [r for r in ref.select("summary", source) if r.method == label]
    if not found:
        return "not measured"
    mark = "" if label not in best else " (fastest)" if len(best) == 1 else " (fastest, tied within the noise)"
    return f"{found[0].speedup.median:.2f}x{mark}"


def decision_table(ref: Reference, device_bench: str | Path = DEVICE_BENCH, source: str = "stubs") -> list[dict]:
    """One row per drafter (:data:`DRAFTERS`), one column per setting (:data:`REGIMES`): this CPU's reference
    speedup on ``source`` (the best ones marked: within the noise of the highest median), the GPU run's speedup range
    where it measured the drafter, the draft cost a memory-bound step implies (c of the GPU run's large random model at
    half its blocks), and "not measured" for batches (the lab has timed no batched speculative decoding: a batch
    fills the spare capacity a draft uses, so expect less gain as it grows)."""
    best, (gpu, large) = best_rows(ref, source), _device_rows(Path(device_bench))
    rows = []
    for name, label, needs in DRAFTERS:
        rows.append({"drafter": name, "draft costs": needs, REGIMES[0]: _cpu_cell(ref, label, source, best),
                     REGIMES[1]: _gpu_cell(label, gpu) if label else "not measured",
                     REGIMES[2]: _large_cell(needs, large),
                     REGIMES[3]: "not measured"})
    return rows


def format_decision_table(rows: list[dict]) -> str:
    """The decision table as Markdown (6 columns)."""
    if not rows:
        return ""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|---" * len(keys) + "|"]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)
