"""The lab's text: the running interpreter's standard library source.

Every Python installation carries it, so the lab can train its own model and build
held-out prompts without downloading anything. Files are split into train and validation
*by file* with a deterministic rule (a hash of the path relative to the stdlib root), so a
validation file never contributes a single token to training.
"""
from __future__ import annotations

import ast
import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

__all__ = ["stdlib_root", "corpus_files", "split_of", "read_split", "corpus_stats", "Prompt", "prompts"]

#: Folders never used: test suites (often generated or huge literal data) and installed packages.
EXCLUDED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"})
#: One file in VALIDATION_MODULUS (by path hash) is held out for validation and prompts.
VALIDATION_MODULUS = 20
#: Files larger than this are skipped (a few generated tables dwarf everything else).
MAX_FILE_BYTES = 400_000


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"]).resolve()


def split_of(relative_path: str) -> str:
    """'validation' or 'train', decided by the SHA-1 of the path relative to the stdlib root."""
    digest = hashlib.sha1(relative_path.replace("\\", "/").encode()).digest()
    return "validation" if int.from_bytes(digest[:4], "big") % VALIDATION_MODULUS == 0 else "train"


def corpus_files(split: str | None = None, root: Path | None = None) -> list[Path]:
    """Sorted stdlib ``*.py`` files, without test folders; ``split`` picks 'train' or 'validation'."""
    if split not in (None, "train", "validation"):
        raise ValueError(f"split must be 'train', 'validation' or None, got {split!r}")
    root = Path(root) if root is not None else stdlib_root()
    if not root.is_dir():
        raise FileNotFoundError(f"standard library folder not found: {root}")
    files = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in EXCLUDED_DIRS for part in rel.parts[:-1]):
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        if split is None or split_of(rel.as_posix()) == split:
            files.append(path)
    return files


def read_split(split: str, root: Path | None = None) -> list[str]:
    """The text of every file of a split, one string per file."""
    return [p.read_text(encoding="utf-8", errors="replace") for p in corpus_files(split, root)]


def corpus_stats(root: Path | None = None) -> dict:
    out = {}
    for split in ("train", "validation"):
        files = corpus_files(split, root)
        out[split] = {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}
    out["stdlib_root"] = str(root or stdlib_root())
    return out


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
