"""FAST runtimes of every notebook for the README's table: papermill wall time, kernel start included, one notebook
after another (the exercises with their reference answers, as the test suite runs them). Run it on a quiet machine:

    python docs/notes/notebook_runtimes.py build/runtimes

It prints one line per notebook with the 1-minute load average before and after, and writes times.json there."""
import json
import os
import sys
import time
from pathlib import Path

import papermill as pm

from labkit.lessons.notebook import execute_notebook, notebook_paths
from labkit.measure.machine import machine_info


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    print(machine_info())
    rows = {}
    for path in notebook_paths():
        parameters = {"FAST": True, "OUTPUT_DIR": str(out / "metrics")}
        if "SOLUTIONS" in pm.inspect_notebook(str(path)):
            parameters["SOLUTIONS"] = True
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        execute_notebook(path, parameters, out_dir=out / "notebooks")
        rows[path.stem] = {"seconds": round(time.perf_counter() - t0, 1), "load_before": round(load, 2),
                           "load_after": round(os.getloadavg()[0], 2)}
        print(path.stem, rows[path.stem], flush=True)
        (out / "times.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "build/runtimes"))
