"""Tests mirror modules: in core/, measure/, search/ and viz/ every module has its own test file, and every test file
mirrors a module (so a test lives where a reader of the module looks for it, not in a file per theme).

The rule: ``labkit/<package>/<sub>/<name>.py`` is tested in ``tests/<package>/<sub>/test_<name>.py`` (subpackages as
subfolders: ``labkit/measure/costs/roofline.py`` in ``tests/measure/costs/test_roofline.py``). The exceptions are
listed below, each with its reason; anything else missing or stray fails here."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LABKIT, TESTS = ROOT / "labkit", ROOT / "tests"
#: The packages mirrored module by module. (artifacts/ and training/ are not held to the rule yet.)
MIRRORED = ("core", "measure", "search", "viz")
#: Modules tested together in one file, instead of one file each (module -> test file, relative to labkit/, tests/).
GROUPED = {
    # one interface (base) and three strategies sharing its trackers and Ledger: the same fixtures and checks run on
    # each strategy, side by side
    "core/strategies/base.py": "core/test_strategies.py",
    "core/strategies/in_context.py": "core/test_strategies.py",
    "core/strategies/knapsack.py": "core/test_strategies.py",
    "core/strategies/on_the_fly.py": "core/test_strategies.py",
    # `python -m labkit search`: test___main__.py would read badly
    "search/__main__.py": "search/test_main.py",
}
#: Test files beyond one per module (test file -> the module it tests, and why it is apart).
EXTRA = {
    # labkit/search/storage.py on a real PostgreSQL server: its own server fixture and skip rule (no server binaries,
    # no test), named by .ci/run and the README
    "search/test_postgres_storage.py": "search/storage.py",
}
#: ``__init__.py`` files are not mirrored: they re-export and hold the package's map (its docstring, checked by
#: tests/test_layering.py), nothing of their own to test.


def mirrors() -> dict[str, str]:
    """Module (relative to labkit/) -> its test file (relative to tests/), for every mirrored module."""
    out = {}
    for package in MIRRORED:
        for path in sorted((LABKIT / package).rglob("*.py")):
            module = path.relative_to(LABKIT).as_posix()
            if path.name == "__init__.py" or "__pycache__" in module:
                continue
            out[module] = GROUPED.get(module, (Path(module).parent / f"test_{path.name}").as_posix())
    return out


def test_the_rule_sees_every_package_and_its_subpackages():
    found = mirrors()
    assert found["measure/costs/roofline.py"] == "measure/costs/test_roofline.py"
    assert found["search/toy/forrester_bo.py"] == "search/toy/test_forrester_bo.py"
    assert found["core/skip.py"] == "core/test_skip.py" and found["viz/style.py"] == "viz/test_style.py"
    assert found["core/strategies/knapsack.py"] == "core/test_strategies.py"
    assert len(found) >= 100 and not any(m.endswith("__init__.py") for m in found)


def test_the_exceptions_name_real_files():
    assert all((LABKIT / m).is_file() for m in [*GROUPED, *EXTRA.values()])
    assert all((TESTS / t).is_file() for t in [*GROUPED.values(), *EXTRA])


@pytest.mark.parametrize("package", MIRRORED)
def test_every_module_has_its_test_file(package):
    missing = sorted(f"labkit/{m} -> tests/{t}" for m, t in mirrors().items()
                     if m.startswith(f"{package}/") and not (TESTS / t).is_file())
    assert not missing, "modules without their test file:\n" + "\n".join(missing)


@pytest.mark.parametrize("package", MIRRORED)
def test_every_test_file_mirrors_a_module(package):
    known = set(mirrors().values()) | set(EXTRA)
    strays = sorted(p.relative_to(TESTS).as_posix() for p in (TESTS / package).rglob("test_*.py")
                    if p.relative_to(TESTS).as_posix() not in known)
    assert not strays, f"test files in tests/{package} that mirror no module: {strays}"
