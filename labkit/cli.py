"""The lab's one command line: ``python -m labkit <command> [args]``.

    python -m labkit                      # the commands, one line each
    python -m labkit grid --help          # a command's own options (its argparse)
    python -m labkit train --name default

Each command is the ``main(argv)`` of the module that does the work; this table only names them. The old forms
``python -m labkit.bench``, ``python -m labkit.playground``, ... still work, because model cards and committed results
record them: ``labkit/_aliases/<old name>.py`` is importable as ``labkit.<old name>`` (``labkit/__init__.py`` puts that
folder on ``labkit.__path__``) and calls :func:`alias`. ``python -m labkit.search`` is the search package's own
``__main__`` and works as it always did.
"""
from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import __version__

PROG = "python -m labkit"


def load(target: str) -> Callable:
    """The function a ``"module:function"`` target names, imported now. Commands are imported only when they run,
    so that one command's heavy or broken imports never slow down or break another (or the command list)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def robustness_main(argv: Sequence[str] | None = None) -> Path:
    """Measure how well a model tolerates skipping, then refresh its model card (a lab-trained model's card shows
    the robustness table, so the two never disagree)."""
    path = load("labkit.measure.robustness:main")(None if argv is None else list(argv))
    if (path.parent / "training.json").exists():
        load("labkit.training.modelcard:write_model_card")(path.parent)
    return path


@dataclass(frozen=True)
class Command:
    """One command: its name, the ``main(argv)`` that runs it (``"module:function"``), a one-line summary, and the
    older names it answers to (``python -m labkit.<old name>`` runs it too)."""
    name: str
    target: str
    summary: str
    old_names: tuple[str, ...] = ()


COMMANDS: tuple[Command, ...] = (
    Command("train", "labkit.training.loop:main", "train a lab model (data/models/<name>/, resumable)"),
    Command("train-draft-head", "labkit.training.draft_head:main", "fit a draft head for a model's draft path",
            ("train_draft_head",)),
    Command("train-heads", "labkit.training.medusa:main", "fit Medusa heads (multi-token drafts) for a model"),
    Command("robustness", "labkit.cli:robustness_main",
            "how well a model tolerates skipping; refreshes its model card"),
    Command("costmodel", "labkit.measure.costmodel:main", "this machine's forward costs of a model (c, c_v)"),
    Command("calibrate", "labkit.measure.calibration:main",
            "predict the speedup self-drafting reaches on this machine and model, then measure it"),
    Command("search", "labkit.search.__main__:main",
            "Bayesian optimisation of the draft (run, final, export, compare, rank, check)"),
    Command("grid", "labkit.measure.grid:main",
            "measure the playground's precomputed grid (data/playground/<model>.json)", ("playground",)),
    Command("bench", "labkit.measure.bench:main", "the side-by-side benchmark of every method on this machine"),
    Command("device-bench", "labkit.measure.device_bench:main",
            "lossless checks, a benchmark and the calibration on a GPU (or any device): data/bench/device/"),
    Command("reference", "labkit.measure.reference_run:main",
            "the quiet reference runs every comparison of the lab quotes (data/reference/, resumable)"),
    Command("stop-signal", "labkit.measure.stop_signal:main", "which draft signal predicts rejection while sampling",
            ("stop_signal",)),
    Command("notebooks", "labkit.lessons.notebook:main", "execute every notebook (html: and export HTML to build/)"),
)


def find(name: str) -> Command:
    """The command called ``name`` (or by one of its old names); a LookupError listing the commands otherwise."""
    for command in COMMANDS:
        if name == command.name or name in command.old_names:
            return command
    names = [c.name for c in COMMANDS]
    close = difflib.get_close_matches(name, names + [o for c in COMMANDS for o in c.old_names], n=1)
    hint = f" (did you mean {find(close[0]).name!r}?)" if close else ""
    raise LookupError(f"unknown command {name!r}{hint}; the commands are: {', '.join(names)}")


def usage() -> str:
    """The command list, one line each (``python -m labkit`` and ``python -m labkit --help``)."""
    width = max(len(c.name) for c in COMMANDS) + 2
    lines = [f"usage: {PROG} <command> [args]", "",
             f"{PROG} <command> --help gives a command's own options. Commands:"]
    lines += [f"  {c.name:<{width}}{c.summary}" for c in COMMANDS]
    old = sorted(f"{PROG}.{o}" for c in COMMANDS for o in (c.old_names or (c.name,)) if o.isidentifier())
    lines += ["", "The older forms still work: " + ", ".join(old) + "."]
    return "\n".join(lines)


@contextmanager
def _program_name(prog: str) -> Iterator[None]:
    """argparse names a parser without ``prog=`` after ``sys.argv[0]``: set it for one call, so that a command's
    usage line shows the form it was called by (``python -m labkit grid`` or ``python -m labkit.playground``)."""
    saved = sys.argv[:1]
    sys.argv[:1] = [prog]
    try:
        yield
    finally:
        sys.argv[:1] = saved


def run(name: str, argv: Sequence[str], prog: str | None = None) -> int:
    """Run one command with its arguments; its exit status (a command's ``main`` returning a result means 0)."""
    command = find(name)
    with _program_name(prog or f"{PROG} {command.name}"):
        result = load(command.target)(list(argv))
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m labkit <command> [args]``: the command list without a command, else the command's exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv[0] == "--version":
        print(f"labkit {__version__}")
        return 0
    try:
        find(argv[0])
    except LookupError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    return run(argv[0], argv[1:])


def alias(old_name: str) -> None:
    """The body of ``python -m labkit.<old_name>``: the same command, its usage line naming the old form."""
    sys.exit(run(old_name, sys.argv[1:], prog=f"{PROG}.{old_name}"))
