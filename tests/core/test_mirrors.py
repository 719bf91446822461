"""Tests mirror modules: every module of labkit.core has its own test file in tests/core, and every test file there
mirrors a module (so a test lives where a reader of the module looks for it, not in a file per theme).

The rule: ``labkit/core/<name>.py`` is tested in ``tests/core/test_<name>.py``; a subpackage is tested as one unit,
``labkit/core/<package>/*.py`` in ``tests/core/test_<package>.py`` (the strategies package: test_strategies.py).
``__init__.py`` files only re-export and need no mirror. This file is the one test file that mirrors nothing."""
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "labkit" / "core"
TESTS = Path(__file__).resolve().parent


def mirrored_names() -> dict[str, list[str]]:
    """Name after ``test_`` -> the core modules it mirrors (relative paths)."""
    names: dict[str, list[str]] = {}
    for path in sorted(CORE.rglob("*.py")):
        relative = path.relative_to(CORE)
        if path.name == "__init__.py" or "__pycache__" in relative.parts:
            continue
        names.setdefault(relative.parts[0].removesuffix(".py"), []).append(str(relative))
    return names


def test_the_rule_sees_the_modules_and_the_strategies_package():
    names = mirrored_names()
    assert {"skip", "verify", "policies", "checks", "expectation", "strategies"} <= set(names)
    assert "strategies/knapsack.py" in names["strategies"] and len(names) >= 20


def test_every_core_module_has_its_test_file():
    missing = {f"tests/core/test_{name}.py": modules for name, modules in mirrored_names().items()
               if not (TESTS / f"test_{name}.py").is_file()}
    assert not missing, f"core modules without a mirrored test file: {missing}"


def test_every_test_file_here_mirrors_a_core_module():
    names = set(mirrored_names()) | {"mirrors"}
    strays = sorted(p.name for p in TESTS.glob("test_*.py") if p.stem.removeprefix("test_") not in names)
    assert not strays, f"test files in tests/core that mirror no labkit.core module: {strays}"
