"""Reading the playground's grid (``data/playground/<model>.json``, written by :mod:`labkit.measure.grid.run`): the
axes and their names, :class:`Setting` (one point of the grid) and :class:`PlaygroundGrid` (O(1) look-ups, slices
along an axis, the best cell, the cells within a cell's noise). What notebook 04, its sentences and its figures read.

A grid file keeps its own column names (``acceptance_rate``, ``analytic_speedup``, ``identical_to_plain``; null
where a column does not apply): committed files of formats 2 and 3 are read as they are.
"""
from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...artifacts.models import model_key
from ...artifacts.paths import PLAYGROUND_DIR
from ...core.draft_config import DraftConfig
from ...core.skip import SkipSet
from ..costs.costmodel import CostModel

__all__ = ["FORMAT", "OLDER_FORMAT", "DEFAULT_THRESHOLDS", "DEFAULT_MAX_DRAFTS", "POLICIES", "DRAFT_WEIGHTS", "PAPER",
           "Setting", "PlaygroundGrid", "make_policy", "draft_weights_arg", "load_grid", "grid_path",
           "regenerate_command"]

FORMAT = "labkit.playground/3"      # 3: the draft-weights axis and its cost model; 2: repetitions, chunked baselines
OLDER_FORMAT = "labkit.playground/2"     # still read: every cell is an fp32 one
DEFAULT_THRESHOLDS = (0.0, 0.2, 0.4, 0.6, 0.8)
DEFAULT_MAX_DRAFTS = (4, 8, 12)
POLICIES = ("static", "adaptive")
DRAFT_WEIGHTS = ("fp32", "int8")    # the weights a self-draft reads: the model's own, or int8 copies
PAPER = {"ratio": 0.5, "policy": "adaptive", "threshold": 0.6, "max_draft": 12}   # Draft & Verify's setting


def draft_weights_arg(weights: str) -> str | None:
    """What ``speculative_generate(draft_weights=...)`` takes for a grid's weights name: "fp32" (the model's own
    weights) is None, "int8" is "int8"."""
    if weights not in DRAFT_WEIGHTS:
        raise ValueError(f"draft weights must be one of {DRAFT_WEIGHTS}, got {weights!r}")
    return None if weights == "fp32" else weights


@dataclass(frozen=True)
class Setting:
    """One point of the grid: which skip set (by its ratio), threshold, maximum draft, policy, draft weights."""

    ratio: float
    threshold: float
    max_draft: int
    policy: str = "static"
    draft_weights: str = "fp32"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        draft_weights_arg(self.draft_weights)

    def describe(self) -> str:
        kind = "threshold" if self.policy == "static" else "initial threshold"
        return (f"skip ratio {self.ratio:.3f}, {self.policy} policy, {kind} {self.threshold:g}, "
                f"max draft {self.max_draft}, {self.draft_weights} draft weights")


def make_policy(policy: str, threshold: float, max_draft: int):
    """A fresh draft policy: ``StaticThreshold(threshold, max_draft)`` or
    ``AdaptiveThreshold(initial_threshold=threshold, max_draft=max_draft)`` (official defaults otherwise), as
    :meth:`~labkit.core.draft_config.DraftConfig.make_policy` makes them."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    return DraftConfig(policy=policy, threshold=float(threshold), max_draft=int(max_draft)).make_policy()


def grid_path(model: str = "default", playground_dir=None) -> Path:
    return Path(playground_dir or PLAYGROUND_DIR) / f"{model_key(model)}.json"


def regenerate_command(model: str = "default") -> str:
    return f"python -m labkit grid --model {shlex.quote(str(model))}"


def load_grid(model: str = "default", playground_dir=None, *, path=None) -> PlaygroundGrid:
    """Read the precomputed grid of ``model`` (``data/playground/<model>.json``).

    A missing file raises ``FileNotFoundError`` naming the command that regenerates it. A format-2 file (before
    the draft-weights axis) is read with every cell an fp32 one and no int8 cost model.
    """
    path = Path(path) if path is not None else grid_path(model, playground_dir)
    if not path.exists():
        raise FileNotFoundError(
            f"no playground grid for model {str(model)!r} at {path}; regenerate it with "
            f"`{regenerate_command(model)}` (about 15 minutes on 2 CPU cores; needs the model in data/models "
            f"and its search results in data/search)")
    data = json.loads(path.read_text())
    if data.get("format") == "labkit.playground/1":
        raise ValueError(f"{path} was written by an older labkit (format 1: one run per cell, no noise "
                         f"estimate); regenerate it with `{regenerate_command(model)}`")
    if data.get("format") not in (FORMAT, OLDER_FORMAT):
        raise ValueError(f"{path} is not a playground grid (format {data.get('format')!r}, expected {FORMAT!r}); "
                         f"regenerate it with `{regenerate_command(model)}`")
    return PlaygroundGrid(data, name=str(model), path=path)


def _nan(v) -> float:
    return float("nan") if v is None else float(v)


def _with_draft_weights(data: dict) -> dict:
    """``data`` with every cell naming its draft weights: a format-2 grid's cells (which have none) are fp32 ones."""
    if all("draft_weights" in c for c in data["cells"]):
        return data
    return {**data, "cells": [{**c, "draft_weights": c.get("draft_weights", "fp32")} for c in data["cells"]]}


def _key(cell: dict) -> tuple:
    return (float(cell["ratio"]), float(cell["threshold"]), int(cell["max_draft"]), cell["policy"],
            cell["draft_weights"])


class PlaygroundGrid:
    """A loaded grid with O(1) look-ups by :class:`Setting` (axes: ratio, threshold, max draft, policy, draft
    weights; a format-2 grid has fp32 weights only)."""

    METRICS = ("acceptance_rate", "tokens_per_step", "drafted_per_step", "speedup", "speedup_min", "speedup_max",
               "analytic_speedup", "c",
               "c_v", "c_forward", "c_v_forward", "analytic_speedup_forward", "ms_per_token", "plain_ms_per_token",
               "mean_threshold", "final_threshold")

    def __init__(self, data: dict, name: str | None = None, path=None):
        data = _with_draft_weights(data)
        self.data, self.path = data, path
        self.name = name or data["model"]
        self.ratios = sorted({float(r["ratio"]) for r in data["ratios"]})
        self.thresholds = sorted({float(c["threshold"]) for c in data["cells"]})
        self.max_drafts = sorted({int(c["max_draft"]) for c in data["cells"]})
        self.policies = [p for p in POLICIES if any(c["policy"] == p for c in data["cells"])]
        self.draft_weights = [w for w in DRAFT_WEIGHTS if any(c["draft_weights"] == w for c in data["cells"])]
        self._ratio_entries = {float(r["ratio"]): r for r in data["ratios"]}
        self._cells = {_key(c): c for c in data["cells"]}
        self._fill_arrays()
        # forward-pass costs: the int8 cells' cost model timed their drafts with int8 weights
        self.cost_models = {w: CostModel.from_dict(data[key]) for w, key in
                            (("fp32", "cost_model"), ("int8", "cost_model_int8")) if data.get(key)}
        self.cost_model = self.cost_models.get("fp32")

    def _fill_arrays(self) -> None:
        """Dense arrays [ratio, threshold, max draft, policy, draft weights] per metric: slices are cheap."""
        axes = (self.ratios, self.thresholds, self.max_drafts, self.policies, self.draft_weights)
        self._index = tuple({v: i for i, v in enumerate(axis)} for axis in axes)
        self._arrays = {m: np.full(tuple(len(a) for a in axes), np.nan) for m in self.METRICS}
        for key, c in self._cells.items():
            at = tuple(index[v] for index, v in zip(self._index, key))
            for m in self.METRICS:
                self._arrays[m][at] = _nan(c.get(m))

    def cost_model_for(self, draft_weights: str = "fp32") -> CostModel | None:
        """The cost model measured with these draft weights (None: not in the file)."""
        return self.cost_models.get(draft_weights)

    # -- look-ups ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._cells)

    @property
    def prompt_texts(self) -> list[str]:
        return [p["text"] for p in self.data["prompts"]]

    def nearest(self, ratio=None, threshold=None, max_draft=None, policy=None, draft_weights=None) -> Setting:
        """The grid setting nearest to the given values (None, or a policy / weights the grid lacks: the paper's
        value, fp32 weights, or the grid's first)."""
        def near(values, target):
            return min(values, key=lambda v: (abs(v - target), v))

        def known(value, values, default):
            return value if value in values else (default if default in values else values[0])
        return Setting(
            near(self.ratios, PAPER["ratio"] if ratio is None else ratio),
            near(self.thresholds, PAPER["threshold"] if threshold is None else threshold),
            near(self.max_drafts, PAPER["max_draft"] if max_draft is None else max_draft),
            known(policy, self.policies, PAPER["policy"]), known(draft_weights, self.draft_weights, "fp32"))

    def cell(self, setting: Setting) -> dict:
        key = (float(setting.ratio), float(setting.threshold), int(setting.max_draft), setting.policy,
               setting.draft_weights)
        if key not in self._cells:
            raise KeyError(f"the grid of {self.name!r} has no cell {setting.describe()}")
        return self._cells[key]

    def ratio_entry(self, ratio: float) -> dict:
        return self._ratio_entries[float(ratio)]

    def skip_set(self, ratio: float) -> SkipSet:
        return SkipSet.from_dict(self.ratio_entry(ratio)["skip"])

    def values(self, metric: str, draft_weights: str | None = None) -> np.ndarray:
        """Every cell's ``metric`` as an array [ratio, threshold, max draft, policy, draft weights] (NaN where not
        measured); with ``draft_weights``, only those weights' cells [ratio, threshold, max draft, policy]."""
        if draft_weights is None:
            return self._arrays[metric]
        return self._arrays[metric][..., self._index[4][draft_weights]]

    def vs_ratio(self, metric: str, setting: Setting) -> np.ndarray:
        _, ti, ki, pi, wi = self._index
        return self._arrays[metric][:, ti[setting.threshold], ki[setting.max_draft], pi[setting.policy],
                                    wi[setting.draft_weights]]

    def vs_threshold(self, metric: str, setting: Setting) -> np.ndarray:
        ri, _, ki, pi, wi = self._index
        return self._arrays[metric][ri[setting.ratio], :, ki[setting.max_draft], pi[setting.policy],
                                    wi[setting.draft_weights]]

    def best(self, draft_weights: str | None = None) -> tuple[Setting, dict]:
        """The cell with the highest measured speedup (median over repetitions), among the cells with
        ``draft_weights`` if given."""
        cells = [(k, c) for k, c in self._cells.items() if draft_weights in (None, k[4])]
        if not cells:
            raise KeyError(f"the grid of {self.name!r} has no cell with {draft_weights} draft weights")
        key, cell = max(cells, key=lambda kv: -math.inf if kv[1].get("speedup") is None else kv[1]["speedup"])
        return Setting(*key), cell

    def within_noise(self, setting: Setting, *, any_weights: bool = False) -> list[Setting]:
        """The other cells with the same draft weights (any weights: ``any_weights``) that the noise cannot tell
        apart from ``setting``: their min-max speedup range over repetitions overlaps its range."""
        cell = self.cell(setting)
        lo, hi = _nan(cell.get("speedup_min")), _nan(cell.get("speedup_max"))
        return [Setting(*key) for key, c in self._cells.items()
                if Setting(*key) != setting and (any_weights or key[4] == setting.draft_weights)
                and c.get("speedup_max") is not None and c["speedup_max"] >= lo and c["speedup_min"] <= hi]

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.data["cells"])

    RATIO_COLUMNS = ("ratio", "acceptance_rate", "tokens_per_step", "drafted_per_step", "ms_per_token",
                     "plain_ms_per_token", "speedup", "speedup_min", "speedup_max", "analytic_speedup", "c", "c_v",
                     "analytic_speedup_forward")

    def ratio_frame(self, setting: Setting):
        """One row per skip set: the cells at ``setting``'s policy, threshold, max draft and draft weights, by
        skip ratio."""
        frame = self.to_frame()
        rows = frame[(frame.policy == setting.policy) & (frame.threshold == setting.threshold)
                     & (frame.max_draft == setting.max_draft) & (frame.draft_weights == setting.draft_weights)]
        return rows[list(self.RATIO_COLUMNS)].sort_values("ratio").reset_index(drop=True)

    def describe(self) -> str:
        d, noise = self.data, self.data["noise"]
        return (f"grid of {self.name!r}: {len(self.ratios)} skip ratios x {len(self.thresholds)} thresholds x "
                f"{len(self.max_drafts)} max drafts x {len(self.policies)} policies x {len(self.draft_weights)} "
                f"draft weights ({', '.join(self.draft_weights)}) = {len(self)} cells; "
                f"{d['settings']['n_prompts']} prompts x {d['settings']['max_new_tokens']} tokens x "
                f"{d['settings']['repeats']} repetitions; measured {d['created_at']} on "
                f"{d['machine'].get('processor', '?')} ({d['machine'].get('torch_threads')} thread(s)) in "
                f"{d['seconds']:.0f} s by `{d['command']}`; a cell's speedup varies by "
                f"{100 * noise['median_relative_spread']:.0f} % (median min-max width over repetitions); the plain "
                f"loop's median per skip set ranged {noise['baseline_ms_min']:.2f}-{noise['baseline_ms_max']:.2f} "
                f"ms/token (the machine's drift over the run)")


