"""Run many ``python -m labkit ...`` calls in one process, each as ``python -m labkit`` runs it, and print what each
left: ``python tests/cli_calls.py '[["bench", "--device", "cuda"], ...]'`` prints one JSON line
``[{"code": 2, "stderr": "...", "stdout": "..."}, ...]``.

Each call runs ``labkit/__main__.py`` afresh (``runpy``, ``sys.argv`` as the shell sets it), its stdout and stderr
captured, its exit status read from the ``SystemExit`` that ends it; an exception that escapes is printed with its
traceback and status 1, as the interpreter would. One process for the table keeps the suite fast: a subprocess costs
seconds (``import labkit`` pulls in torch and transformers), a bad call a few milliseconds once it is loaded.
"""
from __future__ import annotations

import io
import json
import runpy
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout


def call(argv: list[str]) -> dict:
    """One call's exit status, stderr and stdout."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv[:]
    sys.argv = [sys.executable.rsplit("/", 1)[0] + "/labkit/__main__.py", *argv]   # what `python -m` sets
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            runpy.run_module("labkit", run_name="__main__", alter_sys=False)
        except SystemExit as end:
            code = end.code if isinstance(end.code, int) else (0 if end.code is None else 1)
            if end.code is not None and not isinstance(end.code, int):
                print(end.code, file=sys.stderr)
        except BaseException:   # noqa: BLE001 - the interpreter's own last resort, reproduced
            traceback.print_exc()
            code = 1
        finally:
            sys.argv = saved
    return {"code": code, "stderr": err.getvalue(), "stdout": out.getvalue()}


if __name__ == "__main__":
    print(json.dumps([call(argv) for argv in json.loads(sys.argv[1])]))
