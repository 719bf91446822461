"""Held-out prompts: a function's signature and docstring, to be completed with its body.

Three sources, each deterministic:

- ``"stdlib"`` (the default): the *validation* files of the installed standard library
  (:mod:`labkit.artifacts.corpus`), which never contributed a token to training: in-distribution text.
- ``"packages"``: functions of third-party packages every installation of the lab carries
  (:data:`OUTSIDE_PACKAGES`, all direct dependencies in pyproject.toml), written by people outside this
  project and never trained on: the lab's *outside* prompts. :func:`source_info` names their versions.
- a path to a user's own ``.txt`` or ``.jsonl`` file (format in :func:`read_prompt_file`).

Prompts 0..23 (seed 0) of a built-in source choose skip sets and tune strategies (the search uses the first
8, the robustness report 24); timing runs measure on the prompts after them (:func:`benchmark_prompts`), so
no number comes from the prompts a set was chosen on.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import json
import platform
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

import torch

from ..core.cache import new_cache
from ..core.forward import check_inputs, forward_tokens
from .corpus import PACKAGE_EXCLUDED_DIRS, corpus_files, package_files, package_folder, stdlib_root

__all__ = ["Prompt", "prompts", "benchmark_prompts", "pick_prompt", "PROMPT_OFFSET", "OUTSIDE_PACKAGES",
           "BUILTIN_SOURCES", "package_prompts", "read_prompt_file", "source_info", "source_label",
           "TXT_SEPARATOR", "first_repeat", "repeated_share", "Showcase", "showcase_prompt"]

#: Prompts before this index (seed 0) of a built-in source choose skip sets; timing runs use the ones after.
PROMPT_OFFSET = 24
#: (distribution, import name) of the packages the outside prompts come from: direct dependencies of the lab
#: (so every installation has their source), pure Python, hand-written docstrings in several styles (Google,
#: numpydoc, reST, one-liners), about 1.5 s to scan together. Not pandas/scikit-learn/scipy/transformers/torch
#: (4-12 s each to scan on the lab's 2-core machine) nor plotly (mostly generated code).
OUTSIDE_PACKAGES = (("optuna", "optuna"), ("tqdm", "tqdm"), ("papermill", "papermill"), ("nbconvert", "nbconvert"),
                    ("ipywidgets", "ipywidgets"), ("ipykernel", "ipykernel"), ("jupyterlab", "jupyterlab"))
BUILTIN_SOURCES = ("stdlib", "packages")
#: A line holding only this separates two prompts of a ``.txt`` prompt file.
TXT_SEPARATOR = "---"


@dataclass(frozen=True)
class Prompt:
    """A held-out code-completion prompt: a function's signature and docstring."""

    text: str          # what the model is given
    source: str        # 'relative/path.py:line:function_name' (a file's prompts: 'file.txt:line')


def _function_prompts(path: Path, root: Path) -> list[Prompt]:
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    lines = source.splitlines(keepends=True)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
            continue
        doc = node.body[0]
        if not (isinstance(doc, ast.Expr) and isinstance(getattr(doc, "value", None), ast.Constant)
                and isinstance(doc.value.value, str)) or len(node.body) < 2:
            continue
        start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
        text = "".join(lines[start:doc.end_lineno])
        indent = len(text) - len(text.lstrip(" "))
        # End at the closing quotes, not after a newline: byte-level BPE merges a newline with the
        # next line's indentation ("\n   " + " return"), so a prompt ending in a bare "\n" would tell
        # the model that the next line starts at column 0 (it then writes a new class, not the body).
        text = "\n".join(line[indent:] for line in text.splitlines())
        if 60 <= len(text) <= 600:
            found.append(Prompt(text=text, source=f"{path.relative_to(root).as_posix()}:{node.lineno}:{node.name}"))
    return found


def _hash_order(candidates: list[Prompt], seed: int) -> list[Prompt]:
    """Deduplicated by text (the same text in two classes: keep one), in an order fixed by ``seed``."""
    unique = list({p.text: p for p in candidates}.values())
    return sorted(unique, key=lambda p: hashlib.sha1(f"{seed}:{p.source}".encode()).hexdigest())


def _stdlib_prompts(seed: int, root: Path | None) -> list[Prompt]:
    root = Path(root) if root is not None else stdlib_root()
    candidates = []
    for path in corpus_files("validation", root):
        candidates.extend(_function_prompts(path, root))
    if not candidates:
        raise RuntimeError(f"no prompt candidates found in the validation files under {root}")
    return _hash_order(candidates, seed)


# ---------------------------------------------------------------------------------------
# outside prompts: installed third-party packages
# ---------------------------------------------------------------------------------------
def _package_folder(import_name: str) -> Path:
    try:
        return package_folder(import_name)
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"package {import_name!r} (an outside-prompt source, see "
                                  f"labkit.artifacts.prompts.OUTSIDE_PACKAGES) is not installed; "
                                  f"reinstall the lab: pip install -e .") from None


def package_prompts(import_name: str, seed: int = 0) -> list[Prompt]:
    """Every function-with-docstring prompt of one installed package (tests and vendored code left out),
    in the order fixed by ``seed``; sources read 'package/relative/path.py:line:name'."""
    folder = _package_folder(import_name)
    candidates = []
    for path in package_files(import_name):
        candidates.extend(_function_prompts(path, folder.parent))
    return _hash_order(candidates, seed)


def _outside_prompts(seed: int) -> list[Prompt]:
    """The packages' prompts interleaved (one of each package in turn), so any first n spread over all of them."""
    per_package = [package_prompts(name, seed) for _, name in OUTSIDE_PACKAGES]
    return [p for group in zip_longest(*per_package) for p in group if p is not None]


# ---------------------------------------------------------------------------------------
# a user's own prompts
# ---------------------------------------------------------------------------------------
def _clean(text: str) -> str:
    """Leading blank lines and trailing whitespace removed: a prompt ends at its last character, not at a
    newline (see the byte-level BPE note in :func:`_function_prompts`)."""
    return text.rstrip().lstrip("\n")


def _read_txt(path: Path) -> list[Prompt]:
    out, block, first = [], [], 1
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines + [TXT_SEPARATOR], start=1):
        if line.strip() != TXT_SEPARATOR:
            block.append(line)
            continue
        text = _clean("\n".join(block))
        if text:
            out.append(Prompt(text=text, source=f"{path.name}:{first}"))
        elif number <= len(lines) and (out or first > 1):     # two separators in a row, or one at the start
            raise ValueError(f"{path}, line {number}: empty prompt before this '{TXT_SEPARATOR}' separator "
                             f"(prompts are separated by a line holding only '{TXT_SEPARATOR}')")
        block, first = [], number + 1
    return out


def _read_jsonl(path: Path) -> list[Prompt]:
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}, line {number}: not valid JSON ({err.msg}); each line must be an object "
                             f'like {{"text": "def f(x):\\n    \\"\\"\\"...\\"\\"\\""}}') from None
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str) or not _clean(text):
            raise ValueError(f'{path}, line {number}: expected an object with a non-empty string "text", '
                             f"got {line.strip()[:80]!r}")
        name = record.get("source", record.get("id"))
        out.append(Prompt(text=_clean(text), source=f"{path.name}:{number}" + (f":{name}" if name else "")))
    return out


def read_prompt_file(path: str | Path) -> list[Prompt]:
    """A user's prompts, in file order.

    - ``.txt``: prompts separated by a line holding only ``---`` (code keeps its blank lines), e.g.
      ``def area(r):\\n    \\"\\"\\"Area of a circle.\\"\\"\\"\\n---\\ndef mean(xs):\\n    ...``;
    - ``.jsonl``: one JSON object per line with a string ``"text"`` (and optionally ``"source"``/``"id"``);
      blank lines are ignored.

    Each prompt loses leading blank lines and trailing whitespace. Errors name the file and the line: an
    empty file, an empty prompt, a line that is not JSON or has no ``"text"``.
    """
    path = Path(path)
    if path.suffix not in (".txt", ".jsonl"):
        raise ValueError(f"prompt file {path}: expected a .txt or .jsonl file (or source='stdlib'/'packages')")
    if not path.is_file():
        raise FileNotFoundError(f"prompt file {path} does not exist")
    found = _read_txt(path) if path.suffix == ".txt" else _read_jsonl(path)
    if not found:
        raise ValueError(f"prompt file {path} holds no prompts (it is empty or only whitespace)")
    return found


# ---------------------------------------------------------------------------------------
# the one entry point
# ---------------------------------------------------------------------------------------
def _check_source(source) -> str | Path:
    if isinstance(source, Path) or (isinstance(source, str) and source not in BUILTIN_SOURCES
                                    and source.endswith((".txt", ".jsonl"))):
        return Path(source)
    if source not in BUILTIN_SOURCES:
        raise ValueError(f"source must be 'stdlib', 'packages' or a path to a .txt/.jsonl prompt file, got {source!r}")
    return source


def all_prompts(*, seed: int = 0, source: str | Path = "stdlib", root: Path | None = None) -> list[Prompt]:
    """Every prompt of ``source`` in its deterministic order (a file: its own order, ``seed`` unused)."""
    source = _check_source(source)
    if isinstance(source, Path):
        return read_prompt_file(source)
    return _stdlib_prompts(seed, root) if source == "stdlib" else _outside_prompts(seed)


def prompts(n: int = 8, *, seed: int = 0, root: Path | None = None, source: str | Path = "stdlib") -> list[Prompt]:
    """``n`` deterministic held-out prompts from ``source``: ``"stdlib"`` (the *validation* files of the
    installed standard library), ``"packages"`` (installed third-party packages: :data:`OUTSIDE_PACKAGES`)
    or a path to a ``.txt``/``.jsonl`` file (:func:`read_prompt_file`).

    Each built-in prompt is a function's signature and docstring (to be completed with its body).
    The same interpreter (and package versions), ``n``, ``seed`` and ``source`` always give the same prompts.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    candidates = all_prompts(seed=seed, source=source, root=root)
    if n > len(candidates):
        where = source if isinstance(source, str) and source in BUILTIN_SOURCES else f"file {source}"
        raise ValueError(f"asked for {n} prompts but only {len(candidates)} exist in {where}")
    return candidates[:n]


def benchmark_prompts(n: int, seed: int = 0, source: str | Path = "stdlib") -> list[Prompt]:
    """The ``n`` held-out prompts that timing runs measure on: for a built-in source, those after the first
    ``PROMPT_OFFSET`` (which choose skip sets); a user's file is used from its first prompt."""
    offset = PROMPT_OFFSET if _check_source(source) in BUILTIN_SOURCES else 0
    return prompts(offset + n, seed=seed, source=source)[offset:]


def source_label(source: str | Path) -> str:
    """A short name for tables and figures: 'stdlib', 'packages' or the file's name."""
    source = _check_source(source)
    return source if isinstance(source, str) else source.name


def source_info(source: str | Path = "stdlib") -> dict:
    """What a prompt source is made of, to store beside any result measured on it: the Python version
    (stdlib), every package and its version (packages), or the file and its SHA-1 (a user's file)."""
    source = _check_source(source)
    if source == "stdlib":
        return {"source": "stdlib", "python": platform.python_version(), "root": str(stdlib_root())}
    if source == "packages":
        return {"source": "packages", "packages": {dist: importlib.metadata.version(dist)
                                                   for dist, _ in OUTSIDE_PACKAGES}}
    return {"source": "file", "path": str(source), "sha1": hashlib.sha1(source.read_bytes()).hexdigest()}


def pick_prompt(tokenizer, model, n_new: int, *, seed: int = 0, n_candidates: int = 16,
                source: str | Path = "stdlib"):
    """The first held-out prompt (``prompts(n_candidates, seed=seed, source=source)`` order) that leaves room
    for ``n_new`` tokens in the model's context; returns (Prompt, input_ids (1, T), n_new that fits)."""
    context = int(getattr(model.config, "max_position_embeddings", 10**9))
    best = None
    candidates = all_prompts(seed=seed, source=source)[:n_candidates]
    for prompt in candidates:
        ids = tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        if ids.shape[1] + n_new <= context:
            return prompt, ids, n_new
        if best is None or ids.shape[1] < best[1].shape[1]:
            best = (prompt, ids)
    prompt, ids = best
    return prompt, ids, max(0, context - ids.shape[1])


def first_repeat(tokens: list[int], n: int) -> int | None:
    """Index (in ``tokens``) of the last token of the first n-gram that already occurred earlier, else None."""
    seen = set()
    for i in range(len(tokens) - n + 1):
        gram = tuple(tokens[i:i + n])
        if gram in seen:
            return i + n - 1
        seen.add(gram)
    return None


def repeated_share(prompt_ids: list[int], new_tokens: list[int], n: int = 4) -> float:
    """Share of ``new_tokens`` that complete an n-gram already present earlier in prompt + continuation:
    roughly what a prompt-lookup draft could copy. 0: novel text; near 1: a loop."""
    seq, start = list(prompt_ids) + list(new_tokens), len(prompt_ids)
    seen, hits = set(), 0
    for i in range(len(seq) - n + 1):
        gram = tuple(seq[i:i + n])
        hits += i + n - 1 >= start and gram in seen
        seen.add(gram)
    return hits / len(new_tokens) if new_tokens else float("nan")


@dataclass(frozen=True)
class Showcase:
    prompt: Prompt
    index: int                 # position in the benchmark order
    n_tried: int               # candidates generated before this one was found
    rule: str


@torch.inference_mode()
def _greedy_until_repeat(model, ids: torch.Tensor, window: int, n: int) -> int | None:
    """Greedy continuation of ``ids`` (1, T), stopped at the first repeated n-gram within ``window`` new tokens;
    returns the number of tokens generated before the repeat, or None if the window has none."""
    cache, new = new_cache(model), []
    logits = forward_tokens(model, ids, 0, cache, logits_to_keep=1)[-1]
    while len(new) < window:
        new.append(int(logits.argmax()))
        if first_repeat(new, n) is not None:
            return len(new)
        logits = forward_tokens(model, [new[-1]], ids.shape[1] + len(new) - 1, cache, logits_to_keep=1)[-1]
    return None


def showcase_prompt(model, tokenizer, *, n: int = 6, window: int = 48, seed: int = 0,
                    n_candidates: int = 32) -> Showcase:
    """The prompt the notebooks show a generation on, chosen by a rule, not by hand: the first benchmark
    prompt (:func:`benchmark_prompts` order) whose greedy continuation repeats no n-gram of ``n`` tokens
    within its first ``window`` tokens. A small model's greedy text often loops ("a list of the list of
    the ..."), which inflates tokens per step and flatters drafting; novel text shows the draft's real
    quality. Raises ValueError when none of the first ``n_candidates`` qualifies."""
    if n < 1 or window < n:
        raise ValueError(f"need 1 <= n <= window, got n={n!r}, window={window!r}")
    rule = f"first benchmark prompt whose greedy continuation repeats no {n}-token n-gram in its first {window} tokens"
    for i, prompt in enumerate(benchmark_prompts(n_candidates, seed=seed)):
        ids = check_inputs(model, tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"],
                           window)
        if _greedy_until_repeat(model, ids, window, n) is None:
            return Showcase(prompt, i, i + 1, rule)
    raise ValueError(f"none of the first {n_candidates} benchmark prompts qualifies ({rule}); "
                     f"raise n_candidates or n, or lower window")
