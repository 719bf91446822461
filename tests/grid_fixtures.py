"""A synthetic playground grid (format 3) for tests of the sentences and checks built on it."""
from labkit.measure.grid.run import FORMAT, PlaygroundGrid, Setting

RATIOS, THRESHOLDS = (0.25, 0.5, 0.75), (0.0, 0.5, 0.9)


def _cells(weights, speedup, acceptance, drafted, c, noise, c_v) -> list[dict]:
    """The cells of one draft weights: 3 ratios x 3 thresholds x max draft 4 x both policies."""
    cells = []
    for i, r in enumerate(RATIOS):
        for j, t in enumerate(THRESHOLDS):
            for policy in ("static", "adaptive"):
                sp, n = speedup(i, j) - (0.5 if policy == "static" else 0.0), noise   # static: far behind
                d, a = drafted(i, j), acceptance(i, j)
                cells.append({"ratio": r, "threshold": t, "max_draft": 4, "policy": policy, "draft_weights": weights,
                              "acceptance_rate": a, "tokens_per_step": 1 + a * d, "drafted_per_step": d, "speedup": sp,
                              "speedup_min": sp - n, "speedup_max": sp + n, "speedup_repeats": [sp - n, sp, sp + n],
                              "analytic_speedup": sp * 1.05, "c": c(i, j), "c_v": c_v, "c_v_forward": 1.1,
                              "ms_per_token": 5 / sp, "plain_ms_per_token": 5.0, "identical_to_plain": True})
    return cells


def make_grid(speedup, acceptance=None, drafted=None, c=None, noise=0.02, name="default", c_v=1.05, int8=None):
    """A grid of 3 ratios x 3 thresholds x max draft 4 x both policies; each quantity a function (ratio i,
    threshold j) on the adaptive slice (the static one is 0.5x slower, out of every comparison).

    ``int8``: None (fp32 cells only) or a dict of the int8 cells' overrides (``speedup``, ``acceptance``, ``c``,
    ``noise``; each missing one as the fp32 cells have it)."""
    acceptance = acceptance or (lambda i, j: 0.9 - 0.2 * i + 0.03 * j)
    drafted = drafted or (lambda i, j: 3.0 - j)
    c = c or (lambda i, j: 0.8 - 0.25 * i)
    cells = _cells("fp32", speedup, acceptance, drafted, c, noise, c_v)
    if int8 is not None:
        cells += _cells("int8", int8.get("speedup", speedup), int8.get("acceptance", acceptance), drafted,
                        int8.get("c", c), int8.get("noise", noise), c_v)
    data = {"format": FORMAT, "model": name, "n_layers": 4, "ratios": [{"ratio": r, "skip": {}} for r in RATIOS],
            "cells": cells, "noise": {"median_relative_spread": 0.04}, "command": "python -m labkit.playground"}
    return PlaygroundGrid(data, name=name)


S = Setting(0.5, 0.5, 4, "adaptive")
S_INT8 = Setting(0.5, 0.5, 4, "adaptive", "int8")
HUMP = lambda i, j: [1.1, 1.4, 1.2][i] + 0.01 * j            # noqa: E731  peak at 0.5
RISING = lambda i, j: [1.1, 1.2, 1.4][i]                      # noqa: E731  peak at the highest ratio
FALLING = lambda i, j: [1.4, 1.2, 1.1][i]                     # noqa: E731
