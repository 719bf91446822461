"""The house rules of labkit, read from its source: imports flow one way between layers, no cycles, no labkit
imports hidden inside functions, no global torch settings outside command-line mains, one command-line module at the
top of labkit, and the module map in docs/architecture.md matches the tree."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "labkit"
#: Which layers each layer may import (besides itself). The command line (labkit/cli.py, labkit/__main__.py and the
#: older forms in labkit/_aliases/) and lessons may import anything; no layer may import the command line.
ALLOWED = {
    "core": set(),
    "artifacts": {"core"},
    "measure": {"core", "artifacts"},
    "search": {"core", "artifacts", "measure"},
    "training": {"core", "artifacts"},
    "viz": {"core", "measure"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


SUBPACKAGES = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
#: The command line: labkit.cli, labkit.__main__ and labkit._aliases.* (each alias is the module labkit.<old name>).
ENTRY = {"cli", "__main__", "_aliases"}


def layer(module: str) -> str:
    """'core', 'measure', ... for a module of a subpackage; 'entry' for the command line (and any other top-level
    module, which test_one_command_line_module_at_the_top refuses); 'root' for labkit itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    return parts[1] if parts[1] in SUBPACKAGES - ENTRY else "entry"


def imported(module: str, node) -> set[str]:
    """labkit modules an import statement names (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name.startswith("labkit")}
    if node.level:
        base = module.split(".")
        if MODULES[module].name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("labkit"):
        return set()
    names = {f"{target}.{a.name}" for a in node.names}
    return {n for n in names if n in MODULES} | ({target} if target in MODULES else set())


def graph() -> tuple[dict[str, set[str]], list[str]]:
    """Import edges between labkit modules, and every labkit import found inside a function."""
    edges, inside = {m: set() for m in MODULES}, []
    for m, path in MODULES.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside += [f"{m}.{node.name}" for sub in ast.walk(node)
                           if isinstance(sub, (ast.Import, ast.ImportFrom)) and imported(m, sub) - {m}]
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges[m] |= imported(m, node) - {m}
    return edges, inside


def test_imports_flow_one_way_between_layers():
    edges, _ = graph()
    wrong = []
    for m, targets in edges.items():
        src = layer(m)
        if src in ALLOWED:                 # the root package re-exports everything: importing it hides the layer
            wrong += [f"{m} -> {t}" for t in targets if layer(t) not in ALLOWED[src] | {src}]
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_no_import_cycles_and_no_labkit_imports_inside_functions():
    edges, inside = graph()
    assert not inside, f"labkit imports inside functions: {inside}"
    state, stack = {}, []

    def visit(v):
        state[v] = "open"
        stack.append(v)
        for w in edges[v]:
            if w.startswith(v + "."):      # a package's __init__ re-exporting its own children is not a cycle
                continue
            if state.get(w) == "open":
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(w):] + [w]))
            if w not in state:
                visit(w)
        stack.pop()
        state[v] = "done"

    for v in edges:
        if v not in state:
            visit(v)


def test_one_command_line_module_at_the_top():
    """labkit/ holds __init__.py, __main__.py and cli.py (the command table) at its top; the older command forms live
    in labkit/_aliases/ and only forward to labkit.cli (docs/architecture.md, "the command line")."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py"], f"top-level modules besides the command line: {top}"
    edges, _ = graph()
    aliases = [m for m in MODULES if m.startswith("labkit._aliases.")]
    assert aliases, "no aliases found in labkit/_aliases/"
    wrong = {m: sorted(edges[m]) for m in aliases if edges[m] != {"labkit.cli"}}
    assert not wrong, f"aliases must import labkit.cli and nothing else: {wrong}"


def test_library_code_leaves_global_torch_settings_alone():
    """torch.set_num_threads & co. only in command-line mains; torch.manual_seed only inside torch.random.fork_rng()."""
    offenders = []
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name == "main":
                continue
            forked = "fork_rng" in ast.unparse(node)
            for sub in ast.walk(node):
                if not (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "torch"):
                    continue
                if sub.attr in ("set_num_threads", "set_default_dtype", "set_grad_enabled") or (
                        sub.attr == "manual_seed" and not forked):
                    offenders.append(f"{m}.{node.name}: torch.{sub.attr}")
    assert not offenders, offenders


def test_the_architecture_page_lists_every_module_and_nothing_else():
    text = (ROOT / "docs" / "architecture.md").read_text()
    listed = set(re.findall(r"`(labkit(?:/\w+)*/\w+\.py)`", text))
    actual = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    assert listed == actual, (f"missing from the page: {sorted(actual - listed)}; "
                              f"not in the tree: {sorted(listed - actual)}")


def test_each_package_docstring_names_every_module_it_holds():
    """A package's docstring is its map: every module (and subpackage) in it is named there as ``name``."""
    missing = {}
    for init in sorted(PACKAGE.glob("*/__init__.py")) + sorted(PACKAGE.glob("*/*/__init__.py")):
        folder = init.parent
        if folder.name.startswith("_"):
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        names = {p.stem for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
        names |= {p.parent.name for p in folder.glob("*/__init__.py")}
        absent = sorted(n for n in names if f"``{n}``" not in doc and f":mod:`.{n}`" not in doc)
        if absent:
            missing[folder.relative_to(ROOT).as_posix()] = absent
    assert not missing, f"modules a package docstring does not name: {missing}"


#: The table of docs/architecture.md that says which third-party packages each layer imports.
TABLE_HEAD = "| layer | third-party imports at module level | only inside a function |"


def documented_imports() -> dict[str, tuple[set[str], set[str]]]:
    """layer -> (packages it imports at module level, packages it imports only inside functions), as the
    architecture page's table states them."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert TABLE_HEAD in text, "docs/architecture.md lost its table of third-party imports per layer"
    rows = {}
    for line in text.split(TABLE_HEAD, 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        name, top, lazy = (cell.strip() for cell in line.strip("|").split("|"))
        rows[name] = (set(re.findall(r"`(\w+)`", top)), set(re.findall(r"`(\w+)`", lazy)))
    return rows


def third_party_imports(path: Path) -> tuple[set[str], set[str]]:
    """Top-level non-stdlib, non-labkit packages a module imports: (at module level, inside functions)."""
    import sys

    tree = ast.parse(path.read_text())
    inside = {id(sub) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              for sub in ast.walk(node)}
    top, lazy = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        for name in {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - {"labkit", "__future__"}:
            (lazy if id(node) in inside else top).add(name)
    return top, lazy


def actual_imports() -> dict[str, tuple[set[str], set[str]]]:
    """layer -> (third-party packages imported at module level, those imported only inside functions), from the
    source of every module of the layers ALLOWED names."""
    found = {name: (set(), set()) for name in ALLOWED}
    for m, path in MODULES.items():
        if layer(m) in found:
            top, lazy = third_party_imports(path)
            found[layer(m)][0].update(top)
            found[layer(m)][1].update(lazy)
    return {name: (top, lazy - top) for name, (top, lazy) in found.items()}


def test_each_layer_imports_the_third_party_packages_the_architecture_page_lists():
    """Both ways: a package imported but not listed (a new dependency of a layer) fails, and so does one listed but
    no longer imported (a page that says more than the code)."""
    documented, actual = documented_imports(), actual_imports()
    assert set(documented) == set(ALLOWED), f"the table's layers: {sorted(documented)}"
    wrong = {}
    for name, (top, lazy) in actual.items():
        listed_top, listed_lazy = documented[name]
        for where, got, listed in (("at module level", top, listed_top), ("only inside a function", lazy, listed_lazy)):
            if got != listed:
                wrong[f"{name}, {where}"] = {"imported, not listed": sorted(got - listed),
                                             "listed, not imported": sorted(listed - got)}
    assert not wrong, f"docs/architecture.md's table of third-party imports against the code: {wrong}"
    core_heading = "## core: the engine, in the paper's order (imports torch, transformers and safetensors"
    assert core_heading in (ROOT / "docs" / "architecture.md").read_text()


def test_the_third_party_check_sees_a_wrong_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy as np\nfrom torch import nn\n\ndef f():\n    import pandas\n")
    assert third_party_imports(bad) == ({"numpy", "torch"}, {"pandas"})
