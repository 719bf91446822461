"""Which functions of a Python file make prompts, and their text: the raw material of
:mod:`labkit.artifacts.prompts`.

A candidate is a function whose body is a docstring and at least one statement more (the body is what the model
should write). Its *short* prompt is the signature and docstring, dedented; its *long* prompt the same lines after
the file text just before them (:func:`long_text`); a *stub* is a short prompt whose docstring holds usage examples
(``>>>`` lines, :func:`has_examples`): the text a reader types most, a function to be written under examples of
its use.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Prompt", "Candidate", "docstring_functions", "function_candidates", "has_examples", "prompt_cost",
           "long_text", "hash_order", "LONG_PROMPT_CHARS", "LONG_PROMPT_MIN_CHARS", "SHORT_PROMPT_CHARS",
           "STUB_PROMPT_CHARS"]

#: A short prompt (signature and docstring) is kept when its length lies in this range (characters)...
SHORT_PROMPT_CHARS = (60, 600)
#: ... a stub's in this one: docstrings with examples run longer, and up to 850 characters a stub stays within the
#: 372 tokens the lab's models leave (512 positions - 128 new - 12 drafted; tests/artifacts/test_prompts.py).
STUB_PROMPT_CHARS = (60, 850)

#: A long prompt (``"stdlib-long"``, ``"packages-long"``) holds as much of the file text before its function as
#: keeps it within this many characters, not counting indentation (:func:`prompt_cost`): about 230 tokens of the lab's
#: tokenizer and at most 340 on every long prompt when written (tests/artifacts/test_prompts.py holds the first
#: 30 of each source to 340, all to 372: the 512 - 128 new - 12 drafted positions the lab's models leave)...
LONG_PROMPT_CHARS = 680
#: ... and a function whose long prompt would stay under this many (near the top of its file) is left out.
LONG_PROMPT_MIN_CHARS = 600


@dataclass(frozen=True)
class Prompt:
    """A held-out code-completion prompt: a function's signature and docstring (a long prompt: after the
    file text before it)."""

    text: str          # what the model is given
    source: str        # 'relative/path.py:line:function_name' (a file's prompts: 'file.txt:line')


@dataclass(frozen=True)
class Candidate:
    """One function as both prompts: ``short`` (signature and docstring, dedented) and ``long`` (the same lines
    as the file has them, after the file text before them; "" when not asked for or the file has too little)."""

    short: Prompt
    long: str = ""


def docstring_functions(tree: ast.AST):
    """(node, index of its first line (a decorator's), line number where its docstring ends) of every function
    whose body is a docstring and at least one statement more: the body is what the model should write."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
            continue
        doc = node.body[0]
        if not (isinstance(doc, ast.Expr) and isinstance(getattr(doc, "value", None), ast.Constant)
                and isinstance(doc.value.value, str)) or len(node.body) < 2:
            continue
        yield node, (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1, doc.end_lineno


def has_examples(node: ast.AST) -> bool:
    """Whether a function's docstring holds a usage example: a line starting with ``>>>`` (doctest style)."""
    doc = ast.get_docstring(node) or ""
    return any(line.lstrip().startswith(">>>") for line in doc.splitlines())


def function_candidates(path: Path, root: Path, long: bool = False, *, stubs: bool = False) -> list[Candidate]:
    """The prompt candidates of one file (with their long text when ``long``): functions whose short prompt is
    :data:`SHORT_PROMPT_CHARS` long; ``stubs``: only those whose docstring holds examples (:func:`has_examples`),
    :data:`STUB_PROMPT_CHARS` long."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    lines = source.splitlines(keepends=True)
    found = []
    low, high = STUB_PROMPT_CHARS if stubs else SHORT_PROMPT_CHARS
    for node, start, end in docstring_functions(tree):
        if stubs and not has_examples(node):
            continue
        text = "".join(lines[start:end])
        indent = len(text) - len(text.lstrip(" "))
        # End at the closing quotes, not after a newline: byte-level BPE merges a newline with the
        # next line's indentation ("\n   " + " return"), so a prompt ending in a bare "\n" would tell
        # the model that the next line starts at column 0 (it then writes a new class, not the body).
        short = "\n".join(line[indent:] for line in text.splitlines())
        if low <= len(short) <= high:
            prompt = Prompt(text=short, source=f"{path.relative_to(root).as_posix()}:{node.lineno}:{node.name}")
            found.append(Candidate(prompt, long_text(lines, start, "\n".join(text.splitlines())) if long else ""))
    return found


def prompt_cost(text: str) -> int:
    """Characters of ``text`` not counting each line's indentation: byte-level BPE folds a line's indentation
    into a token or two whatever its depth, so counting it would give a method (indented) fewer tokens than
    a top-level function. Without it, characters predict tokens more closely: on the lab's tokenizer the
    densest long prompt has 0.70 of the median characters per token, against 0.63 counting indentation."""
    return sum(len(line.lstrip(" \t")) for line in text.splitlines(keepends=True))


def long_text(lines: list[str], start: int, function: str) -> str:
    """``function`` (its lines as the file has them, ending at the docstring's closing quotes) after the
    file text just before it, from a line boundary, as much as keeps the prompt within
    :data:`LONG_PROMPT_CHARS` (:func:`prompt_cost`; no tokenizer, so prompts stay fast and the same for every
    model); leading blank lines dropped; "" when it stays under :data:`LONG_PROMPT_MIN_CHARS`.

    Nothing is dedented: a method keeps its class's indentation, so its lines line up with the class
    text before them (dedenting the method alone would put it at column 0 after indented code, which is
    not Python), and the body to write is indented as in the file."""
    first, cost = start, prompt_cost(function)
    while first > 0 and cost + prompt_cost(lines[first - 1]) <= LONG_PROMPT_CHARS:
        first -= 1
        cost += prompt_cost(lines[first])
    while first < start and not lines[first].strip():
        first += 1
    text = "".join(lines[first:start]) + function
    return text if prompt_cost(text) >= LONG_PROMPT_MIN_CHARS else ""


def hash_order(candidates: list[Candidate], seed: int, long: bool = False) -> list[Prompt]:
    """Deduplicated by short text (the same text in two classes: keep one), in an order fixed by ``seed``
    and the function's place; ``long``: the long prompts of those that have one. So a long source holds
    the short source's functions in the same order, less those near the top of their file."""
    unique = list({c.short.text: c for c in candidates}.values())
    unique.sort(key=lambda c: hashlib.sha1(f"{seed}:{c.short.source}".encode()).hexdigest())
    if not long:
        return [c.short for c in unique]
    return [Prompt(text=c.long, source=c.short.source) for c in unique if c.long]

