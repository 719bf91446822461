"""The command line: `python -m labkit <command>` runs every command, `--help` reaches the command's own argparse,
a wrong name gets a clear error, and the older `python -m labkit.<name>` forms (recorded in model cards and committed
results) still run the same commands."""
import importlib.util
import io
import os
import re
import runpy
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from labkit import cli

ROOT = Path(__file__).resolve().parent.parent
ALIASES = ROOT / "labkit" / "_aliases"


def old_forms(command: cli.Command) -> list[str]:
    """The `python -m labkit.<x>` modules that run ``command``: its older names (its own name where that was one)."""
    return [name for name in command.old_names if name.isidentifier()]


def run_labkit(*args: str) -> subprocess.CompletedProcess:
    """``python -m <args>`` from the repository root, as a user types it."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def help_text(call) -> str:
    """What ``call()`` prints for ``--help``, checking that it exits with status 0 as argparse does."""
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        call()
    assert exit_.value.code in (0, None), out.getvalue()
    return out.getvalue()


def options_part(text: str) -> str:
    """A help text without its usage lines (they name the program and wrap with its length)."""
    return text.split("\n\n", 1)[1]


@pytest.mark.filterwarnings("ignore:'labkit.search.__main__' found in sys.modules:RuntimeWarning")  # cli loaded it
@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_every_command_help_through_labkit_and_through_its_old_form(command, monkeypatch):
    new = help_text(lambda: cli.main([command.name, "--help"]))
    assert new.startswith("usage: python -m labkit"), new[:200]
    assert new.startswith(f"usage: python -m labkit {command.name}"), new[:200]
    for old in old_forms(command):
        monkeypatch.setattr(sys, "argv", [f"labkit.{old}", "--help"])
        text = help_text(lambda: runpy.run_module(f"labkit.{old}", run_name="__main__", alter_sys=True))
        form = "python -m labkit search" if old == "search" else f"python -m labkit.{old}"   # its own __main__
        assert text.startswith(f"usage: {form}"), text[:200]
        assert options_part(text) == options_part(new), f"python -m labkit.{old} --help differs from the new form"


def test_old_names_are_accepted_by_the_dispatcher_too():
    assert cli.find("playground") is cli.find("grid")
    assert cli.find("train_draft_head").name == "train-draft-head"
    assert cli.find("stop_signal").name == "stop-signal"


def test_every_alias_module_is_an_old_form_and_every_old_form_has_one():
    files = {p.stem for p in ALIASES.glob("*.py")} - {"__init__"}
    forms = {old for c in cli.COMMANDS for old in old_forms(c)} - {"search"}   # a package: its own __main__
    assert files == forms
    for name in files:
        source = (ALIASES / f"{name}.py").read_text()
        assert f'alias("{name}")' in source, f"labkit/_aliases/{name}.py forwards to another name"
        assert Path(importlib.util.find_spec(f"labkit.{name}").origin).parent == ALIASES


def test_every_alias_is_an_old_form_something_committed_records():
    """An older form stays only while a committed record names it (a model card, a result file in data/, or a
    measurement in docs/decisions.md), so that the command it records still runs; docs/decisions.md says why."""
    texts = [p.read_text(errors="replace") for p in sorted((ROOT / "data").rglob("*"))
             if p.suffix in (".md", ".json") and p.stat().st_size < 5_000_000]
    texts.append((ROOT / "docs" / "decisions.md").read_text())
    unrecorded = sorted(name for name in (p.stem for p in ALIASES.glob("*.py") if p.stem != "__init__")
                        if not any(re.search(rf"python -m labkit\.{name}(?!\w|\.\w)", text) for text in texts))
    assert not unrecorded, f"aliases no committed record names (remove them and their old_names): {unrecorded}"


def test_every_command_target_names_a_function():
    for command in cli.COMMANDS:
        assert callable(cli.load(command.target)), command.target


def test_no_command_or_help_lists_every_command_one_line_each(capsys):
    for argv in ([], ["--help"], ["-h"]):
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        for command in cli.COMMANDS:
            line = next(line for line in out.splitlines() if line.split()[:1] == [command.name])
            assert command.summary in line


def test_an_unknown_command_names_the_commands(capsys):
    assert cli.main(["benchmark"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'benchmark'" in err and "did you mean 'bench'" in err
    assert all(c.name in err for c in cli.COMMANDS)
    with pytest.raises(LookupError, match="the commands are: train, "):
        cli.find("nope")


def test_a_command_result_is_exit_status_zero_and_an_int_passes_through(monkeypatch):
    monkeypatch.setattr(cli, "load", lambda target: (lambda argv: Path("x")))
    assert cli.run("grid", []) == 0
    monkeypatch.setattr(cli, "load", lambda target: (lambda argv: 3))
    assert cli.run("search", []) == 3


def test_the_program_name_is_set_for_one_call_only(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["pytest", "--x"])
    seen = []
    monkeypatch.setattr(cli, "load", lambda target: (lambda argv: seen.append((sys.argv[0], argv))))
    cli.run("playground", ["--model", "m"])
    assert seen == [("python -m labkit grid", ["--model", "m"])] and sys.argv == ["pytest", "--x"]


def failing(error: BaseException):
    """A command whose ``main`` raises ``error`` while working."""
    def main(argv):
        raise error
    return main


def test_a_failure_while_working_is_one_line_and_status_1(monkeypatch, capsys):
    monkeypatch.setattr(cli, "load", lambda target: failing(OSError("disk full\nwhile writing x")))
    assert cli.run("grid", ["--model", "m"]) == cli.FAILURE == 1
    assert capsys.readouterr().err == "python -m labkit grid: error: disk full while writing x (--debug shows the " \
                                      "traceback)\n"


def test_debug_shows_the_traceback_and_is_not_passed_to_the_command(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "load", lambda target: (lambda argv: seen.append(argv) or 0))
    assert cli.run("bench", ["--quick", "--debug"]) == 0 and seen == [["--quick"]]
    monkeypatch.setattr(cli, "load", lambda target: failing(ValueError("bad")))
    with pytest.raises(ValueError, match="bad"):
        cli.run("bench", ["--debug"])


def test_ctrl_c_is_one_line_and_status_130(monkeypatch, capsys):
    monkeypatch.setattr(cli, "load", lambda target: failing(KeyboardInterrupt()))
    assert cli.run("train", []) == cli.INTERRUPTED == 130
    assert capsys.readouterr().err == "python -m labkit train: interrupted; run the same command again to resume\n"


def test_a_usage_error_passes_through_with_its_status(monkeypatch):
    monkeypatch.setattr(cli, "load", lambda target: failing(SystemExit(2)))
    with pytest.raises(SystemExit) as exit_:
        cli.run("grid", [])
    assert exit_.value.code == 2


def test_the_readme_lists_the_commands_as_python_m_labkit_prints_them():
    readme = (ROOT / "README.md").read_text()
    listed = [line for line in cli.usage().splitlines() if line.startswith("  ")]
    assert "```text\n" + "\n".join(listed) + "\n```" in readme


# Real processes, as a user types them (about 4 s each: `import labkit`).

def test_python_m_labkit_lists_the_commands():
    res = run_labkit("labkit")
    assert res.returncode == 0, res.stderr
    assert "usage: python -m labkit <command>" in res.stdout and "  grid " in res.stdout


def test_python_m_labkit_unknown_command_fails_clearly():
    res = run_labkit("labkit", "nope")
    assert res.returncode == 2
    assert "unknown command 'nope'" in res.stderr and "bench" in res.stderr


def test_python_m_labkit_command_help_and_an_old_form():
    new, old = run_labkit("labkit", "bench", "--help"), run_labkit("labkit.playground", "--help")
    assert new.returncode == 0 and new.stdout.startswith("usage: python -m labkit bench"), new.stderr
    assert old.returncode == 0 and "--max-drafts" in old.stdout, old.stderr
