"""The skip-ratio × threshold playground (notebook 04): a precomputed grid, its figures, the widget.

Moving a slider must answer in well under 100 ms, and a speculative run takes seconds, so the
notebook reads a **grid** measured beforehand on the lab's machine::

    python -m labkit.playground --model default      # writes data/playground/default.json
    python -m labkit.playground --model plain        # writes data/playground/plain.json

Grid axes: the skip ratio (one skip set per 0.125-wide ratio bucket: the best set the search
found there, :func:`labkit.best_skip_set`), the draft-exit threshold (static, or the *initial*
threshold of :class:`~labkit.AdaptiveThreshold`), the maximum draft length, and the policy
(static / adaptive). Each cell holds, over the same few held-out prompts (greedy, a fixed number of
new tokens, EOS ignored):

- ``acceptance_rate`` α = accepted / drafted, ``tokens_per_step`` = emitted / steps, ``drafted_per_step`` d;
- ``ms_per_token``: wall clock of whole :func:`~labkit.speculative_generate` calls / new tokens;
- ``plain_ms_per_token``: the same for :func:`~labkit.autoregressive_generate` on the same prompts in
  the same run, from the plain runs just before and after the cell's own run (a plain run follows
  every ``plain_every`` speculative runs, in a shuffled order, so a slow patch of the machine hits
  both sides alike); ``speedup`` = ``plain_ms_per_token / ms_per_token``;
- ``c`` = draft ms per drafted token and ``c_v`` = verify ms per step, both divided by the plain
  loop's ms per token (the decoder's own phase timings, same run), and ``analytic_speedup`` =
  (A + 1) / (d c + c_v) (:func:`labkit.costmodel.trace_speedup`, A = accepted per step): what this
  acceptance pattern gives at these costs. It sits a little above the measured speedup: the prefill
  and the bookkeeping between phases are not in it.
- ``c_forward``, ``c_v_forward``, ``analytic_speedup_forward``: the same with forward passes only,
  from a :class:`~labkit.costmodel.CostModel` measured at the start of the run (``None`` with
  ``--cost-model-repeats 0``). The gap to the measured speedup is the decoder's own overhead.

The file also records the machine, the date, the command and the prompts.
:class:`Playground` is the widget: sliders for skip ratio, threshold and maximum draft, a
static/adaptive toggle, a model toggle (``default`` / ``plain``), presets, and a "run live" button
that re-measures the current setting on this machine and adds the point to the plots.
"""
from __future__ import annotations

import argparse
import html
import json
import math
import random
import shlex
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .machine import machine_info
from .skip import SkipSet
from .viz.widgets import as_widget, update_widget

__all__ = [
    "PLAYGROUND_DIR", "DEFAULT_THRESHOLDS", "DEFAULT_MAX_DRAFTS", "POLICIES", "GridConfig", "Setting",
    "PlaygroundGrid", "skip_sets_by_bucket", "make_policy", "compute_grid", "save_grid", "load_grid", "grid_path",
    "regenerate_command", "measure_live", "presets", "guiding_answers", "panel_xy", "playground_figure",
    "heatmap_figure", "model_comparison_figure", "Playground", "main",
]

REPO = Path(__file__).resolve().parent.parent
PLAYGROUND_DIR = REPO / "data" / "playground"
FORMAT = "labkit.playground/1"
DEFAULT_THRESHOLDS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9)
DEFAULT_MAX_DRAFTS = (4, 8, 12)
POLICIES = ("static", "adaptive")
PAPER = {"ratio": 0.5, "policy": "adaptive", "threshold": 0.6, "max_draft": 12}   # Draft & Verify's setting


# ---------------------------------------------------------------------------------------
# settings and the grid's axes
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """One point of the grid: which skip set (by its ratio), threshold, maximum draft, policy."""

    ratio: float
    threshold: float
    max_draft: int
    policy: str = "static"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")

    def describe(self) -> str:
        kind = "threshold" if self.policy == "static" else "initial threshold"
        return (f"skip ratio {self.ratio:.3f}, {self.policy} policy, {kind} {self.threshold:g}, "
                f"max draft {self.max_draft}")


@dataclass
class GridConfig:
    """What :func:`compute_grid` measures (defaults sized for ≤ 10 min on 2 CPU cores)."""

    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS
    max_drafts: tuple[int, ...] = DEFAULT_MAX_DRAFTS
    policies: tuple[str, ...] = POLICIES
    n_prompts: int = 2
    max_new_tokens: int = 64
    prompt_seed: int = 0
    seed: int = 0                       # order of the cells inside a block
    plain_every: int = 9                # a plain-loop run after every this many speculative runs
    max_ratio: float = 1.0              # leave out searched skip sets above this skip ratio
    cost_model_repeats: int = 5         # 0: no cost model; the analytic limit then uses the trace timings
    cost_model_sets: int | None = None  # random skip sets of the cost-model regression (default 4L + 8)

    def __post_init__(self) -> None:
        self.thresholds = tuple(float(t) for t in self.thresholds)
        self.max_drafts = tuple(int(k) for k in self.max_drafts)
        self.policies = tuple(self.policies)
        for t in self.thresholds:
            if not 0.0 <= t <= 1.0:
                raise ValueError(f"thresholds must lie in [0, 1], got {t}")
        if any(k < 1 for k in self.max_drafts):
            raise ValueError(f"max_drafts must be >= 1, got {self.max_drafts}")
        if not self.thresholds or not self.max_drafts or not self.policies:
            raise ValueError("thresholds, max_drafts and policies must not be empty")
        for p in self.policies:
            if p not in POLICIES:
                raise ValueError(f"policies must be among {POLICIES}, got {p!r}")
        if self.n_prompts < 1 or self.max_new_tokens < 2 or self.plain_every < 1:
            raise ValueError("n_prompts and plain_every must be >= 1, max_new_tokens >= 2")


def make_policy(policy: str, threshold: float, max_draft: int):
    """A fresh draft policy: ``StaticThreshold(threshold, max_draft)`` or
    ``AdaptiveThreshold(initial_threshold=threshold, max_draft=max_draft)`` (official defaults otherwise)."""
    from .policies import AdaptiveThreshold, StaticThreshold

    if policy == "static":
        return StaticThreshold(float(threshold), int(max_draft))
    if policy == "adaptive":
        return AdaptiveThreshold(initial_threshold=float(threshold), max_draft=int(max_draft))
    raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")


def skip_sets_by_bucket(model: str, n_layers: int, *, search_dir=None) -> list[dict]:
    """The searched best skip set of every 0.125-wide skip-ratio bucket that has one (empty sets left out).

    Reads the committed search results through :func:`labkit.best_skip_set`; raises its
    ``FileNotFoundError`` (which names the command that regenerates them) when there are none.
    """
    from .search import best_skip_set, ratio_buckets

    found, seen = [], set()
    for lo, hi in ratio_buckets():
        try:
            skip = best_skip_set(model, (lo + hi) / 2, search_dir=search_dir)
        except LookupError:
            continue
        if not skip or skip in seen:
            continue
        seen.add(skip)
        found.append({"bucket": [lo, hi], "ratio": skip.ratio(n_layers), "n_skipped": skip.n_skipped,
                      "skip": skip.to_dict()})
    if not found:
        raise LookupError(f"the search results of model {model!r} hold no non-empty skip set; run the search "
                          f"with `--per-bucket` (see labkit.search) and export it")
    return sorted(found, key=lambda e: e["ratio"])


# ---------------------------------------------------------------------------------------
# file locations
# ---------------------------------------------------------------------------------------
def _model_key(model) -> str:
    from .search import model_key

    return model_key(model)


def grid_path(model: str = "default", playground_dir=None) -> Path:
    return Path(playground_dir or PLAYGROUND_DIR) / f"{_model_key(model)}.json"


def regenerate_command(model: str = "default") -> str:
    return f"python -m labkit.playground --model {shlex.quote(str(model))}"


# ---------------------------------------------------------------------------------------
# measuring the grid
# ---------------------------------------------------------------------------------------
def _rounded(value, digits: int = 5):
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return float(f"{value:.{digits}g}")
    return value


class _CellStats:
    """Running sums of one cell over prompts."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.new_tokens = self.steps = self.drafted = self.accepted = self.emitted = 0
        self.draft_s = self.verify_s = 0.0
        self.verify_model_ms = 0.0          # sum over steps of the cost model's verify cost
        self.identical: list[bool] = []
        self.thresholds: list[float] = []
        self.final_threshold = float("nan")
        self.plain_s, self.plain_tokens = 0.0, 0    # the plain-loop runs this cell is compared with

    def add(self, result, plain_sequence, cost_model) -> None:
        trace = result.trace
        self.seconds += result.elapsed_s
        self.new_tokens += result.sequences.shape[1] - result.prompt_length
        self.steps += len(trace.steps)
        self.drafted += trace.n_drafted
        self.accepted += trace.n_accepted
        self.emitted += trace.n_emitted
        self.draft_s += sum(s.draft_s for s in trace.steps)
        self.verify_s += sum(s.verify_s for s in trace.steps)
        if cost_model is not None:
            self.verify_model_ms += sum(cost_model.verify_step_ms(min(s.n_drafted, cost_model.max_draft))
                                        for s in trace.steps)
        self.thresholds.extend(s.threshold for s in trace.steps if s.threshold is not None)
        if trace.steps and trace.steps[-1].policy_state.get("threshold") is not None:
            self.final_threshold = float(trace.steps[-1].policy_state["threshold"])
        if plain_sequence is not None:
            self.identical.append(bool(torch.equal(result.sequences, plain_sequence)))


def _cell_row(setting: Setting, st: _CellStats, plain_ms: float, c_forward: float | None, cost_model) -> dict:
    from .costmodel import trace_speedup

    nan = float("nan")
    ms = 1e3 * st.seconds / st.new_tokens if st.new_tokens else nan
    A = st.accepted / st.steps if st.steps else nan
    d = st.drafted / st.steps if st.steps else nan
    # costs relative to the plain loop's ms per token, from the decoder's own phase timings (same run)
    c = (1e3 * st.draft_s / st.drafted) / plain_ms if st.drafted else 0.0
    c_v = (1e3 * st.verify_s / st.steps) / plain_ms if st.steps else nan
    analytic = trace_speedup(A, d, c, c_v) if st.steps and c_v > 0 else nan
    # the same from the cost model: forward passes only, relative to the full model's one-token forward
    c_v_forward = analytic_forward = nan
    if cost_model is not None and st.steps:
        c_v_forward = st.verify_model_ms / st.steps / cost_model.full_step_ms
        analytic_forward = trace_speedup(A, d, c_forward, c_v_forward)
    return {
        "ratio": setting.ratio, "threshold": setting.threshold, "max_draft": setting.max_draft,
        "policy": setting.policy,
        "acceptance_rate": st.accepted / st.drafted if st.drafted else nan,
        "tokens_per_step": st.emitted / st.steps if st.steps else nan,
        "drafted_per_step": d, "accepted_per_step": A,
        "ms_per_token": ms, "plain_ms_per_token": plain_ms, "speedup": plain_ms / ms if ms > 0 else nan,
        "c": c, "c_v": c_v, "analytic_speedup": analytic,
        "c_forward": nan if c_forward is None else c_forward, "c_v_forward": c_v_forward,
        "analytic_speedup_forward": analytic_forward,
        "mean_threshold": statistics.fmean(st.thresholds) if st.thresholds else nan,
        "final_threshold": st.final_threshold,
        "steps": st.steps, "drafted": st.drafted, "accepted": st.accepted, "new_tokens": st.new_tokens,
        "identical_to_plain": all(st.identical) if st.identical else None,
    }


def compute_grid(model, tokenizer, *, model_name: str, config: GridConfig | None = None,
                 skip_sets: Sequence[SkipSet] | None = None, search_dir=None, prompt_texts: Sequence[str] | None = None,
                 command: str | None = None, progress: bool = True) -> dict:
    """Measure the playground grid of ``model`` on this machine; returns the JSON-able grid.

    ``skip_sets``: the sets to use (default: the searched best set of every ratio bucket,
    :func:`skip_sets_by_bucket`). ``prompt_texts``: default ``labkit.prompts(n_prompts, seed=prompt_seed)``.
    Measurement order: for each skip set and prompt, the cells of that skip set in a shuffled
    order with a plain-loop run before the first and after every ``plain_every`` of them; a cell's
    speedup is relative to the two plain runs around it (summed over prompts). The skip set's
    ``plain_ms_per_token`` is the mean of all its plain runs.
    """
    from tqdm.auto import tqdm

    from .corpus import prompts as held_out_prompts
    from .decoding import autoregressive_generate, speculative_generate

    cfg = config or GridConfig()
    t_start = time.perf_counter()
    L = int(model.config.num_hidden_layers)
    if skip_sets is None:
        entries = [e for e in skip_sets_by_bucket(model_name, L, search_dir=search_dir)
                   if e["ratio"] <= cfg.max_ratio + 1e-9]
        if not entries:
            raise ValueError(f"no searched skip set of {model_name!r} has a skip ratio <= {cfg.max_ratio}")
        source = "labkit.best_skip_set (search results, best set per 0.125-wide ratio bucket)"
    else:
        from .search import _bucket_index, ratio_buckets

        entries = []
        for skip in skip_sets:
            r = skip.ratio(L)
            entries.append({"bucket": list(ratio_buckets()[_bucket_index(r)]), "ratio": r, "n_skipped": skip.n_skipped,
                            "skip": skip.to_dict()})
        entries.sort(key=lambda e: e["ratio"])
        source = "given skip sets"
    if prompt_texts is None:
        chosen = held_out_prompts(cfg.n_prompts, seed=cfg.prompt_seed)
        prompt_info = [{"source": p.source, "text": p.text} for p in chosen]
    else:
        prompt_info = [{"source": f"given prompt {i}", "text": t} for i, t in enumerate(prompt_texts[: cfg.n_prompts])]
    prompt_ids = [tokenizer(p["text"], return_tensors="pt", add_special_tokens=False)["input_ids"] for p in prompt_info]
    for p, ids in zip(prompt_info, prompt_ids):
        p["n_tokens"] = int(ids.shape[1])

    cost_model = None
    if cfg.cost_model_repeats > 0:
        from .costmodel import measure_cost_model

        context = int(statistics.fmean(p["n_tokens"] for p in prompt_info) + cfg.max_new_tokens // 2)
        cost_model = measure_cost_model(model, context=context, repeats=cfg.cost_model_repeats,
                                        max_draft=max(max(cfg.max_drafts), 1), n_sets=cfg.cost_model_sets,
                                        model_name=str(model_name))
    settings = [(t, k, p) for p in cfg.policies for k in cfg.max_drafts for t in cfg.thresholds]
    N = cfg.max_new_tokens

    def spec(ids, skip, policy, n=N):
        return speculative_generate(model, ids, skip=skip, policy=policy, max_new_tokens=n, eos_token_id=[])

    def plain(ids, n=N):
        return autoregressive_generate(model, ids, n, eos_token_id=[])

    # warm-up: the plain loop and one speculative run per policy kind (not timed)
    plain(prompt_ids[0], min(16, N))
    warm_skip = SkipSet.from_dict(entries[len(entries) // 2]["skip"])
    for p in cfg.policies:
        spec(prompt_ids[0], warm_skip, make_policy(p, 0.6, 4), min(16, N))

    rng = random.Random(cfg.seed)
    cells, ratio_rows = [], []
    bar = tqdm(total=len(entries) * len(prompt_ids) * len(settings), desc=f"playground grid ({model_name})",
               unit="run", disable=not progress, dynamic_ncols=True)
    for entry in entries:
        skip = SkipSet.from_dict(entry["skip"])
        c_forward = cost_model.draft_cost_ratio(skip) if cost_model is not None else None
        policies = {s: make_policy(s[2], s[0], s[1]) for s in settings}     # one per cell: adaptive state carries
        stats = {s: _CellStats() for s in settings}
        plain_seconds, plain_tokens, plain_by_prompt = 0.0, 0, []
        for ids in prompt_ids:
            order = list(settings)
            rng.shuffle(order)
            chunks = [order[i: i + cfg.plain_every] for i in range(0, len(order), cfg.plain_every)]
            previous = plain(ids)
            runs = [previous]
            for chunk in chunks:
                results = []
                for s in chunk:
                    results.append((s, spec(ids, skip, policies[s])))
                    bar.update()
                following = plain(ids)
                runs.append(following)
                bracket_s = previous.elapsed_s + following.elapsed_s          # the plain runs around this chunk
                for s, result in results:
                    stats[s].add(result, previous.sequences, cost_model)
                    stats[s].plain_s += bracket_s
                    stats[s].plain_tokens += 2 * N
                previous = following
            prompt_s = sum(r.elapsed_s for r in runs)
            plain_seconds += prompt_s
            plain_tokens += N * len(runs)
            plain_by_prompt.append(1e3 * prompt_s / (N * len(runs)))
        plain_ms = 1e3 * plain_seconds / plain_tokens
        for (t, k, p) in settings:
            st = stats[(t, k, p)]
            cells.append(_cell_row(Setting(entry["ratio"], t, k, p), st, 1e3 * st.plain_s / st.plain_tokens, c_forward,
                                   cost_model))
        ratio_rows.append({**entry, "plain_ms_per_token": plain_ms, "plain_ms_per_token_by_prompt": plain_by_prompt,
                           "c_forward": c_forward})
    bar.close()
    seconds = time.perf_counter() - t_start
    columns = list(cells[0])
    adaptive = make_policy("adaptive", 0.6, 12)
    return {
        "format": FORMAT,
        "model": str(model_name),
        "n_layers": L,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_info(),
        "command": command or regenerate_command(model_name),
        "seconds": round(seconds, 1),
        "settings": {**asdict(cfg), "skip_set_source": source, "decoding": "greedy, EOS ignored",
                     "timing": "wall clock of whole calls (prefill included) / new tokens",
                     "adaptive_policy": {k: getattr(adaptive, k) for k in ("beta1", "target", "epsilon", "beta2")}},
        "prompts": prompt_info,
        "ratios": [{k: _rounded(v) for k, v in r.items()} for r in ratio_rows],
        "cost_model": cost_model.to_dict() if cost_model is not None else None,
        "columns": columns,
        "cells": [{k: _rounded(v) for k, v in c.items()} for c in cells],
    }


def save_grid(grid: dict, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(grid, indent=1))
    return path


def load_grid(model: str = "default", playground_dir=None, *, path=None) -> "PlaygroundGrid":
    """Read the precomputed grid of ``model`` (``data/playground/<model>.json``).

    A missing file raises ``FileNotFoundError`` naming the command that regenerates it.
    """
    path = Path(path) if path is not None else grid_path(model, playground_dir)
    if not path.exists():
        raise FileNotFoundError(
            f"no playground grid for model {str(model)!r} at {path}; regenerate it with "
            f"`{regenerate_command(model)}` (about 5-10 minutes on 2 CPU cores; needs the model in data/models "
            f"and its search results in data/search)")
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path} is not a playground grid (format {data.get('format')!r}, expected {FORMAT!r}); "
                         f"regenerate it with `{regenerate_command(model)}`")
    return PlaygroundGrid(data, name=str(model), path=path)


# ---------------------------------------------------------------------------------------
# reading the grid
# ---------------------------------------------------------------------------------------
def _nan(v) -> float:
    return float("nan") if v is None else float(v)


class PlaygroundGrid:
    """A loaded grid with O(1) look-ups by :class:`Setting`."""

    METRICS = ("acceptance_rate", "tokens_per_step", "drafted_per_step", "speedup", "analytic_speedup", "c",
               "c_v", "c_forward", "analytic_speedup_forward", "ms_per_token", "plain_ms_per_token",
               "mean_threshold", "final_threshold")

    def __init__(self, data: dict, name: str | None = None, path=None):
        self.data, self.path = data, path
        self.name = name or data["model"]
        self.ratios = sorted({float(r["ratio"]) for r in data["ratios"]})
        self.thresholds = sorted({float(c["threshold"]) for c in data["cells"]})
        self.max_drafts = sorted({int(c["max_draft"]) for c in data["cells"]})
        self.policies = [p for p in POLICIES if any(c["policy"] == p for c in data["cells"])]
        self._ratio_entries = {float(r["ratio"]): r for r in data["ratios"]}
        self._cells = {(float(c["ratio"]), float(c["threshold"]), int(c["max_draft"]), c["policy"]): c
                       for c in data["cells"]}
        # dense arrays [ratio, threshold, max_draft, policy] per metric: slices are cheap
        shape = (len(self.ratios), len(self.thresholds), len(self.max_drafts), len(self.policies))
        self._arrays = {m: np.full(shape, np.nan) for m in self.METRICS}
        ri = {r: i for i, r in enumerate(self.ratios)}
        ti = {t: i for i, t in enumerate(self.thresholds)}
        ki = {k: i for i, k in enumerate(self.max_drafts)}
        pi = {p: i for i, p in enumerate(self.policies)}
        for (r, t, k, p), c in self._cells.items():
            for m in self.METRICS:
                self._arrays[m][ri[r], ti[t], ki[k], pi[p]] = _nan(c.get(m))
        self._index = (ri, ti, ki, pi)
        self.cost_model = None
        if data.get("cost_model"):
            from .costmodel import CostModel

            self.cost_model = CostModel.from_dict(data["cost_model"])

    # -- look-ups ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._cells)

    @property
    def prompt_texts(self) -> list[str]:
        return [p["text"] for p in self.data["prompts"]]

    def nearest(self, ratio=None, threshold=None, max_draft=None, policy=None) -> Setting:
        """The grid setting nearest to the given values (None: the paper's value, or the grid's first)."""
        def near(values, target):
            return min(values, key=lambda v: (abs(v - target), v))
        return Setting(
            near(self.ratios, PAPER["ratio"] if ratio is None else ratio),
            near(self.thresholds, PAPER["threshold"] if threshold is None else threshold),
            near(self.max_drafts, PAPER["max_draft"] if max_draft is None else max_draft),
            (policy if policy in self.policies else
             (PAPER["policy"] if PAPER["policy"] in self.policies else self.policies[0])))

    def cell(self, setting: Setting) -> dict:
        key = (float(setting.ratio), float(setting.threshold), int(setting.max_draft), setting.policy)
        if key not in self._cells:
            raise KeyError(f"the grid of {self.name!r} has no cell {setting.describe()}")
        return self._cells[key]

    def ratio_entry(self, ratio: float) -> dict:
        return self._ratio_entries[float(ratio)]

    def skip_set(self, ratio: float) -> SkipSet:
        return SkipSet.from_dict(self.ratio_entry(ratio)["skip"])

    def vs_ratio(self, metric: str, setting: Setting) -> np.ndarray:
        _, ti, ki, pi = self._index
        return self._arrays[metric][:, ti[setting.threshold], ki[setting.max_draft], pi[setting.policy]]

    def vs_threshold(self, metric: str, setting: Setting) -> np.ndarray:
        ri, _, ki, pi = self._index
        return self._arrays[metric][ri[setting.ratio], :, ki[setting.max_draft], pi[setting.policy]]

    def best(self) -> tuple[Setting, dict]:
        """The cell with the highest measured speedup."""
        key, cell = max(self._cells.items(), key=lambda kv: -math.inf if kv[1].get("speedup") is None
                        else kv[1]["speedup"])
        return Setting(*key), cell

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.data["cells"])

    RATIO_COLUMNS = ("ratio", "acceptance_rate", "tokens_per_step", "drafted_per_step", "ms_per_token",
                     "plain_ms_per_token", "speedup", "analytic_speedup", "c", "c_v", "analytic_speedup_forward")

    def ratio_frame(self, setting: Setting):
        """One row per skip set: the cells at ``setting``'s policy, threshold and max draft, by skip ratio."""
        frame = self.to_frame()
        rows = frame[(frame.policy == setting.policy) & (frame.threshold == setting.threshold)
                     & (frame.max_draft == setting.max_draft)]
        return rows[list(self.RATIO_COLUMNS)].sort_values("ratio").reset_index(drop=True)

    def describe(self) -> str:
        d = self.data
        return (f"grid of {self.name!r}: {len(self.ratios)} skip ratios x {len(self.thresholds)} thresholds x "
                f"{len(self.max_drafts)} max drafts x {len(self.policies)} policies = {len(self)} cells; "
                f"{d['settings']['n_prompts']} prompts x {d['settings']['max_new_tokens']} tokens; measured "
                f"{d['created_at']} on {d['machine'].get('processor', '?')} ({d['machine'].get('torch_threads')} "
                f"thread(s)) in {d['seconds']:.0f} s by `{d['command']}`")


# ---------------------------------------------------------------------------------------
# the live measurement
# ---------------------------------------------------------------------------------------
def measure_live(model, tokenizer, skip: SkipSet, setting: Setting, prompt_texts: Sequence[str], *,
                 max_new_tokens: int = 48, cost_model=None) -> dict:
    """Re-measure one setting on this machine: for each prompt the plain loop, the speculative run,
    the plain loop again (interleaved, after one untimed warm-up of each); greedy, EOS ignored."""
    from .decoding import autoregressive_generate, speculative_generate

    t0 = time.perf_counter()
    ids_list = [tokenizer(t, return_tensors="pt", add_special_tokens=False)["input_ids"] for t in prompt_texts]
    policy = make_policy(setting.policy, setting.threshold, setting.max_draft)
    warm = min(8, max_new_tokens)
    autoregressive_generate(model, ids_list[0], warm, eos_token_id=[])
    speculative_generate(model, ids_list[0], skip=skip, policy=make_policy(setting.policy, setting.threshold,
                                                                           setting.max_draft),
                         max_new_tokens=warm, eos_token_id=[])
    st = _CellStats()
    plain_s, plain_n = 0.0, 0
    for ids in ids_list:
        before = autoregressive_generate(model, ids, max_new_tokens, eos_token_id=[])
        st.add(speculative_generate(model, ids, skip=skip, policy=policy, max_new_tokens=max_new_tokens,
                                    eos_token_id=[]), before.sequences, cost_model)
        after = autoregressive_generate(model, ids, max_new_tokens, eos_token_id=[])
        plain_s += before.elapsed_s + after.elapsed_s
        plain_n += 2 * max_new_tokens
    plain_ms = 1e3 * plain_s / plain_n
    c_forward = cost_model.draft_cost_ratio(skip) if cost_model is not None else None
    row = _cell_row(setting, st, plain_ms, c_forward, cost_model)
    row["n_prompts"], row["max_new_tokens"] = len(ids_list), max_new_tokens
    row["seconds"] = time.perf_counter() - t0
    row["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return row


# ---------------------------------------------------------------------------------------
# presets and guiding questions
# ---------------------------------------------------------------------------------------
def presets(grid: PlaygroundGrid) -> dict[str, Setting]:
    """Named settings: too timid / the paper's / too aggressive (paper's policy at the lowest, ≈ 50 %
    and highest skip ratio of the grid) and the best cell found."""
    paper = grid.nearest()
    return {
        "too timid": replace(paper, ratio=grid.ratios[0]),
        "paper's setting": paper,
        "too aggressive": replace(paper, ratio=grid.ratios[-1]),
        "best found": grid.best()[0],
    }


def presets_frame(grid: PlaygroundGrid):
    """The named presets side by side: setting, acceptance, tokens per step, speedup and its analytic limit."""
    import pandas as pd

    rows = []
    for name, s in presets(grid).items():
        cell = grid.cell(s)
        rows.append({"preset": name, "skip ratio": s.ratio, "policy": s.policy, "threshold": s.threshold,
                     "max draft": s.max_draft, "α": cell["acceptance_rate"], "tokens/step": cell["tokens_per_step"],
                     "speedup": cell["speedup"], "analytic limit": cell["analytic_speedup"]})
    return pd.DataFrame(rows).set_index("preset")


def _fmt(v, spec=".2f") -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _trend(first: float, last: float, what: str, tol: float = 0.02) -> str:
    if any(v is None or math.isnan(v) for v in (first, last)):
        return f"{what} is not measured at both ends"
    if abs(last - first) <= tol * max(1.0, abs(first)):
        return f"{what} stays at about {first:.2f}"
    return f"{what} {'falls' if last < first else 'rises'} from {first:.2f} to {last:.2f}"


def _direction(first: float, last: float, tol: float = 0.02) -> int:
    """-1 falling, +1 rising, 0 flat (or unknown)."""
    if any(v is None or math.isnan(v) for v in (first, last)) or abs(last - first) <= tol * max(1.0, abs(first)):
        return 0
    return 1 if last > first else -1


def guiding_answers(grid: PlaygroundGrid, other: PlaygroundGrid | None = None,
                    setting: Setting | None = None) -> list[dict]:
    """The guiding questions, where to look in the plots, and the answer in this grid's numbers.

    Every clause is chosen by the data (a peak inside the range or at an edge, curves rising,
    falling or flat), so the text stays true whatever a regenerated grid shows.
    """
    s = setting or grid.nearest()
    sp, acc, c = grid.vs_ratio("speedup", s), grid.vs_ratio("acceptance_rate", s), grid.vs_ratio("c", s)
    ratios = np.array(grid.ratios)
    i = int(np.nanargmax(sp))
    interior = 0 < i < len(ratios) - 1
    where = ("inside the range" if interior else
             "at the lowest skip ratio of the grid" if i == 0 else "at the highest skip ratio of the grid")
    c_dir, a_dir = _direction(c[0], c[-1]), _direction(acc[0], acc[-1])
    c_why = {-1: "skipped blocks are not computed",
             0: "a forward pass of this model is mostly fixed overhead, so skipping blocks saves little",
             1: "skipping saved no measurable time here"}[c_dir]
    a_why = {-1: "the draft drifts further from the full model", 0: "the draft stays close to the full model",
             1: "the searched sets at higher ratios happen to agree better"}[a_dir]
    a1 = (f"With the {s.policy} policy, threshold {s.threshold:g} and max draft {s.max_draft}, the speedup peaks at "
          f"skip ratio {ratios[i]:.3f} ({_fmt(sp[i])}×, {where}). Going right, "
          f"{_trend(c[0], c[-1], 'the draft cost c')} "
          f"({c_why}) and {_trend(acc[0], acc[-1], 'the acceptance α')} ({a_why}).")
    if interior:
        gain = "the cheaper drafts" if c_dir < 0 else "what skipping saves"
        a1 += (f" Past {ratios[i]:.3f}, the tokens lost to rejected drafts outweigh {gain}, and the speedup drops to "
               f"{_fmt(sp[-1])}× at {ratios[-1]:.3f}.")
    elif i == len(ratios) - 1:
        a1 += " Within the grid's range, the cheaper drafts still pay for the lost acceptance, so there is no fall yet."
    else:
        a1 += " Every extra skipped block costs more acceptance than it saves in draft cost, so there is no rise."
    limit = grid.vs_ratio("analytic_speedup", s)
    if not np.all(np.isnan(limit)):
        ia = int(np.nanargmax(limit))
        a1 += (" The dashed analytic limit, built from the same α and c, peaks at the same skip ratio." if ia == i
               else f" The dashed analytic limit, built from the same α and c, peaks at {ratios[ia]:.3f}.")

    th = np.array(grid.thresholds)
    acc_t, tps_t, d_t, sp_t = (grid.vs_threshold(m, s) for m in
                               ("acceptance_rate", "tokens_per_step", "drafted_per_step", "speedup"))
    j = int(np.nanargmax(sp_t))
    acc_dir, d_dir, tps_dir = (_direction(v[0], v[-1]) for v in (acc_t, d_t, tps_t))
    a2 = (f"At skip ratio {s.ratio:.3f}, raising the threshold from {th[0]:g} to {th[-1]:g}: "
          f"{_trend(acc_t[0], acc_t[-1], 'α')}")
    a2 += (", because the draft stops before the tokens it is unsure of. " if acc_dir > 0 else ". ")
    a2 += f"{_trend(d_t[0], d_t[-1], 'The number of drafted tokens per step')}"
    a2 += f" and {_trend(tps_t[0], tps_t[-1], 'the number of tokens per step')}"
    a2 += (", so each verify pass buys fewer tokens. " if tps_dir < 0 else ". ")
    a2 += f"The speedup is highest at threshold {th[j]:g} ({_fmt(sp_t[j])}×)"
    top_acc = np.nanmax(acc_t)
    if not math.isnan(acc_t[j]) and acc_t[j] >= top_acc - 0.01:
        a2 += ", which here is also where α is highest."
    else:
        a2 += (f", not where α is highest ({_fmt(top_acc)} at threshold {th[int(np.nanargmax(acc_t))]:g}; "
               f"{_fmt(acc_t[j])} at {th[j]:g}).")
    out = [
        {"question": "At what skip ratio does speedup peak, and why does it fall after?",
         "look_at": "top row: speedup vs skip ratio, beside α and the draft cost ratio c", "answer": a1},
        {"question": "Why does a higher threshold raise acceptance but not always speed?",
         "look_at": "bottom row: α, tokens and drafted tokens per step, and speedup vs threshold", "answer": a2},
    ]
    if other is not None:
        so = other.nearest(threshold=s.threshold, max_draft=s.max_draft, policy=s.policy)
        sp_o, acc_o = other.vs_ratio("speedup", so), other.vs_ratio("acceptance_rate", so)
        io = int(np.nanargmax(sp_o))
        a3 = (f"For {other.name!r} on the same slice, α is {_fmt(acc_o[0])} at skip ratio {other.ratios[0]:.3f} "
              f"(vs {_fmt(acc[0])} for {grid.name!r}) and {_fmt(acc_o[-1])} at {other.ratios[-1]:.3f}. Its best "
              f"speedup is {_fmt(sp_o[io])}× at {other.ratios[io]:.3f}, against {_fmt(sp[i])}× for {grid.name!r}. ")
        if acc_o[0] < acc[0] - 0.05:
            a3 += ("It was trained only as a full model, so removing even a few blocks changes its predictions: "
                   if other.name == "plain" else "")
            a3 += ("its α" if other.name == "plain" else "Its α") + " is lower from the first skipped blocks on. "
        shape = (f"its speedup rises to a peak at {other.ratios[io]:.3f} and falls again"
                 if 0 < io < len(other.ratios) - 1 else "its speedup only moves one way across the grid's skip ratios")
        if sp_o[io] <= 1.0:
            a3 += (f"On this slice {shape}, and it stays below 1: no skip ratio makes its drafts pay for themselves, "
                   f"so there is no hump above plain decoding.")
        elif 0 < io < len(other.ratios) - 1:
            a3 += (f"This grid does show a hump for it too: {shape}. Compare the heights: the acceptance a model keeps "
                   "at moderate skip ratios sets how high its peak can go.")
        else:
            a3 += f"On this slice {shape}, so there is no rise and fall inside the range."
        out.append({"question": f"Why is there no hump for the {other.name!r} model?",
                    "look_at": "the model toggle, or the side-by-side figure: α and speedup vs skip ratio",
                    "answer": a3})
    return out


# ---------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------
C_ACC, C_TPS, C_SPEED = "#1f77b4", "#2ca02c", "#9467bd"
C_AUX, C_ANALYTIC, C_CURRENT, C_LIVE = "#7f7f7f", "#222222", "#d62728", "#ff7f0e"
# (metric, legend name of the measured line, subplot title, y-axis title, colour)
PANELS = (("acceptance_rate", "acceptance rate α, measured (grid)", "α and draft cost c",
           "α (accepted / drafted), c (ratio)", C_ACC),
          ("tokens_per_step", "tokens per step, measured (grid)", "tokens per step",
           "tokens per step (tokens)", C_TPS),
          ("speedup", "speedup, measured (grid)", "speedup",
           "speedup (× vs plain loop)", C_SPEED))
AUX = {"acceptance_rate": ("c", "draft cost ratio c (draft / full step)"),
       "tokens_per_step": ("drafted_per_step", "drafted tokens per step d"),
       "speedup": ("analytic_speedup", "analytic limit (A+1)/(d·c+c_v)")}
# trace order in every panel: measured line, auxiliary line, current setting, live runs
_PER_PANEL = 4


def _trace_index(row: int, col: int, kind: int) -> int:
    return ((row * 3) + col) * _PER_PANEL + kind


def _live_matches(point: dict, setting: Setting, free: str) -> bool:
    keys = [k for k in ("ratio", "threshold", "max_draft", "policy") if k != free]
    return all(point[k] == getattr(setting, k) for k in keys)


def panel_xy(grid: PlaygroundGrid, setting: Setting, live: Sequence[dict] = ()) -> dict[int, tuple]:
    """x/y of every trace of :func:`playground_figure` for ``setting`` (by trace index)."""
    out = {}
    for row, (free, xs, get) in enumerate((("ratio", np.array(grid.ratios), grid.vs_ratio),
                                           ("threshold", np.array(grid.thresholds), grid.vs_threshold))):
        x_now = getattr(setting, free)
        k_now = int(np.argmin(np.abs(xs - x_now)))
        pts = [p for p in live if _live_matches(p, setting, free)]
        for col, (metric, *_) in enumerate(PANELS):
            y = get(metric, setting)
            aux = get(AUX[metric][0], setting)
            out[_trace_index(row, col, 0)] = (xs, y)
            out[_trace_index(row, col, 1)] = (xs, aux)
            out[_trace_index(row, col, 2)] = (np.array([x_now]), np.array([y[k_now]]))
            out[_trace_index(row, col, 3)] = (np.array([p[free] for p in pts], dtype=float),
                                              np.array([_nan(p.get(metric)) for p in pts], dtype=float))
    return out


def _title(grid: PlaygroundGrid, setting: Setting) -> str:
    cell = grid.cell(setting)
    return (f"{grid.name}: {setting.describe()} → speedup {_fmt(cell['speedup'])}× measured, "
            f"{_fmt(cell.get('analytic_speedup'))}× analytic")


def _ranges(grid: PlaygroundGrid) -> dict:
    sp = np.nanmax([grid._arrays["speedup"], grid._arrays["analytic_speedup"]])
    tps = np.nanmax([grid._arrays["tokens_per_step"], grid._arrays["drafted_per_step"]])
    c = np.nanmax(grid._arrays["c"]) if not np.all(np.isnan(grid._arrays["c"])) else 1.0
    return {"acceptance_rate": [0, max(1.05, 1.05 * float(c))], "tokens_per_step": [0, max(2.0, 1.08 * float(tps))],
            "speedup": [0, max(1.3, 1.1 * float(sp))]}


def playground_figure(grid: PlaygroundGrid, setting: Setting | None = None, live: Sequence[dict] = ()) -> go.Figure:
    """Acceptance, tokens per step and speedup against the skip ratio (top) and the threshold (bottom),
    the other knobs fixed at ``setting``, with the current setting starred, the analytic limit dashed
    and live runs as diamonds."""
    setting = setting or grid.nearest()
    xy = panel_xy(grid, setting, live)
    fig = make_subplots(rows=2, cols=3, horizontal_spacing=0.07, vertical_spacing=0.17,
                        subplot_titles=[f"{title} vs skip ratio" for _, _, title, _, _ in PANELS]
                        + [f"{title} vs threshold" for _, _, title, _, _ in PANELS])
    for row in range(2):
        for col, (metric, name, _, _, color) in enumerate(PANELS):
            first = row == 0
            traces = [
                go.Scatter(name=name, mode="lines+markers", legendgroup=metric, showlegend=first,
                           line=dict(color=color, width=2.5), marker=dict(size=7)),
                go.Scatter(name=AUX[metric][1], mode="lines+markers", legendgroup=f"aux-{metric}", showlegend=first,
                           line=dict(color=C_ANALYTIC if metric == "speedup" else C_AUX,
                                     dash="dash" if metric == "speedup" else "dot", width=1.8),
                           marker=dict(size=5)),
                go.Scatter(name="current setting", mode="markers", legendgroup="current",
                           showlegend=first and col == 0,
                           marker=dict(symbol="star", size=17, color=C_CURRENT, line=dict(color="black", width=1))),
                go.Scatter(name="live run on this machine", mode="markers", legendgroup="live",
                           showlegend=first and col == 0,
                           marker=dict(symbol="diamond", size=12, color=C_LIVE, line=dict(color="black", width=1))),
            ]
            for kind, trace in enumerate(traces):
                x, y = xy[_trace_index(row, col, kind)]
                trace.x, trace.y = x, y
                fig.add_trace(trace, row=row + 1, col=col + 1)
            if metric == "speedup":
                fig.add_hline(y=1.0, line=dict(color="black", width=1, dash="dot"), row=row + 1, col=col + 1,
                              annotation_text="plain decoding", annotation_position="bottom right",
                              annotation_font_size=10)
    ranges = _ranges(grid)
    for row in range(2):
        for col, (metric, _, _, y_title, _) in enumerate(PANELS):
            fig.update_yaxes(title_text=y_title, range=ranges[metric], row=row + 1, col=col + 1, title_font_size=11)
            fig.update_xaxes(title_text=("skip ratio (fraction of the 2L blocks skipped)" if row == 0 else
                                         "draft-exit threshold (adaptive: initial value; unitless)"),
                             row=row + 1, col=col + 1, title_font_size=11)
    fig.update_xaxes(range=[min(grid.ratios) - 0.04, max(grid.ratios) + 0.04], row=1)
    fig.update_xaxes(range=[min(grid.thresholds) - 0.05, max(grid.thresholds) + 0.05], row=2)
    fig.update_layout(title=dict(text=_title(grid, setting), font=dict(size=14)), template="plotly_white",
                      height=720, margin=dict(t=80, b=120, l=60, r=20),
                      legend=dict(orientation="h", y=-0.13, x=0, font=dict(size=11)))
    return fig


def heatmap_figure(grid: PlaygroundGrid, policy: str | None = None, max_draft: int | None = None) -> go.Figure:
    """Measured speedup over skip ratio × threshold for one policy and max draft; the best cell ringed."""
    s = grid.nearest(max_draft=max_draft, policy=policy)
    z = np.stack([grid.vs_ratio("speedup", replace(s, threshold=t)) for t in grid.thresholds])   # (T, R)
    text = [[_fmt(v) for v in row] for row in z]
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"{r:.3f}" for r in grid.ratios], y=[f"{t:g}" for t in grid.thresholds], text=text,
        texttemplate="%{text}", colorscale="RdBu", zmid=1.0, colorbar=dict(title="speedup (×)"),
        hovertemplate="skip ratio %{x}, threshold %{y}: %{z:.2f}×<extra></extra>"))
    ti, ri = np.unravel_index(int(np.nanargmax(z)), z.shape)
    fig.add_trace(go.Scatter(x=[f"{grid.ratios[ri]:.3f}"], y=[f"{grid.thresholds[ti]:g}"], mode="markers",
                             name="best on this slice", marker=dict(symbol="square-open", size=38, color="black",
                                                                    line=dict(width=3))))
    fig.update_layout(title=f"{grid.name}: measured speedup, {s.policy} policy, max draft {s.max_draft} "
                            f"(blue > 1 > red)", template="plotly_white", height=430,
                      xaxis_title="skip ratio (fraction of the 2L blocks skipped)",
                      yaxis_title="draft-exit threshold (unitless)", showlegend=False)
    return fig


def model_comparison_figure(grids: dict[str, PlaygroundGrid], setting: Setting | None = None) -> go.Figure:
    """Acceptance and speedup vs skip ratio for several models on the same policy slice."""
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("acceptance rate α vs skip ratio", "speedup vs skip ratio"))
    first = next(iter(grids.values()))
    s0 = setting or first.nearest()
    for i, (name, g) in enumerate(grids.items()):
        s = g.nearest(threshold=s0.threshold, max_draft=s0.max_draft, policy=s0.policy)
        for col, metric in enumerate(("acceptance_rate", "speedup")):
            fig.add_trace(go.Scatter(x=g.ratios, y=g.vs_ratio(metric, s), name=f"{name}: measured",
                                     legendgroup=name, showlegend=col == 0, mode="lines+markers",
                                     line=dict(color=colors[i % 4], width=2.5)), row=1, col=col + 1)
        fig.add_trace(go.Scatter(x=g.ratios, y=g.vs_ratio("analytic_speedup", s), name=f"{name}: analytic limit",
                                 legendgroup=name, mode="lines",
                                 line=dict(color=colors[i % 4], dash="dash", width=1.5)),
                      row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="black", width=1, dash="dot"), row=1, col=2,
                  annotation_text="plain decoding", annotation_position="bottom right")
    fig.update_yaxes(title_text="acceptance rate α (accepted / drafted)", range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(title_text="speedup (× vs plain loop)", rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text="skip ratio (fraction of the 2L blocks skipped)")
    fig.update_layout(title=f"{' vs '.join(grids)}: same decoding settings ({s0.policy} policy, threshold "
                            f"{s0.threshold:g}, max draft {s0.max_draft}), different training",
                      template="plotly_white", height=440, legend=dict(orientation="h", y=-0.2, x=0))
    return fig


# ---------------------------------------------------------------------------------------
# the widget
# ---------------------------------------------------------------------------------------
def _load_for_live(name: str):
    from .models import load_model

    return load_model(name)


class Playground:
    """Sliders over a precomputed grid; ``widget`` is the thing to display, ``update()`` refreshes.

    ``grids``: one :class:`PlaygroundGrid` or a dict name → grid (the model toggle's options).
    ``loader(name) -> (model, tokenizer)`` is used by "run live" (default :func:`labkit.load_model`;
    the grid's ``model`` field is the name passed).
    """

    def __init__(self, grids, *, model: str | None = None, loader: Callable | None = None,
                 live_prompts: int = 2, live_tokens: int = 48):
        import ipywidgets as widgets

        if isinstance(grids, PlaygroundGrid):
            grids = {grids.name: grids}
        if not grids:
            raise ValueError("Playground needs at least one grid")
        self.grids: dict[str, PlaygroundGrid] = dict(grids)
        self.loader = loader or _load_for_live
        self.live_prompts, self.live_tokens = live_prompts, live_tokens
        self.live: dict[str, list[dict]] = {name: [] for name in self.grids}
        self._loaded: dict[str, tuple] = {}
        self._hold = 0
        name = model if model is not None else next(iter(self.grids))
        if name not in self.grids:
            raise KeyError(f"no grid for model {name!r} (have: {', '.join(self.grids)})")
        grid = self.grids[name]
        start = grid.nearest()

        self.model_toggle = widgets.ToggleButtons(options=list(self.grids), value=name, description="model")
        self.ratio_slider = widgets.SelectionSlider(options=self._ratio_options(grid), value=start.ratio,
                                                    description="skip ratio", continuous_update=True,
                                                    layout=widgets.Layout(width="420px"))
        self.threshold_slider = widgets.SelectionSlider(options=self._threshold_options(grid), value=start.threshold,
                                                        description="threshold", continuous_update=True,
                                                        layout=widgets.Layout(width="420px"))
        self.max_draft_slider = widgets.SelectionSlider(options=[(str(k), k) for k in grid.max_drafts],
                                                        value=start.max_draft, description="max draft",
                                                        continuous_update=True, layout=widgets.Layout(width="300px"))
        self.policy_toggle = widgets.ToggleButtons(options=grid.policies, value=start.policy, description="policy")
        self.preset_buttons = {}
        for preset in presets(grid):
            button = widgets.Button(description=preset, layout=widgets.Layout(width="auto"))
            button.on_click(lambda _, p=preset: self.apply_preset(p))
            self.preset_buttons[preset] = button
        self.live_button = widgets.Button(description="run live", icon="play", button_style="warning",
                                          tooltip="re-measure the current setting on this machine "
                                                  f"({live_prompts} prompts × {live_tokens} tokens)")
        self.live_button.on_click(lambda _: self.run_live())
        self.readout = widgets.HTML()
        self.status = widgets.HTML()
        self.figure = as_widget(playground_figure(grid, start, self.live[name]))
        for control in (self.ratio_slider, self.threshold_slider, self.max_draft_slider, self.policy_toggle):
            control.observe(lambda _: self._changed(), names="value")
        self.model_toggle.observe(lambda _: self._model_changed(), names="value")
        self.widget = widgets.VBox([
            widgets.HBox([self.model_toggle, self.policy_toggle]),
            widgets.HBox([self.ratio_slider, self.threshold_slider, self.max_draft_slider]),
            widgets.HBox([widgets.HTML("<b>presets:</b>&nbsp;"), *self.preset_buttons.values(),
                          widgets.HTML("&nbsp;&nbsp;"), self.live_button]),
            self.readout, self.figure, self.status])
        self.update()

    # -- state ------------------------------------------------------------------------------
    @staticmethod
    def _ratio_options(grid: PlaygroundGrid):
        return [(f"{r:.3f}", r) for r in grid.ratios]

    @staticmethod
    def _threshold_options(grid: PlaygroundGrid):
        return [(f"{t:g}", t) for t in grid.thresholds]

    @property
    def model_name(self) -> str:
        return self.model_toggle.value

    @property
    def grid(self) -> PlaygroundGrid:
        return self.grids[self.model_name]

    @property
    def setting(self) -> Setting:
        return Setting(self.ratio_slider.value, self.threshold_slider.value, self.max_draft_slider.value,
                       self.policy_toggle.value)

    def set(self, setting: Setting) -> None:
        """Move every slider to ``setting`` (snapped to the grid), refreshing once."""
        s = self.grid.nearest(setting.ratio, setting.threshold, setting.max_draft, setting.policy)
        self._hold += 1
        try:
            self.ratio_slider.value, self.threshold_slider.value = s.ratio, s.threshold
            self.max_draft_slider.value, self.policy_toggle.value = s.max_draft, s.policy
        finally:
            self._hold -= 1
        self.update()

    def apply_preset(self, name: str) -> Setting:
        table = presets(self.grid)
        if name not in table:
            raise KeyError(f"unknown preset {name!r} (have: {', '.join(table)})")
        self.set(table[name])
        self.status.value = f"preset <b>{html.escape(name)}</b>: {html.escape(self.setting.describe())}"
        return self.setting

    def _changed(self) -> None:
        if not self._hold:
            self.update()

    def _model_changed(self) -> None:
        """Swap the grid: slider options of the new model, the nearest setting, axis ranges."""
        old = self.setting
        grid = self.grid
        s = grid.nearest(old.ratio, old.threshold, old.max_draft, old.policy)
        self._hold += 1
        try:
            self.ratio_slider.options = self._ratio_options(grid)
            self.threshold_slider.options = self._threshold_options(grid)
            self.max_draft_slider.options = [(str(k), k) for k in grid.max_drafts]
            self.policy_toggle.options = grid.policies
            self.ratio_slider.value, self.threshold_slider.value = s.ratio, s.threshold
            self.max_draft_slider.value, self.policy_toggle.value = s.max_draft, s.policy
        finally:
            self._hold -= 1
        ranges = _ranges(grid)
        with self.figure.batch_update():
            for row in range(2):
                for col, (metric, *_) in enumerate(PANELS):
                    axis = row * 3 + col + 1
                    getattr(self.figure.layout, f"yaxis{'' if axis == 1 else axis}").range = ranges[metric]
                    getattr(self.figure.layout, f"xaxis{'' if axis == 1 else axis}").range = (
                        [min(grid.ratios) - 0.04, max(grid.ratios) + 0.04] if row == 0 else
                        [min(grid.thresholds) - 0.05, max(grid.thresholds) + 0.05])
        self.update()

    # -- refresh ----------------------------------------------------------------------------
    def update(self) -> None:
        """Copy the current slice of the grid (and matching live points) into the FigureWidget."""
        grid, s = self.grid, self.setting
        xy = panel_xy(grid, s, self.live[self.model_name])
        update_widget(self.figure, {index: {"x": x, "y": y} for index, (x, y) in xy.items()},
                      layout={"title.text": _title(grid, s)})
        self.readout.value = self._readout_html(grid, s)

    def _readout_html(self, grid: PlaygroundGrid, s: Setting) -> str:
        cell = grid.cell(s)
        skip = grid.skip_set(s.ratio)
        entry = grid.ratio_entry(s.ratio)
        moved = ""
        if s.policy == "adaptive" and cell.get("final_threshold") is not None:
            moved = f"; the adaptive threshold moved {s.threshold:g} → {_fmt(cell['final_threshold'])}"
        same = {True: "yes", False: "NO", None: "n/a"}[cell.get("identical_to_plain")]
        live = [p for p in self.live[self.model_name] if all(p[k] == getattr(s, k) for k in
                                                             ("ratio", "threshold", "max_draft", "policy"))]
        live_txt = ""
        if live:
            p = live[-1]
            live_txt = (f"<br><b>live run</b> ({p['n_prompts']} prompts × {p['max_new_tokens']} tokens, "
                        f"{p['measured_at']}): speedup {_fmt(p['speedup'])}× = {_fmt(p['vs_grid'])} × the grid's, "
                        f"α {_fmt(p['acceptance_rate'])}, {_fmt(p['tokens_per_step'])} tokens/step")
        return (f"<b>{html.escape(grid.name)}</b>, {html.escape(s.describe())}<br>"
                f"skip set ({entry['n_skipped']} of {2 * grid.data['n_layers']} blocks, bucket "
                f"[{entry['bucket'][0]:g}, {entry['bucket'][1]:g})): {html.escape(str(skip))}<br>"
                f"α = <b>{_fmt(cell['acceptance_rate'])}</b>, <b>{_fmt(cell['tokens_per_step'])}</b> tokens per step "
                f"({_fmt(cell['drafted_per_step'])} drafted), <b>{_fmt(cell['ms_per_token'])}</b> ms/token vs "
                f"{_fmt(cell['plain_ms_per_token'])} for the plain loop → speedup <b>{_fmt(cell['speedup'])}×</b> "
                f"(analytic limit {_fmt(cell.get('analytic_speedup'))}× with c = {_fmt(cell.get('c'), '.3f')}, "
                f"c_v = {_fmt(cell.get('c_v'), '.2f')}; forward passes only: "
                f"{_fmt(cell.get('analytic_speedup_forward'))}×){moved}; output identical to plain decoding: {same}"
                f"{live_txt}")

    def measure_update_ms(self) -> float:
        """Median ms of a slider move (observer + refresh) over every option of every slider."""
        times, start = [], self.setting
        for slider in (self.ratio_slider, self.threshold_slider, self.max_draft_slider, self.policy_toggle):
            values = [o[1] if isinstance(o, tuple) else o for o in slider.options]
            original = slider.value
            for v in [*values, original]:
                t0 = time.perf_counter()
                if slider.value == v:
                    self.update()
                else:
                    slider.value = v
                times.append((time.perf_counter() - t0) * 1000)
        self.set(start)
        return float(np.median(times))

    # -- live -------------------------------------------------------------------------------
    def run_live(self) -> dict:
        """Re-measure the current setting on this machine and add it to the plots; returns the point."""
        name, grid, s = self.model_name, self.grid, self.setting
        self.live_button.disabled = True
        self.status.value = f"measuring {html.escape(s.describe())} live…"
        try:
            if name not in self._loaded:
                self._loaded[name] = self.loader(grid.data["model"])
            model, tokenizer = self._loaded[name]
            with torch.inference_mode():
                point = measure_live(model, tokenizer, grid.skip_set(s.ratio), s,
                                     grid.prompt_texts[: self.live_prompts], max_new_tokens=self.live_tokens,
                                     cost_model=grid.cost_model)
        except Exception as err:
            self.status.value = f"<span style='color:#d62728'>live run failed: {html.escape(repr(err))}</span>"
            raise
        finally:
            self.live_button.disabled = False
        cell = grid.cell(s)
        point["grid_speedup"] = cell["speedup"]
        point["vs_grid"] = point["speedup"] / cell["speedup"] if cell.get("speedup") else float("nan")
        self.live[name].append(point)
        self.update()
        self.status.value = (f"live: speedup {_fmt(point['speedup'])}× on this machine vs {_fmt(cell['speedup'])}× "
                             f"in the grid ({_fmt(point['vs_grid'])}×) in {point['seconds']:.1f} s")
        return point


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m labkit.playground",
        description="Measure the skip-ratio × threshold grid of notebook 04 and save it as JSON "
                    "(default: data/playground/<model>.json).")
    p.add_argument("--model", default="default", help="shipped model name or a Hugging Face model folder")
    p.add_argument("--out", default=None, help="JSON path (default: data/playground/<model>.json)")
    p.add_argument("--search-dir", default=None, help="folder of the search results (default: data/search)")
    p.add_argument("--thresholds", type=float, nargs="+", default=list(DEFAULT_THRESHOLDS))
    p.add_argument("--max-drafts", type=int, nargs="+", default=list(DEFAULT_MAX_DRAFTS))
    p.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    p.add_argument("--n-prompts", type=int, default=GridConfig.n_prompts)
    p.add_argument("--max-new-tokens", type=int, default=GridConfig.max_new_tokens)
    p.add_argument("--prompt-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=0, help="order of the cells inside a block")
    p.add_argument("--max-ratio", type=float, default=1.0, help="leave out searched skip sets above this ratio")
    p.add_argument("--plain-every", type=int, default=GridConfig.plain_every,
                   help="a plain-loop run after every this many speculative runs (the cells' baselines)")
    p.add_argument("--cost-model-repeats", type=int, default=GridConfig.cost_model_repeats,
                   help="repeats of the cost-model timings (0: analytic limit from the trace timings)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    return p


def main(argv: Sequence[str] | None = None) -> Path:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    from .models import load_model

    cfg = GridConfig(thresholds=tuple(args.thresholds), max_drafts=tuple(args.max_drafts),
                     policies=tuple(args.policies), n_prompts=args.n_prompts, max_new_tokens=args.max_new_tokens,
                     prompt_seed=args.prompt_seed, seed=args.seed, plain_every=args.plain_every,
                     max_ratio=args.max_ratio,
                     cost_model_repeats=args.cost_model_repeats)
    model, tokenizer = load_model(args.model)
    command = "python -m labkit.playground " + " ".join(shlex.quote(a) for a in argv)
    grid = compute_grid(model, tokenizer, model_name=args.model, config=cfg, search_dir=args.search_dir,
                        command=command.strip())
    out = save_grid(grid, args.out or grid_path(args.model))
    g = PlaygroundGrid(grid, name=args.model)
    best_setting, best = g.best()
    print(g.describe())
    print(f"best cell: {best_setting.describe()}: speedup {best['speedup']:.2f}x "
          f"(analytic {_fmt(best.get('analytic_speedup'))}x)")
    print(f"saved {out} ({grid['seconds']:.0f} s)")
    return out


if __name__ == "__main__":
    main()
