"""The linter is part of the test command: ruff, configured in pyproject.toml ([tool.ruff]), over the package, the
tests and the scripts behind the docs."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed: pip install -e '.[test]'"
    out = subprocess.run([ruff, "check", "--no-cache", "labkit", "tests", "docs/notes"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
