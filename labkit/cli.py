"""The lab's one command line: ``python -m labkit <command> [args]``.

    python -m labkit                      # the commands, one line each
    python -m labkit grid --help          # a command's own options (its argparse)
    python -m labkit train --name default

Each command is the ``main(argv)`` of the module that does the work; this table only names them. A command reads
its arguments with :mod:`labkit.artifacts.arguments` (one-line usage errors, exit status 2, before any work);
:func:`run` is the one place a failure while working becomes one line on stderr, exit status 1 (``--debug``, anywhere
after the command, shows the traceback instead), and Ctrl-C one line, exit status 130. The old forms
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
    path = load("labkit.measure.comparisons.robustness:main")(None if argv is None else list(argv))
    if (path.parent / "training.json").exists():
        load("labkit.training.modelcard:write_model_card")(path.parent)
    return path


def reference_main(argv: Sequence[str] | None = None) -> list[Path]:
    """The reference runs, given the width drafts' predictor fitter (group 12; measure does not import training)."""
    return load("labkit.measure.reference.run:main")(None if argv is None else list(argv),
                                                     fit_width=load("labkit.training.width:predictors_for"))


@dataclass(frozen=True)
class Command:
    """One command: its name, the ``main(argv)`` that runs it (``"module:function"``), a one-line summary, and the
    older names it answers to (``python -m labkit.<old name>`` runs it too; its own name where model cards and
    committed results record ``python -m labkit.<name>``; none for a command that never had another form)."""
    name: str
    target: str
    summary: str
    old_names: tuple[str, ...] = ()


COMMANDS: tuple[Command, ...] = (
    Command("train", "labkit.training.loop:main", "train a lab model (data/models/<name>/, resumable)", ("train",)),
    Command("train-draft-head", "labkit.training.draft_head:main", "fit a draft head for a model's draft path",
            ("train_draft_head",)),
    Command("train-heads", "labkit.training.medusa:main", "fit Medusa heads (multi-token drafts) for a model"),
    Command("robustness", "labkit.cli:robustness_main",
            "how well a model tolerates skipping; refreshes its model card", ("robustness",)),
    Command("costmodel", "labkit.measure.costs.costmodel:main", "this machine's forward costs of a model (c, c_v)"),
    Command("calibrate", "labkit.measure.costs.calibration:main",
            "predict the speedup self-drafting reaches on this machine and model, then measure it"),
    Command("search", "labkit.search.__main__:main",
            "Bayesian optimisation of the draft (run, final, export, compare, rank, check)"),
    Command("grid", "labkit.measure.grid.run:main",
            "measure the playground's precomputed grid (data/playground/<model>.json)", ("playground",)),
    Command("bench", "labkit.measure.bench.run:main", "the side-by-side benchmark of every method on this machine",
            ("bench",)),
    Command("device-bench", "labkit.measure.bench.device:main",
            "lossless checks, a benchmark and the calibration on a GPU (or any device): data/bench/device/"),
    Command("reference", "labkit.cli:reference_main",
            "the quiet reference runs every comparison of the lab quotes (data/reference/, resumable)"),
    Command("stop-signal", "labkit.measure.signals.stop_signal:main",
            "which draft signal predicts rejection while sampling",
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
    lines = [f"usage: {PROG} <command> [args] [{DEBUG_FLAG}]", "",
             f"A command's options: {PROG} <command> --help. A bad argument or a failure ends in one line",
             f"({DEBUG_FLAG}: a failure's traceback). Commands:"]
    lines += [f"  {c.name:<{width}}{c.summary}" for c in COMMANDS]
    old = sorted(f"{PROG}.{o}" for c in COMMANDS for o in c.old_names if o.isidentifier())
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


#: the command line's own flag, accepted anywhere after the command: show a failure's traceback
DEBUG_FLAG = "--debug"
#: exit statuses: a bad call (argparse's own 2), a failure while working, an interrupted run (128 + SIGINT)
USAGE_ERROR, FAILURE, INTERRUPTED = 2, 1, 130


def one_line(error: BaseException) -> str:
    """An exception as one line: its message with line breaks folded, else its type's name."""
    return " ".join(str(error).split()) or type(error).__name__


def run(name: str, argv: Sequence[str], prog: str | None = None) -> int:
    """Run one command with its arguments; its exit status (a command's ``main`` returning a result means 0).

    A bad argument ends the call in its parser (one line, status 2: ``labkit.artifacts.arguments``); a failure
    while working ends it here in one line, status 1, its traceback shown only with ``--debug``; Ctrl-C ends it in
    one line, status 130 (long commands resume from what they saved when run again)."""
    command, argv = find(name), list(argv)
    debug = DEBUG_FLAG in argv
    argv = [a for a in argv if a != DEBUG_FLAG]
    prog = prog or f"{PROG} {command.name}"
    try:
        with _program_name(prog):
            result = load(command.target)(argv)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted; run the same command again to resume", file=sys.stderr)
        return INTERRUPTED
    except Exception as error:  # the one place a failure becomes a line, not a traceback
        if debug:
            raise
        print(f"{prog}: error: {one_line(error)} ({DEBUG_FLAG} shows the traceback)", file=sys.stderr)
        return FAILURE
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
        return USAGE_ERROR
    return run(argv[0], argv[1:])


def alias(old_name: str) -> None:
    """The body of ``python -m labkit.<old_name>``: the same command, its usage line naming the old form."""
    sys.exit(run(old_name, sys.argv[1:], prog=f"{PROG}.{old_name}"))
