"""``python -m labkit reference``: the quiet reference runs every comparative sentence of the lab is computed from.

    python -m labkit reference --list              # the groups, what each answers, the time each should take
    python -m labkit reference                     # every group (about 17 minutes on 2 quiet cores, one thread)
    python -m labkit reference --only summary      # one group (repeatable, or comma-separated)
    python -m labkit reference --fast              # 2 prompts x 32 tokens: a minute or two, for a first file
    python -m labkit reference --force             # measure again what is already there

Every group (:mod:`labkit.measure.reference.groups`) is a list of units; each unit is one interleaved run of the
harness (:func:`labkit.measure.harness.run_interleaved`: every decoder once in turn per prompt and repetition, the
order reversed on odd repetitions, one untimed warm-up call each), at least 5 repetitions, greedy rows checked
token-identical to the plain loop. A finished unit is written at once to ``<out>/<group>.json`` (the rows so far,
the machine with the load average before and after, the plan), so a stopped run resumes at the next unit; a rerun
skips finished units measured with the same plan unless ``--force`` (a ``--fast`` file is measured again in
full). A finished group also gets a readable ``<group>.md``.

The estimate (``--list``, printed before a run): decoders x prompts x new tokens x (repetitions + warm-up) x
``ms_per_token_guess`` (2.5 ms: between the plain loop's 3.4 and the drafted rows' 2 ms per token on a quiet
2-core AMD EPYC, one thread), divided by √B for a batch unit of B rows (the batched loops' throughput grew 4-7x
from batch 1 to 16 in ``docs/notes/batch_bench.stdout.txt``). The default plan: the summary 6 prompts x 128 new
tokens per source (sampling rows 2 prompts), the notebook groups 4 x 64 (group 13: 16 or 32 prompts x 64 in
batches), 5 repetitions everywhere: about 17 minutes in all on that machine.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import transformers
from tqdm.auto import tqdm

from ...artifacts import arguments
from ...artifacts.models import load_model, model_folder
from ...artifacts.prompts import benchmark_prompts, source_info
from ...core.checks import check_int
from ..bench.methods import shipped_draft
from ..comparisons.batches import pack_rows
from ..harness import Stopwatch, run_interleaved, summarise
from ..machine import machine_info
from .groups import GROUPS, Group, Unit
from .loader import REFERENCE_DIR, SOURCES, ReferenceRow, load_reference, row_from_summary
from .tables import write_speed_tables

__all__ = ["ReferenceConfig", "Context", "run_group", "run_reference", "estimate_seconds", "machine_record",
           "format_group", "main"]

#: harness columns a reference row keeps in ``extra`` beside its own fields
EXTRA = ("accepted_per_step", "drafted_per_step", "limit", "gated_fraction", "select_share")


@dataclass
class ReferenceConfig:
    model: str = "default"
    n_prompts: int = 6                  # per source, greedy units (benchmark_prompts: never the choosing prompts)
    max_new_tokens: int = 128
    sampling_prompts: int = 2           # per source, sampling units
    group_prompts: int = 4              # the notebook groups' units (every group but 'summary')
    group_tokens: int = 64
    repeats: int = 5
    temperatures: tuple[float, ...] = (0.7, 1.0)
    threads: int = 1
    seed: int = 0
    only_sources: tuple[str, ...] = ()  # () every source a group names
    ms_per_token_guess: float = 2.5
    out_dir: str = str(REFERENCE_DIR)
    force: bool = False

    def __post_init__(self) -> None:
        for name in ("n_prompts", "max_new_tokens", "sampling_prompts", "group_prompts", "group_tokens", "threads"):
            check_int(name, getattr(self, name), 1)
        check_int("repeats", self.repeats, 5)          # the protocol's minimum: fewer cannot show a spread

    @classmethod
    def fast(cls, **overrides) -> ReferenceConfig:
        """A quick first file (contended machines, tests): 2 prompts x 32 tokens, still 5 repetitions."""
        base = dict(n_prompts=2, max_new_tokens=32, sampling_prompts=1, group_prompts=2, group_tokens=32)
        return cls(**{**base, **overrides})

    def size(self, group: str, unit: Unit) -> tuple[int, int]:
        """(prompts, new tokens) of one unit."""
        if unit.prompts:                        # a batch unit: its own prompts (at least one per row)
            return unit.prompts, self.group_tokens
        if group != "summary":
            return self.group_prompts, self.group_tokens
        return (self.sampling_prompts if unit.sampling else self.n_prompts), self.max_new_tokens


@dataclass
class Context:
    """What groups build their decoders from: the models (loaded once, on first use), the shipped draft, caches."""

    config: ReferenceConfig
    _cache: dict = field(default_factory=dict)
    #: (name, model, tokenizer) -> WidthPredictors: :func:`labkit.training.width.predictors_for`, given by the command
    #: line (``labkit.cli.reference_main``), since measure does not import training; group 12 needs it
    fit_width: Callable | None = None

    @property
    def name(self) -> str:
        return self.config.model

    def cached(self, key: str, make: Callable[[], object]):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def loaded(self, name: str | None = None):
        name = name or self.name
        return self.cached(f"model:{name}", lambda: load_model(name))

    def model(self, name: str | None = None):
        return self.loaded(name)[0]

    def tokenizer(self):
        return self.loaded()[1]

    def draft_model(self):
        """The separate draft model (data/models/draft), None when the lab has none."""
        has = (model_folder("draft") / "config.json").exists()
        return self.loaded("draft")[0] if has else None

    def width_predictors(self):
        """The width drafts' predictors of the model (fitted once in seconds, or read from their cache)."""
        if self.fit_width is None:
            raise RuntimeError("the width groups need the predictors' fitter: run them with `python -m labkit "
                               "reference` (or give Context(fit_width=labkit.training.width.predictors_for))")
        return self.cached("width", lambda: self.fit_width(self.name, self.model(), self.tokenizer()))

    def shipped(self):
        return self.cached("shipped", lambda: shipped_draft(self.name, self.model()))

    def sources(self, wanted: tuple[str, ...]) -> tuple[str, ...]:
        only = self.config.only_sources
        return tuple(s for s in wanted if not only or s in only)

    def prompt_ids(self, source: str, n: int) -> list[torch.Tensor]:
        def make():
            tokenizer = self.tokenizer()
            return [tokenizer(p.text, return_tensors="pt")["input_ids"]
                    for p in benchmark_prompts(n, seed=self.config.seed, source=source)]
        return self.cached(f"prompts:{source}:{n}", make)


def machine_record(threads: int, load_before: tuple, load_after: tuple) -> dict:
    """The machine of a reference file (:class:`labkit.measure.reference.loader.Machine`'s fields): contended when the
    1-minute load average before or after it was above the run's own threads + 0.75 (the run's own thread, and the
    group it just ran, hold the load near its thread count; other work shows above it)."""
    info = machine_info()
    return {"cpu_model": info.get("cpu_model") or info.get("processor", ""), "threads": threads,
            "versions": {"python": info["python"], "torch": info["torch"], "transformers": transformers.__version__},
            "load_before": list(load_before), "load_after": list(load_after),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "contended": contended(threads, load_before, load_after), "info": info}


def contended(threads: int, load_before, load_after) -> bool:
    """Whether other work shared the cores: a 1-minute load above the run's threads + 0.75, before or after."""
    return bool(max(load_before[0], load_after[0]) > threads + 0.75)


def estimate_seconds(config: ReferenceConfig, group: Group, ctx: Context) -> float:
    """How long a group should take (the module's estimate, from each unit's expected number of decoders)."""
    total = 0.0
    for unit in group.units(ctx):
        prompts, tokens = config.size(group.name, unit)
        speed = unit.batch ** 0.5 if unit.batch else 1.0      # a batch's token: about 1/√B of one row's here
        total += unit.expected * tokens * (prompts * config.repeats + 1) * config.ms_per_token_guess / 1e3 / speed
    return total


def _plan(config: ReferenceConfig) -> dict:
    """What a file's rows were measured with (a resumed run adds to a file only when its plan is the same)."""
    plan = {k: v for k, v in asdict(config).items() if k not in ("out_dir", "force", "ms_per_token_guess")}
    return json.loads(json.dumps(plan))                   # tuples as lists, as the file holds them


def _load_existing(path: Path, config: ReferenceConfig) -> dict:
    """The finished units and rows of ``path``; none with ``force``, or when the file was measured with another
    plan (a --fast file is measured again in full, never mixed with it)."""
    if config.force or not path.is_file():
        return {"rows": [], "units": []}
    data = json.loads(path.read_text())
    if data.get("plan") != _plan(config):
        tqdm.write(f"{path}: measured with another plan ({data.get('plan')}); measuring it again")
        return {"rows": [], "units": []}
    return {"rows": data.get("rows", []), "units": data.get("units", [])}


def _unit_rows(ctx: Context, group: Group, unit: Unit, progress: bool = False) -> list[ReferenceRow]:
    config = ctx.config
    prompts, tokens = config.size(group.name, unit)
    decoders = unit.make()
    ids = ctx.prompt_ids(unit.source, prompts)
    if unit.batch:                              # blocks of unit.batch rows, one batched call each
        ids = pack_rows(ids, unit.batch)
    with torch.inference_mode():
        runs = run_interleaved(decoders, ids, max_new_tokens=tokens, repeats=config.repeats,
                               desc=f"{group.name}: {unit.key}", progress=progress)
    baseline = next(d.method for d in decoders if d.method.label == unit.baseline)
    return [row_from_summary(s, group=group.name, source=unit.source, prompts=prompts, tokens=tokens,
                             repetitions=config.repeats, baseline=unit.baseline, extra=EXTRA)
            for s in summarise(runs, baseline)]


def run_group(ctx: Context, group: Group, *, progress: bool = True) -> Path:
    """Every unit of ``group`` not yet in its file (all with ``force``), each written at once; the .md at the end."""
    config, out = ctx.config, Path(ctx.config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{group.name}.json"
    done = _load_existing(path, config)
    load_before = os.getloadavg()
    units = [u for u in group.units(ctx) if u.key not in done["units"]]
    clock = Stopwatch()
    for unit in tqdm(units, desc=f"reference {group.name}", disable=not progress):
        rows = _unit_rows(ctx, group, unit, progress)
        differ = [r.method for r in rows if r.identical is False]
        if differ:                                     # recorded in the file and its .md; said here at once too
            tqdm.write(f"{group.name}, {unit.key}: NOT token-identical to {unit.baseline}: {', '.join(differ)}")
        done["rows"] += [r.to_dict() for r in rows]
        done["units"].append(unit.key)
        _write(path, group, ctx, done, load_before, clock.seconds)
    if not units and not path.exists():
        _write(path, group, ctx, done, load_before, 0.0)
    path.with_suffix(".md").write_text(format_group(load_reference(path)))
    return path


def _write(path: Path, group: Group, ctx: Context, done: dict, load_before: tuple, seconds: float) -> None:
    config = ctx.config
    plan = _plan(config)
    sources = sorted({r["source"] for r in done["rows"]})
    record = {"group": group.name, "title": group.title, "model": config.model,
              "command": "python -m labkit reference --only " + group.name, "seconds": round(seconds, 1),
              "machine": machine_record(config.threads, load_before, os.getloadavg()), "plan": plan,
              "sources": {s: source_info(s) for s in sources}, "detail": group.detail(ctx),
              "units": done["units"], "rows": done["rows"]}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1, allow_nan=False))
    tmp.replace(path)                        # never a half-written file: a stopped run keeps the last whole unit


def format_group(reference) -> str:
    """A reference file as Markdown: the machine, then one table per source (speedup and ms per token with their
    min-max ranges, acceptance, tokens per step, c, c_v, identical)."""
    machine = reference.machine
    rows = reference.rows
    first = rows[0] if rows else None
    lines = [f"# Reference group {first.group if first else '(empty)'}", "",
             f"Measured on {machine.describe()}, {machine.date}; torch {machine.versions.get('torch', '?')}, "
             f"transformers {machine.versions.get('transformers', '?')}."]
    if first:
        sampled = any(r.identical is None for r in rows)          # sampling rows have no identity check
        lines.append(f"{first.prompts} prompts x {first.tokens} new tokens x {first.repetitions} interleaved "
                     "repetitions per source" + (" (sampling rows: their own prompt count)" if sampled else "")
                     + "; speedups against the row named in 'against'.")
    for source in dict.fromkeys(r.source for r in rows):
        lines += ["", f"## {source}", "", "| method | speedup (min-max) | ms/token (min-max) | accepted/drafted "
                  "| tokens/step | c | c_v | identical | against |", "|---|---|---|---|---|---|---|---|---|"]
        for r in reference.select(source=source):
            ident = {True: "yes", False: "NO", None: "-"}[r.identical]
            lines.append(f"| {r.method} | {r.speedup.text('x')} | {r.ms_per_token.text('')} | {_num(r.acceptance)} "
                         f"| {_num(r.tokens_per_step)} | {_num(r.c)} | {_num(r.c_v)} | {ident} | {r.baseline} |")
    return "\n".join(lines) + "\n"


def _num(value: float) -> str:
    return "-" if value != value else f"{value:.2f}"


def run_reference(config: ReferenceConfig, only: tuple[str, ...] = (), *, progress: bool = True,
                  fit_width: Callable | None = None) -> list[Path]:
    """Every group (or those named in ``only``), in :data:`~labkit.measure.reference.groups.GROUPS` order;
    ``fit_width``: :attr:`Context.fit_width`."""
    unknown = [name for name in only if name not in GROUPS]
    if unknown:
        raise ValueError(f"only: unknown reference group(s) {unknown}; the groups are {list(GROUPS)}")
    ctx = Context(config, fit_width=fit_width)
    return [run_group(ctx, GROUPS[name], progress=progress) for name in GROUPS if not only or name in only]


def _names(allowed, what: str) -> Callable[[str], tuple[str, ...]]:
    """An option read as comma-separated names from ``allowed`` (a usage error names the option and the choices)."""
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        if not names or any(n not in allowed for n in names):
            raise argparse.ArgumentTypeError(f"{what} must be among {', '.join(allowed)}, got {text!r}")
        return names
    return parse


def _parser() -> argparse.ArgumentParser:
    parser = arguments.command_parser(__doc__.split("\n\n")[0], raw=True)
    parser.add_argument("--only", action="append", default=[], metavar="NAME", type=_names(tuple(GROUPS), "groups"),
                        help=f"run these groups only (repeatable or comma-separated): {', '.join(GROUPS)}")
    parser.add_argument("--fast", action="store_true", help="2 prompts x 32 tokens per unit (a first, rough file)")
    parser.add_argument("--out", type=arguments.output_folder, default=str(REFERENCE_DIR),
                        help="folder of the <group>.json / .md files")
    parser.add_argument("--force", action="store_true", help="measure again the units already written")
    parser.add_argument("--model", type=arguments.model, default="default")
    parser.add_argument("--sources", type=_names(SOURCES, "sources"), default=(),
                        help=f"comma-separated prompt sources to keep (default: all of {', '.join(SOURCES)})")
    parser.add_argument("--list", action="store_true", help="the groups and their estimated time; run nothing")
    return parser


def main(argv: list[str] | None = None, fit_width: Callable | None = None) -> list[Path]:
    """The command (``fit_width``: :attr:`Context.fit_width`, which ``labkit.cli.reference_main`` gives)."""
    args = _parser().parse_args(argv)
    only = tuple(name for names in args.only for name in names)
    make = ReferenceConfig.fast if args.fast else ReferenceConfig
    config = make(model=args.model, out_dir=args.out, force=args.force, only_sources=args.sources)
    torch.set_num_threads(config.threads)
    ctx = Context(config)
    total = 0.0
    for name, group in GROUPS.items():
        if only and name not in only:
            continue
        seconds = estimate_seconds(config, group, ctx)
        total += seconds
        n = len(group.units(ctx))
        print(f"  {name:<8} {n:>2} unit{'s' if n != 1 else ' '}, about {seconds / 60:.1f} min: {group.title}")
    print(f"about {total / 60:.0f} min in all (estimate: {config.ms_per_token_guess:g} ms per token, "
          f"{config.threads} thread)")
    if args.list:
        return []
    paths = run_reference(replace(config), only, fit_width=fit_width)
    summary = Path(config.out_dir) / "summary.json"
    if Path(config.out_dir).resolve() == REFERENCE_DIR.resolve() and summary.is_file():
        paths += write_speed_tables(load_reference(summary))       # README and docs/summary.md quote the new file
    print("written: " + ", ".join(str(p) for p in paths))
    return paths
