"""Tests mirror modules: every module of labkit.core has its own test file in tests/core, and every test file there
mirrors a module (so a test lives where a reader of the module looks for it, not in a file per theme).

The rule: ``labkit/core/<name>.py`` is tested in ``tests/core/test_<name>.py``; a subpackage is tested as one unit,
``labkit/core/<package>/*.py`` in ``tests/core/test_<package>.py`` (the strategies package: test_strategies.py).
``__init__.py`` files only re-export and need no mirror. This file is the one test file that mirrors nothing.
labkit.measure follows the same rule with its subpackages as subfolders (the end of this file)."""
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


# -- measure/: one test file per module, in the subfolder of its subpackage ------------------------------------------
#: The packages mirrored module by module, subpackages as subfolders: ``labkit/measure/costs/roofline.py`` is tested
#: in ``tests/measure/costs/test_roofline.py``. (search/ and viz/ are still tested by theme: issue 36.)
NESTED = ("measure",)
LABKIT = CORE.parent


def nested_mirrors(package: str) -> dict[str, str]:
    """tests/<package>/<sub>/test_<name>.py -> labkit/<package>/<sub>/<name>.py, for every module but __init__."""
    out = {}
    for path in sorted((LABKIT / package).rglob("*.py")):
        relative = path.relative_to(LABKIT / package)
        if path.name == "__init__.py" or "__pycache__" in relative.parts:
            continue
        out[(Path(package) / relative.parent / f"test_{path.name}").as_posix()] = str(path.relative_to(LABKIT))
    return out


def test_the_nested_rule_sees_the_subpackages():
    mirrors = nested_mirrors("measure")
    assert "measure/costs/test_roofline.py" in mirrors and "measure/test_harness.py" in mirrors
    assert mirrors["measure/bench/test_run.py"] == "measure/bench/run.py"


def test_every_nested_module_has_its_test_file_and_every_test_file_a_module():
    tests = TESTS.parent
    for package in NESTED:
        mirrors = nested_mirrors(package)
        missing = sorted(m for t, m in mirrors.items() if not (tests / t).is_file())
        assert not missing, f"{package} modules without a mirrored test file: {missing}"
        strays = sorted(p.relative_to(tests).as_posix() for p in (tests / package).rglob("test_*.py")
                        if p.relative_to(tests).as_posix() not in mirrors)
        assert not strays, f"test files in tests/{package} that mirror no module: {strays}"
