"""The command line's arguments, checked the moment they are parsed: before a model loads or a file is written.

Every command of ``python -m labkit`` builds its parser with :func:`command_parser` and declares what each option
accepts with the ``type=`` checks here (a model, a prompt source, a device, a precision, a count, a fraction...).
A bad value then ends the call in one line that names the option and what it allows, exit status 2, as argparse's
own errors do but without the usage block above it (``--help`` prints that)::

    python -m labkit bench: error: argument --device: device='cuda': no CUDA device on this machine ...

Checks that need two options at once (``--holdout`` beside ``--new-tokens``) run after parsing through
:func:`checked`, which turns the ``ValueError`` of a config's own check into the same one-line usage error. Failures
while the command works are the command line's business (``labkit.cli``: one line, exit status 1).
"""
from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..core.checks import check_folder_name, check_int, check_number
from ..core.devices import resolve_device, resolve_dtype
from .models import SHIPPED_MODELS
from .prompts import BUILTIN_SOURCES

__all__ = ["CommandParser", "command_parser", "add_config_options", "checked", "model", "new_model_name",
           "prompt_source", "device", "dtype", "integer", "number", "at_least", "count", "natural", "positive",
           "nonnegative", "fraction", "open_fraction", "existing_file", "existing_folder", "output_file",
           "output_folder", "output_path"]


class CommandParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line: ``<prog>: error: <message>`` on stderr, exit status 2."""

    def error(self, message: str) -> NoReturn:
        one_line = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {one_line}\n")


def command_parser(description: str | None = None, prog: str | None = None, *, raw: bool = False) -> CommandParser:
    """A command's parser. ``prog`` None: the name it was called by (``labkit.cli`` sets it); ``raw``: keep the
    description's own line breaks (a module docstring)."""
    formatter = argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter
    return CommandParser(prog=prog, description=description, formatter_class=formatter)


def add_config_options(parser: argparse.ArgumentParser, defaults: dict, types: dict | None = None) -> None:
    """One ``--the-field`` option per field of a config dataclass (``defaults``: ``asdict(Config())``), read by
    ``types[field]`` if given, else by the field's default's type (an int or a float with a one-line error)."""
    plain = {int: integer, float: number}
    for name, default in defaults.items():
        kind = (types or {}).get(name) or plain.get(type(default), str)
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=default)


def checked(parser: argparse.ArgumentParser, check: Callable, *args, **kwargs):
    """``check(*args, **kwargs)``, its ValueError, TypeError, FileNotFoundError or ImportError a usage error of
    ``parser``: for the checks that read several options at once (a config's own check), run before any work."""
    try:
        return check(*args, **kwargs)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as error:
        parser.error(_as_option(parser, str(error)))


def _as_option(parser: argparse.ArgumentParser, message: str) -> str:
    """A config check's message that starts with a field's name (``lr must be ...``) says the option the user typed
    instead (``--lr must be ...``)."""
    field = re.match(r"\w+", message)
    for action in parser._actions:
        if field and action.dest == field.group() and action.option_strings:
            return action.option_strings[-1] + message[field.end():]
    return message


def _argument_type(name: str, convert: Callable) -> Callable[[str], object]:
    """``convert`` as an argparse ``type``: its ValueError/TypeError becomes the option's one-line error (argparse
    names the option), and its name is what ``--help`` and argparse's fallbacks show."""
    def parse(text: str):
        try:
            return convert(text)
        except (ValueError, TypeError) as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    parse.__name__ = name
    return parse


def _model(text: str) -> str:
    if text in SHIPPED_MODELS:
        return text
    folder = Path(text).expanduser()
    if (folder / "config.json").is_file():
        return text
    where = "exists but holds no config.json" if folder.is_dir() else "is no folder here"
    raise ValueError(f"{text!r} is neither a shipped model ({', '.join(SHIPPED_MODELS)}) nor a Hugging Face model "
                     f"folder ({folder} {where})")


#: a model to read: a shipped name or a local Hugging Face folder (one with a config.json)
model = _argument_type("model", _model)


def _new_model_name(text: str) -> str:
    try:
        return check_folder_name("it", text)
    except ValueError as error:
        raise ValueError(str(error).removeprefix("it ")) from None


#: the name of a model to make: one folder name under data/models/ and data/checkpoints/
new_model_name = _argument_type("name", _new_model_name)


def _prompt_source(text: str) -> str:
    if text in BUILTIN_SOURCES:
        return text
    if text.endswith((".txt", ".jsonl")) and Path(text).expanduser().is_file():
        return text
    raise ValueError(f"must be one of {', '.join(BUILTIN_SOURCES)} or an existing .txt/.jsonl prompt file, "
                     f"got {text!r}")


#: prompts to read: a built-in source or an existing .txt/.jsonl file (``labkit.artifacts.prompts``)
prompt_source = _argument_type("prompt source", _prompt_source)


def _device(text: str) -> str:
    resolve_device(text)
    return text


#: a device this machine has: cpu, cuda, cuda:N, mps or auto (``cuda`` on a machine without one is an error)
device = _argument_type("device", _device)


def _dtype(text: str) -> str:
    resolve_dtype(text)
    return text


#: a precision labkit runs in: fp32, bf16, fp16 (and their long names)
dtype = _argument_type("dtype", _dtype)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"must be an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"must be a number, got {text!r}") from None


#: any integer, any number: argparse's ``int``/``float`` with a message that says what was expected
integer = _argument_type("integer", _int)
number = _argument_type("number", _float)


def _checked_number(text: str, low: float, high: float | None, *, strict_low: bool = False) -> float:
    try:
        return check_number("", _float(text), low, high, strict_low=strict_low)
    except (ValueError, TypeError) as error:
        raise ValueError(str(error).strip()) from None


def at_least(low: int) -> Callable[[str], object]:
    """An integer type with a lower bound (``count`` is ``at_least(1)``)."""
    def convert(text: str) -> int:
        try:
            return check_int("", _int(text), low)
        except (ValueError, TypeError) as error:
            raise ValueError(str(error).strip()) from None
    return _argument_type(f"integer >= {low}", convert)


#: an integer >= 1 (prompts, tokens, trials, repeats, threads...)
count = at_least(1)
#: an integer >= 0 (seeds, offsets, optional extras)
natural = at_least(0)
#: a number > 0 (a learning rate, a temperature, a scale)
positive = _argument_type("number > 0", lambda text: _checked_number(text, 0.0, None, strict_low=True))
#: a number >= 0 (a weight)
nonnegative = _argument_type("number >= 0", lambda text: _checked_number(text, 0.0, None))
#: a number in [0, 1] (a share, a threshold, a kept fraction)
fraction = _argument_type("number in [0, 1]", lambda text: _checked_number(text, 0.0, 1.0))


def _open_fraction(text: str) -> float:
    value = _float(text)
    if not 0.0 < value < 1.0:
        raise ValueError(f"must be a number in (0, 1), got {text!r}")
    return value


#: a number strictly between 0 and 1 (a held-out share)
open_fraction = _argument_type("number in (0, 1)", _open_fraction)


def _existing(kind: str, test: Callable[[Path], bool]) -> Callable[[str], object]:
    def convert(text: str) -> str:
        if text and not test(Path(text).expanduser()):
            raise ValueError(f"no {kind} at {text!r}")
        return text
    return _argument_type(kind, convert)


#: a file that must already be there (a cost model's JSON...); "" means none (a config's "use the default")
existing_file = _existing("file", Path.is_file)
#: a folder that must already be there; "" means none
existing_folder = _existing("folder", Path.is_dir)



def _writable(text: str, kind: str, is_kind: Callable[[Path], bool]) -> str:
    path = Path(text).expanduser()
    if path.exists() and not is_kind(path):
        raise ValueError(f"{text!r} is there and is not a {kind}")
    ancestor = next(p for p in (path, *path.parents) if p.exists())
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK):
        raise ValueError(f"cannot write {text!r}: {ancestor} is not a folder this user can write into")
    return text


#: where a command writes one file: nothing but a file there, and a writable folder above it (made when written)
output_file = _argument_type("file", lambda text: _writable(text, "file", Path.is_file))
#: where a command writes a file or a folder (which one depends on what it does), under a writable folder
output_path = _argument_type("path", lambda text: _writable(text, "file or folder", lambda path: True))
#: where a command writes its files: nothing but a folder there, and a writable folder above it
output_folder = _argument_type("folder", lambda text: _writable(text, "folder", Path.is_dir))
