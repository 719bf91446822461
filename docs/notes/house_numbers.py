"""The numbers issue 27 asks for, read from a labkit source tree (this checkout, or another one given as argument):
lines per layer, the largest modules, top-level modules, files in measure/ with their own timer, the drafter
interface's members, functions with more than 8 parameters, long lines and hand-written validators.

    python docs/notes/house_numbers.py            # this checkout
    git worktree add /tmp/before cf2185c && python docs/notes/house_numbers.py /tmp/before
"""
from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

VALIDATOR = re.compile(r"isinstance\([\w.]+, bool\) or not isinstance")


def parameters(node: ast.FunctionDef) -> int:
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return len([n for n in names if n not in ("self", "cls")])


def drafter_members(package: Path) -> list[str]:
    tree = ast.parse((package / "core" / "drafters.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Drafter")
    members = [n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    members += [t.id for n in cls.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)]
    return members


def main(root: Path) -> None:
    package = root / "labkit"
    files = sorted(package.rglob("*.py"))
    lines = {f: len(f.read_text().splitlines()) for f in files}
    layers = Counter()
    for f, n in lines.items():
        parts = f.relative_to(package).parts
        layers[parts[0] if len(parts) > 1 and not parts[0].startswith("_") else "top level"] += n
    print(f"labkit: {sum(lines.values())} lines in {len(files)} modules")
    print("lines per layer: " + ", ".join(f"{k} {v}" for k, v in sorted(layers.items(), key=lambda kv: -kv[1])))
    largest = sorted(lines.items(), key=lambda kv: -kv[1])[:6]
    print("largest modules: " + ", ".join(f"{f.relative_to(package).as_posix()} {n}" for f, n in largest))
    print(f"modules over 450 lines: {sum(n > 450 for n in lines.values())}")
    top = [f.name for f in package.glob("*.py") if f.name not in ("__init__.py", "__main__.py")]
    print(f"top-level modules besides __init__/__main__: {len(top)} {sorted(top)}")
    timers = [f.name for f in sorted((package / "measure").glob("*.py")) if "perf_counter" in f.read_text()]
    print(f"files in measure/ with their own timer: {len(timers)} {timers}")
    print(f"Drafter interface members: {drafter_members(package)}")
    wide = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and parameters(node) > 8:
                wide.append((parameters(node), f"{f.relative_to(package).as_posix()}:{node.name}"))
    wide.sort(reverse=True)
    print(f"functions with more than 8 parameters: {len(wide)}; widest: "
          + ", ".join(f"{name} {n}" for n, name in wide[:5]))
    print(f"lines over 100 characters: {sum(len(l) > 100 for f in files for l in f.read_text().splitlines())}; "
          f"over 120: {sum(len(l) > 120 for f in files for l in f.read_text().splitlines())}")
    print(f"hand-written bool/int validators: {sum(len(VALIDATOR.findall(f.read_text())) for f in files)} in "
          f"{sum(bool(VALIDATOR.search(f.read_text())) for f in files)} files")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
