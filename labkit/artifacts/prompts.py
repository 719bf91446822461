"""Held-out prompts: a function's signature and docstring, to be completed with its body.

Six sources, each deterministic (which functions make prompts, and their text: :mod:`labkit.artifacts.candidates`):

- ``"stdlib"`` (the default): the *validation* files of the installed standard library
  (:mod:`labkit.artifacts.corpus`), which never contributed a token to training: in-distribution text.
- ``"packages"``: functions of third-party packages every installation of the lab carries
  (:data:`OUTSIDE_PACKAGES`, all direct dependencies in pyproject.toml), written by people outside this
  project and never trained on: the lab's *outside* prompts. :func:`source_info` names their versions.
- ``"stdlib-long"`` and ``"packages-long"``: the same functions, same files and order, each after the text of
  its file just before it (a few hundred tokens in all, the length of a real completion request; see
  :func:`~labkit.artifacts.candidates.long_text`). Functions too near the top of their file are left out.
- ``"stubs"``: function stubs whose docstring holds usage examples (``>>>`` lines), cut before the body, from the
  stdlib's *validation* files and the outside packages plus numpy and packaging (:data:`STUB_PACKAGES`), one of each
  in turn: the text a reader types most. No long variant (it would not fit the models' 512 positions).
- a path to a user's own ``.txt`` or ``.jsonl`` file (format in :func:`read_prompt_file`).

Prompts 0..23 (seed 0) of a built-in source choose skip sets and tune strategies (the search uses the first
8, the robustness report 24); timing runs measure on the prompts after them (:func:`benchmark_prompts`), so
no number comes from the prompts a set was chosen on.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import platform
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

import torch

from ..core.cache import new_cache
from ..core.checks import check_int
from ..core.forward import check_inputs, forward_tokens
from .candidates import (
    LONG_PROMPT_CHARS,
    LONG_PROMPT_MIN_CHARS,
    STUB_PROMPT_CHARS,
    Prompt,
    function_candidates,
    hash_order,
)
from .corpus import corpus_files, package_files, package_folder, stdlib_root

__all__ = ["Prompt", "prompts", "benchmark_prompts", "pick_prompt", "PROMPT_OFFSET", "OUTSIDE_PACKAGES",
           "BUILTIN_SOURCES", "package_prompts", "read_prompt_file", "source_info", "source_label",
           "TXT_SEPARATOR", "first_repeat", "repeated_share", "Showcase", "showcase_prompt", "STUB_PACKAGES"]

#: Prompts before this index (seed 0) of a built-in source choose skip sets; timing runs use the ones after.
PROMPT_OFFSET = 24
#: (distribution, import name) of the packages the outside prompts come from: direct dependencies of the lab
#: (so every installation has their source), pure Python, hand-written docstrings in several styles (Google,
#: numpydoc, reST, one-liners), about 1.5 s to scan together. Not pandas/scikit-learn/scipy/transformers/torch
#: (4-12 s each to scan on the lab's 2-core machine) nor plotly (mostly generated code).
OUTSIDE_PACKAGES = (("optuna", "optuna"), ("tqdm", "tqdm"), ("papermill", "papermill"), ("nbconvert", "nbconvert"),
                    ("ipywidgets", "ipywidgets"), ("ipykernel", "ipykernel"), ("jupyterlab", "jupyterlab"))
#: (distribution, import name) of the packages that add to the stubs' outside functions: :data:`OUTSIDE_PACKAGES`
#: hold few docstrings with ``>>>`` examples (tqdm and ipywidgets a handful), numpy (a direct dependency) and
#: packaging (every installation has it through transformers) hundreds (numpy about 3 s to scan on 2 cores).
STUB_PACKAGES = OUTSIDE_PACKAGES + (("numpy", "numpy"), ("packaging", "packaging"))
BUILTIN_SOURCES = ("stdlib", "packages", "stdlib-long", "packages-long", "stubs")
#: A line holding only this separates two prompts of a ``.txt`` prompt file.
TXT_SEPARATOR = "---"


def _stdlib_prompts(seed: int, root: Path | None, long: bool = False, stubs: bool = False) -> list[Prompt]:
    root = Path(root) if root is not None else stdlib_root()
    candidates = []
    for path in corpus_files("validation", root):
        candidates.extend(function_candidates(path, root, long, stubs=stubs))
    if not candidates:
        raise RuntimeError(f"no prompt candidates found in the validation files under {root}")
    return hash_order(candidates, seed, long)


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


def package_prompts(import_name: str, seed: int = 0, *, long: bool = False, stubs: bool = False) -> list[Prompt]:
    """Every function-with-docstring prompt of one installed package (tests and vendored code left out),
    in the order fixed by ``seed``; sources read 'package/relative/path.py:line:name'. ``long``: each
    after the file text before it (:func:`~labkit.artifacts.candidates.long_text`), those with too little of it
    left out; ``stubs``: only docstrings with ``>>>`` examples (:func:`~labkit.artifacts.candidates.has_examples`)."""
    folder = _package_folder(import_name)
    candidates = []
    for path in package_files(import_name):
        candidates.extend(function_candidates(path, folder.parent, long, stubs=stubs))
    return hash_order(candidates, seed, long)


def _outside_prompts(seed: int, long: bool = False) -> list[Prompt]:
    """The packages' prompts interleaved (one of each package in turn), so any first n spread over all of them."""
    per_package = [package_prompts(name, seed, long=long) for _, name in OUTSIDE_PACKAGES]
    return [p for group in zip_longest(*per_package) for p in group if p is not None]


@functools.lru_cache(maxsize=4)
def _stub_prompts(seed: int, root: Path | None) -> tuple[Prompt, ...]:
    """The stubs: functions whose docstring holds ``>>>`` examples, cut before the body, from the stdlib's
    validation files and the :data:`STUB_PACKAGES` (never trained on), one of each in turn. No long variant: a stub
    is already up to 850 characters, and file text before it would not fit the models' 512 positions with 128 new
    tokens. Cached: scanning numpy takes seconds."""
    groups = [_stdlib_prompts(seed, root, stubs=True)] + [package_prompts(name, seed, stubs=True)
                                                         for _, name in STUB_PACKAGES]
    return tuple(p for group in zip_longest(*groups) for p in group if p is not None)


# ---------------------------------------------------------------------------------------
# a user's own prompts
# ---------------------------------------------------------------------------------------
def _clean(text: str) -> str:
    """Leading blank lines and trailing whitespace removed: a prompt ends at its last character, not at a
    newline (see the byte-level BPE note in :func:`~labkit.artifacts.candidates.function_candidates`)."""
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
        raise ValueError(f"prompt file {path}: expected a .txt or .jsonl file "
                         f"(or a built-in source: {_source_names()})")
    if not path.is_file():
        raise FileNotFoundError(f"prompt file {path} does not exist")
    found = _read_txt(path) if path.suffix == ".txt" else _read_jsonl(path)
    if not found:
        raise ValueError(f"prompt file {path} holds no prompts (it is empty or only whitespace)")
    return found


# ---------------------------------------------------------------------------------------
# the one entry point
# ---------------------------------------------------------------------------------------
def _source_names() -> str:
    """'stdlib', 'packages', 'stdlib-long', 'packages-long': for error messages."""
    return ", ".join(repr(name) for name in BUILTIN_SOURCES)


def _check_source(source) -> str | Path:
    if isinstance(source, Path) or (isinstance(source, str) and source not in BUILTIN_SOURCES
                                    and source.endswith((".txt", ".jsonl"))):
        return Path(source)
    if source not in BUILTIN_SOURCES:
        raise ValueError(f"source must be {_source_names()} or a path to a .txt/.jsonl prompt file, got {source!r}")
    return source


def all_prompts(*, seed: int = 0, source: str | Path = "stdlib", root: Path | None = None) -> list[Prompt]:
    """Every prompt of ``source`` in its deterministic order (a file: its own order, ``seed`` unused)."""
    source = _check_source(source)
    if isinstance(source, Path):
        return read_prompt_file(source)
    if source == "stubs":
        return list(_stub_prompts(seed, None if root is None else Path(root)))
    long = source.endswith("-long")
    return _stdlib_prompts(seed, root, long) if source.startswith("stdlib") else _outside_prompts(seed, long)


def prompts(n: int = 8, *, seed: int = 0, root: Path | None = None, source: str | Path = "stdlib") -> list[Prompt]:
    """``n`` deterministic held-out prompts from ``source``: ``"stdlib"`` (the *validation* files of the
    installed standard library), ``"packages"`` (installed third-party packages: :data:`OUTSIDE_PACKAGES`),
    their long variants ``"stdlib-long"`` and ``"packages-long"``, ``"stubs"`` (docstrings with ``>>>`` examples
    from both, :func:`_stub_prompts`), or a path to a ``.txt``/``.jsonl`` file (:func:`read_prompt_file`).

    Each built-in prompt is a function's signature and docstring (to be completed with its body); in a long
    source, after the text of its file just before it (:func:`~labkit.artifacts.candidates.long_text`), a few
    hundred tokens in all.
    The same interpreter (and package versions), ``n``, ``seed`` and ``source`` always give the same prompts.
    """
    check_int("n", n, 1)
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
    """A short name for tables and figures: the built-in source's name ('stdlib', 'packages-long', ...) or the
    file's name."""
    source = _check_source(source)
    return source if isinstance(source, str) else source.name


def source_info(source: str | Path = "stdlib") -> dict:
    """What a prompt source is made of, to store beside any result measured on it: the Python version
    (stdlib), every package and its version (packages), or the file and its SHA-1 (a user's file). A long
    source says so (``"variant": "long"``) and with how much file text its prompts were built."""
    source = _check_source(source)
    if isinstance(source, Path):
        return {"source": "file", "path": str(source), "sha1": hashlib.sha1(source.read_bytes()).hexdigest()}
    if source == "stubs":
        return {"source": source, "python": platform.python_version(), "stdlib": "validation files",
                "packages": {dist: importlib.metadata.version(dist) for dist, _ in STUB_PACKAGES},
                "rule": "docstring with a '>>>' line",
                "chars": {"min": STUB_PROMPT_CHARS[0], "max": STUB_PROMPT_CHARS[1]}}
    if source.startswith("stdlib"):
        info = {"source": source, "python": platform.python_version(), "root": str(stdlib_root())}
    else:
        info = {"source": source, "packages": {dist: importlib.metadata.version(dist) for dist, _ in OUTSIDE_PACKAGES}}
    if source.endswith("-long"):
        info |= {"variant": "long", "of": source.removesuffix("-long"),
                 "chars": {"max": LONG_PROMPT_CHARS, "min": LONG_PROMPT_MIN_CHARS, "counted": "without indentation"}}
    return info


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
    qualified: bool = True     # False: no candidate met the rule; this one ran longest before repeating

    @property
    def tried_sentence(self) -> str:
        """How the prompt was found, in words (the rule, how many candidates were generated and what they did)."""
        if self.qualified:
            return f"rule: {self.rule}; {self.n_tried} candidate(s) generated, the first {self.n_tried - 1} looped"
        return (f"rule: {self.rule}; all {self.n_tried} candidates looped, so this is the one whose greedy text ran "
                "longest before repeating")


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
                    n_candidates: int = 32, fallback: bool = True) -> Showcase:
    """The prompt the notebooks show a generation on, chosen by a rule, not by hand: the first benchmark
    prompt (:func:`benchmark_prompts` order) whose greedy continuation repeats no n-gram of ``n`` tokens
    within its first ``window`` tokens. A small model's greedy text often loops ("a list of the list of
    the ..."), which inflates tokens per step and flatters drafting; novel text shows the draft's real
    quality. When none of the first ``n_candidates`` qualifies (a model that loops everywhere, e.g. an untrained
    checkpoint): the candidate whose continuation ran longest before repeating (``qualified`` False), or, with
    ``fallback=False``, ValueError."""
    if n < 1 or window < n:
        raise ValueError(f"need 1 <= n <= window, got n={n!r}, window={window!r}")
    rule = f"first benchmark prompt whose greedy continuation repeats no {n}-token n-gram in its first {window} tokens"
    longest = None
    candidates = benchmark_prompts(n_candidates, seed=seed)
    for i, prompt in enumerate(candidates):
        ids = check_inputs(model, tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"],
                           window)
        ran = _greedy_until_repeat(model, ids, window, n)
        if ran is None:
            return Showcase(prompt, i, i + 1, rule)
        if longest is None or ran > longest[0]:
            longest = (ran, i)
    if not fallback or longest is None:
        raise ValueError(f"none of the first {n_candidates} benchmark prompts qualifies ({rule}); "
                         f"raise n_candidates or n, or lower window")
    return Showcase(candidates[longest[1]], longest[1], len(candidates), rule, qualified=False)
