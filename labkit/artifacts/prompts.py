"""Held-out prompts: a function's signature and docstring, to be completed with its body.

Prompts come from the *validation* files of the installed standard library (:mod:`labkit.artifacts.corpus`),
which never contributed a token to training, in a deterministic order. Prompts 0..23 (seed 0) choose skip
sets (the search uses the first 8, the robustness report 24); timing runs measure on the prompts after
them (:func:`benchmark_prompts`), so no number comes from the prompts a set was chosen on.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.cache import new_cache
from ..core.forward import check_inputs, forward_tokens
from .corpus import corpus_files, stdlib_root

__all__ = ["Prompt", "prompts", "benchmark_prompts", "pick_prompt", "PROMPT_OFFSET", "first_repeat",
           "repeated_share", "Showcase", "showcase_prompt"]

#: Prompts before this index (seed 0) choose skip sets; timing runs use the ones after.
PROMPT_OFFSET = 24


@dataclass(frozen=True)
class Prompt:
    """A held-out code-completion prompt: a function's signature and docstring."""

    text: str          # what the model is given
    source: str        # 'relative/path.py:line:function_name'


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


def prompts(n: int = 8, *, seed: int = 0, root: Path | None = None) -> list[Prompt]:
    """``n`` deterministic held-out prompts from the *validation* files of the installed stdlib.

    Each prompt is a function's signature and docstring (to be completed with its body).
    The same interpreter, ``n`` and ``seed`` always give the same prompts.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    root = Path(root) if root is not None else stdlib_root()
    candidates = []
    for path in corpus_files("validation", root):
        candidates.extend(_function_prompts(path, root))
    if not candidates:
        raise RuntimeError(f"no prompt candidates found in the validation files under {root}")
    candidates = list({p.text: p for p in candidates}.values())        # same text in two classes: keep one
    candidates.sort(key=lambda p: hashlib.sha1(f"{seed}:{p.source}".encode()).hexdigest())
    if n > len(candidates):
        raise ValueError(f"asked for {n} prompts but only {len(candidates)} held-out functions exist")
    return candidates[:n]


def benchmark_prompts(n: int, seed: int = 0) -> list[Prompt]:
    """The ``n`` held-out prompts that timing runs measure on: those after the first ``PROMPT_OFFSET``."""
    return prompts(PROMPT_OFFSET + n, seed=seed)[PROMPT_OFFSET:]


def pick_prompt(tokenizer, model, n_new: int, *, seed: int = 0, n_candidates: int = 16):
    """The first held-out prompt (``prompts(n_candidates, seed=seed)`` order) that leaves room for
    ``n_new`` tokens in the model's context; returns (Prompt, input_ids (1, T), n_new that fits)."""
    context = int(getattr(model.config, "max_position_embeddings", 10**9))
    best = None
    for prompt in prompts(n_candidates, seed=seed):
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
