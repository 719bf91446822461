"""Reference runs: the committed, quiet measurements every comparative sentence of the lab is computed from.

A notebook's live run only *checks* this machine against them (docs/decisions.md, issue 35): a sentence that ranks
drafters or states a speedup reads a :class:`Reference` (:func:`load_reference`), and a live number is shown beside
its reference row by :func:`live_vs_reference`, whose line always contains "this machine" and only says whether
this machine agrees with the reference within the noise. :func:`aa_pair` measures one configuration twice,
interleaved, so a reader sees what "within the noise" means here (the noise floor).

A reference file ``data/reference/<group>.json`` (written by :mod:`labkit.measure.reference.run`,
``python -m labkit reference``) holds ``{"group", "machine", "plan", "rows": [...]}``; each row is a
:class:`ReferenceRow`'s fields, spreads as ``[median, min, max]``.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...artifacts.paths import DATA_DIR
from ...core.checks import take_options
from ..harness import Decoder, Method, json_safe, run_interleaved, summarise

__all__ = ["REFERENCE_DIR", "SOURCES", "PLAIN", "AA", "SUMMARY_METHODS", "SAMPLING_METHODS", "Spread",
           "ReferenceRow", "Machine", "Reference", "load_reference", "verdict", "live_vs_reference",
           "AAResult", "aa_pair", "aa_sentence", "row_from_summary", "NOISE_WORDS"]

#: where the committed reference runs live, one file per group (``--only NAME`` runs one)
REFERENCE_DIR = DATA_DIR / "reference"
#: the verdict words of :func:`verdict`, in the order slower / within the noise / faster
NOISE_WORDS = ("slower", "within the noise", "faster")
#: the prompt kinds every reconciled row is measured on (labkit.artifacts.prompts' built-in sources)
SOURCES = ("stdlib", "packages", "stdlib-long", "packages-long", "stubs")
#: the labels of the reconciled speedup table's rows (group 'summary'), in table order; the speedups are against
#: PLAIN, the sampling rows' against plain sampling at the same temperature
PLAIN, AA = "plain loop", "plain loop, again (A/A)"
SUMMARY_METHODS = (PLAIN, AA, "paper's recipe", "shipped configuration", "shipped + prompt lookup", "draft head",
                   "Medusa heads", "lookahead", "token recycling", "best tree", "best cascade", "separate draft model",
                   "early exit")
#: speculative sampling's rows: (temperature, its label, its baseline's label)
SAMPLING_METHODS = tuple((t, f"speculative sampling, T={t:g}", f"plain sampling, T={t:g}") for t in (0.7, 1.0))


@dataclass(frozen=True)
class Spread:
    """A median with the min-max range of the repetitions it came from (a speedup, ms per token, c, ...)."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, value) -> Spread:
        """A Spread from a Spread, a ``[median, min, max]`` list or one number (its own range)."""
        if isinstance(value, Spread):
            return value
        if isinstance(value, (int, float)):
            return cls(float(value), float(value), float(value))
        if isinstance(value, Sequence) and len(value) == 3:
            return cls(*(float("nan") if v is None else float(v) for v in value))
        raise ValueError(f"a spread is a number or [median, min, max], got {value!r}")

    def overlaps(self, other: Spread) -> bool:
        """Whether the two min-max ranges share a point: then no ranking between them is beyond the noise."""
        return self.low <= other.high and other.low <= self.high

    def text(self, unit: str = "x", digits: int = 2) -> str:
        """'1.31x (1.20-1.41)'; ``unit`` follows each number ('x' for speedups, ' ms' for times)."""
        f = f"{{:.{digits}f}}"
        return f"{f.format(self.median)}{unit} ({f.format(self.low)}-{f.format(self.high)})"

    def as_list(self) -> list[float]:
        return [self.median, self.low, self.high]


@dataclass(frozen=True)
class ReferenceRow:
    """One method measured in a reference run: its label, what it ran on, its timing and its trace's counts.
    ``speedup`` is against ``baseline`` (the plain loop, or plain *sampling* at the same temperature) in the same
    interleaved run; NaN where a column does not apply (no trace: acceptance, tokens per step, c, c_v)."""

    group: str                  # the reference group ('summary', '07', ...): the file it lives in
    method: str                 # the row's label, e.g. 'shipped configuration'
    kind: str                   # the harness Method's kind ('plain', 'self-spec', 'medusa', 'tree', ...)
    source: str                 # prompt source ('stdlib', 'packages', 'stdlib-long', 'packages-long', 'stubs')
    prompts: int                # prompts measured
    tokens: int                 # new tokens per prompt
    repetitions: int
    ms_per_token: Spread
    speedup: Spread
    acceptance: float = math.nan
    tokens_per_step: float = math.nan
    c: float = math.nan
    c_v: float = math.nan
    identical: bool | None = None   # greedy: the same tokens as the baseline on every run (None: sampling)
    baseline: str = "plain loop"
    extra: dict = field(default_factory=dict)   # a group's own columns (e.g. 'limit', 'gated_fraction')

    @classmethod
    def from_dict(cls, data: dict) -> ReferenceRow:
        data = dict(data)
        for key in ("ms_per_token", "speedup"):
            data[key] = Spread.of(data[key])
        for key in ("acceptance", "tokens_per_step", "c", "c_v"):
            data[key] = math.nan if data.get(key) is None else float(data[key])
        return cls(**data)

    def to_dict(self) -> dict:
        """The row as strict JSON's values (NaN written as None)."""
        out = asdict(self)
        out["ms_per_token"], out["speedup"] = self.ms_per_token.as_list(), self.speedup.as_list()
        return json_safe(out)


@dataclass(frozen=True)
class Machine:
    """What a reference run ran on: the CPU, torch threads, versions, the load average before and after (1, 5,
    15 minutes) and the date; ``contended`` when the load says other work shared the cores."""

    cpu_model: str
    threads: int
    versions: dict
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    date: str
    contended: bool
    info: dict = field(default_factory=dict)    # labkit.measure.machine.machine_info() as recorded

    @classmethod
    def from_dict(cls, data: dict) -> Machine:
        return cls(cpu_model=data.get("cpu_model", "an unnamed CPU"), threads=int(data.get("threads", 1)),
                   versions=dict(data.get("versions", {})), load_before=tuple(data.get("load_before", (0, 0, 0))),
                   load_after=tuple(data.get("load_after", (0, 0, 0))), date=data.get("date", ""),
                   contended=bool(data.get("contended", False)), info=dict(data.get("info", {})))

    def describe(self) -> str:
        """'Intel Xeon ... (1 torch thread, quiet)': how sentences name the reference machine."""
        threads = f"{self.threads} torch thread{'s' if self.threads != 1 else ''}"
        load = (f"contended: load average {self.load_before[0]:.1f} before, {self.load_after[0]:.1f} after"
                if self.contended else "quiet")
        return f"{self.cpu_model} ({threads}, {load})"


@dataclass
class Reference:
    """Reference rows (one or several groups) and the machine each group ran on."""

    rows: list[ReferenceRow]
    machines: dict[str, Machine]
    paths: list[Path] = field(default_factory=list)

    @property
    def machine(self) -> Machine:
        """The machine of the first group (every group of one reference run ran on the same one)."""
        return next(iter(self.machines.values()))

    def machine_for(self, row: ReferenceRow) -> Machine:
        """The machine ``row``'s group ran on."""
        return self.machines[row.group]

    def select(self, group: str | None = None, source: str | None = None) -> list[ReferenceRow]:
        """The rows of ``group`` and ``source`` (None: any), in file order."""
        return [r for r in self.rows if group in (None, r.group) and source in (None, r.source)]

    def row(self, method: str, source: str = "stdlib", group: str | None = None) -> ReferenceRow:
        """The row labelled ``method`` on ``source`` (in ``group`` when given); a LookupError naming what exists."""
        found = [r for r in self.select(group, source) if r.method == method]
        if not found:
            known = sorted({r.method for r in self.select(group, source)})
            raise LookupError(f"no reference row {method!r} on source {source!r}"
                              + (f" in group {group!r}" if group else "") + f"; rows there: {known}")
        return found[0]

    def speedup(self, method: str, source: str = "stdlib", group: str | None = None) -> Spread:
        return self.row(method, source, group).speedup


def load_reference(name_or_path: str | Path | None = None, folder: str | Path | None = None) -> Reference:
    """The committed reference runs: None, every group under ``folder`` (default ``data/reference/``); a group's
    name ('summary', '07'), ``<folder>/<name>.json``; or a path to one reference file. FileNotFoundError names
    the command that writes the file."""
    folder = Path(folder) if folder is not None else REFERENCE_DIR
    if name_or_path is None:
        paths = sorted(folder.glob("*.json"))
        if not paths:
            raise FileNotFoundError(f"no reference runs under {folder}: run `python -m labkit reference`")
    else:
        path = Path(name_or_path)
        if path.suffix != ".json":
            path = folder / f"{name_or_path}.json"
        if not path.is_file():
            raise FileNotFoundError(f"reference file {path} does not exist: run `python -m labkit reference "
                                    f"--only {path.stem}`")
        paths = [path]
    rows, machines = [], {}
    for path in paths:
        data = json.loads(path.read_text())
        group = data.get("group", path.stem)
        machines[group] = Machine.from_dict(data.get("machine", {}))
        rows += [ReferenceRow.from_dict({**r, "group": group}) for r in data.get("rows", [])]
    return Reference(rows, machines, paths)


def verdict(live: Spread, reference: Spread) -> str:
    """'within the noise' when the two min-max ranges overlap; else 'slower' or 'faster': this machine's value
    below or above the reference's (for a speedup: it gains less or more)."""
    if live.overlaps(reference):
        return NOISE_WORDS[1]
    return NOISE_WORDS[0] if live.high < reference.low else NOISE_WORDS[2]


def live_vs_reference(label: str, live: Spread, reference: ReferenceRow | Spread, machine: Machine | None = None,
                      *, unit: str = "x") -> str:
    """One line putting a live measurement beside its reference: "On this machine <label> measured 1.31x
    (1.20-1.41); the reference run measured 1.55x (1.50-1.60) on <CPU>: this machine agrees within the noise"
    (or "... gains less / more than the reference, beyond the noise"). ``unit`` 'x' for speedups, ' ms' for ms
    per token (then a higher live value reads 'is slower'). Never ranks anything on the live run alone."""
    ref = reference.speedup if isinstance(reference, ReferenceRow) and unit == "x" else (
        reference.ms_per_token if isinstance(reference, ReferenceRow) else Spread.of(reference))
    live = Spread.of(live)
    word = verdict(live, ref)
    on = f" on {machine.describe()}" if machine is not None else ""
    if word == NOISE_WORDS[1]:
        tail = "this machine agrees within the noise"
    elif unit == "x":
        tail = f"this machine gains {'less' if word == 'slower' else 'more'} than the reference, beyond the noise"
    else:
        tail = f"this machine is {'slower' if word == 'faster' else 'faster'} than the reference, beyond the noise"
    return (f"On this machine {label} measured {live.text(unit)}; the reference run measured {ref.text(unit)}{on}: "
            f"{tail}.")


@dataclass(frozen=True)
class AAResult:
    """One configuration timed twice in the same interleaved run: ``first`` and ``second`` ms per token, and
    ``ratio``, first's over second's per repetition (1 means no difference): the noise floor of this machine."""

    label: str
    first: Spread
    second: Spread
    ratio: Spread
    identical: bool


def aa_pair(make_decoder: Callable[[], Decoder], prompt_ids: Sequence, *, max_new_tokens: int, repeats: int = 5,
            progress: bool = False) -> AAResult:
    """The A/A pair: two decoders from ``make_decoder()`` (the same configuration, fresh state each) run
    interleaved through the harness; how far apart the same thing measures is what "within the noise" means."""
    a, b = make_decoder(), make_decoder()
    label = a.method.label
    first = Decoder(Method(a.method.kind, f"{label} (A)", a.method.model, "baseline", greedy=a.method.greedy), a.run)
    second = Decoder(Method(b.method.kind, f"{label} (B)", b.method.model, "baseline", greedy=b.method.greedy), b.run)
    runs = run_interleaved([first, second], list(prompt_ids), max_new_tokens=max_new_tokens, repeats=repeats,
                           desc="A/A", progress=progress)
    row_a, row_b = summarise(runs, first.method)
    return AAResult(label, Spread(row_a["ms_per_token"], row_a["ms_min"], row_a["ms_max"]),
                    Spread(row_b["ms_per_token"], row_b["ms_min"], row_b["ms_max"]),
                    Spread(row_b["speedup"], row_b["speedup_min"], row_b["speedup_max"]),
                    bool(row_b["identical"]) if a.method.greedy else False)


def aa_sentence(aa: AAResult | Spread, label: str | None = None, *, live: bool = True) -> str:
    """The noise floor in words: the same configuration against itself. ``live``: measured here (the line says
    "this machine"); else the reference run's pair (its ``ratio`` a Spread, ``label`` naming it)."""
    ratio = aa.ratio if isinstance(aa, AAResult) else Spread.of(aa)
    name = label or (aa.label if isinstance(aa, AAResult) else "the same configuration")
    where = "On this machine" if live else "In the reference run"
    return (f"{where} {name}, timed twice in one interleaved run, measured {ratio.text('x')} of itself: "
            f"differences inside a range like this are noise.")


def row_from_summary(summary: dict, *, label: str | None = None, baseline: str = "plain loop",
                     extra: Sequence[str] = (), **run) -> ReferenceRow:
    """A :class:`ReferenceRow` from one row of :func:`labkit.measure.harness.summarise` (``label`` renames it;
    ``extra``: harness columns kept in the row's ``extra``). ``run``: the row's fields the summary does not hold,
    by name: ``group``, ``source``, ``prompts``, ``tokens``, ``repetitions``."""
    take_options("row_from_summary", run, ("group", "source", "prompts", "tokens", "repetitions"))
    missing = [k for k in ("group", "source", "prompts", "tokens", "repetitions") if k not in run]
    if missing:
        raise TypeError(f"row_from_summary() missing keyword argument {missing[0]!r}")
    identical = summary.get("identical")
    return ReferenceRow(
        method=label or summary["method"], kind=summary.get("kind", ""), **run,
        ms_per_token=Spread(summary["ms_per_token"], summary["ms_min"], summary["ms_max"]),
        speedup=Spread(summary["speedup"], summary["speedup_min"], summary["speedup_max"]),
        acceptance=summary.get("acceptance", math.nan), tokens_per_step=summary.get("tokens_per_step", math.nan),
        c=summary.get("c", math.nan), c_v=summary.get("c_v", math.nan),
        identical=None if identical is None or (isinstance(identical, float) and math.isnan(identical))
        else bool(identical), baseline=baseline, extra={k: summary.get(k, math.nan) for k in extra})
