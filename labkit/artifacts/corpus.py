"""The lab's text: the running interpreter's standard library source, and optionally installed packages' source.

Every Python installation carries the stdlib, so the lab can train its own model and build
held-out prompts (:mod:`labkit.artifacts.prompts`) without downloading anything. Files are split into train and
validation *by file* with a deterministic rule (a hash of the path relative to the stdlib root), so a
validation file never contributes a single token to training. An installed package's ``*.py`` files
(:func:`package_files`, tests and vendored code left out) are split the same way, by a hash of
'package/relative/path.py': a broader corpus for training, never one of the outside-prompt packages.
"""
from __future__ import annotations

import hashlib
import importlib.util
import sysconfig
from pathlib import Path

__all__ = ["stdlib_root", "corpus_files", "split_of", "read_split", "corpus_stats", "package_folder", "package_files",
           "PACKAGE_EXCLUDED_DIRS"]

#: Folders never used: test suites (often generated or huge literal data) and installed packages.
EXCLUDED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"})
#: Folders of an installed package never used: its test suites and code vendored from other projects.
PACKAGE_EXCLUDED_DIRS = EXCLUDED_DIRS | {"testing", "_testing", "externals", "_vendored", "vendor"}
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


def package_folder(import_name: str) -> Path:
    """The folder of an installed package, found without importing it; ModuleNotFoundError naming it if absent."""
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {import_name!r} is not installed (or is a single module, not a package)")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def package_files(import_name: str, split: str | None = None) -> list[Path]:
    """Sorted ``*.py`` files of an installed package without tests, vendored code or files over MAX_FILE_BYTES;
    ``split`` picks 'train' or 'validation' by the hash of 'package/relative/path.py'."""
    if split not in (None, "train", "validation"):
        raise ValueError(f"split must be 'train', 'validation' or None, got {split!r}")
    folder = package_folder(import_name)
    files = []
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder.parent)
        if any(part in PACKAGE_EXCLUDED_DIRS for part in rel.parts[:-1]) or path.name == "conftest.py":
            continue
        if path.stat().st_size <= MAX_FILE_BYTES and (split is None or split_of(rel.as_posix()) == split):
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
