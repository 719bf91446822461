"""The playground's grid (notebook 04): every setting measured beforehand, so a slider answers in milliseconds.

    python -m labkit grid --model default      # writes data/playground/default.json

Axes: the skip ratio (one skip set per 0.125-wide ratio bucket: the searched best there,
:func:`labkit.artifacts.results.skip_sets_by_bucket`), the draft-exit threshold (static, or the *initial*
threshold of :class:`~labkit.core.policies.AdaptiveThreshold`), the maximum draft length γ, the policy, and
the draft weights: "fp32" (the model's own) or "int8" (the self-draft reads int8 copies of the linear weights,
``speculative_generate(..., draft_weights="int8")``; verification keeps the model's own, so the output is the same).
Each cell holds, over a few benchmark prompts (greedy, a fixed number of new tokens, EOS ignored; notation:
docs/notation.md): accepted / drafted, tokens per step, d = drafted per step, ms per token, and the speedup
against the plain-loop runs just before and after the cell's chunk of ``plain_every`` runs (the same two plain
runs serve the whole chunk), as the median over ``repeats`` repetitions with their min-max (the noise a reader
needs before ranking two cells); c and c_v (draft ms per drafted token and verify ms per step,
relative to the plain loop's ms per token) from the decoder's own phase timings, and the analytic limit
(A + 1)/(d·c + c_v); the same limit from forward passes only (``*_forward``, from a
:class:`~labkit.measure.costs.costmodel.CostModel` measured at the start: ``cost_model`` for the fp32 cells,
``cost_model_int8``, whose draft costs were timed with int8 weights, for the int8 ones). The file also records
the machine, the date, the command and the prompts.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ...artifacts import arguments
from ...artifacts.models import load_model, model_key
from ...artifacts.prompts import benchmark_prompts, showcase_prompt
from ...artifacts.results import bucket_index, ratio_buckets, skip_sets_by_bucket
from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.skip import SkipSet
from ..costs.costmodel import CostModel, measure_cost_model
from ..harness import Stopwatch
from ..machine import machine_info
from .cells import CellStats as _CellStats
from .cells import cell_row as _cell_row
from .cells import cell_timing as _timing
from .results import (
    DEFAULT_MAX_DRAFTS,
    DEFAULT_THRESHOLDS,
    DRAFT_WEIGHTS,
    FORMAT,
    OLDER_FORMAT,
    PAPER,
    POLICIES,
    PlaygroundGrid,
    Setting,
    draft_weights_arg,
    grid_path,
    load_grid,
    make_policy,
    regenerate_command,
)

# the reader's names (grid_results) stay importable from here, where the grid's tests and scripts look for them
__all__ = [
    "DEFAULT_THRESHOLDS", "DEFAULT_MAX_DRAFTS", "POLICIES", "DRAFT_WEIGHTS", "PAPER", "FORMAT", "OLDER_FORMAT",
    "GridConfig", "Setting", "PlaygroundGrid", "make_policy", "draft_weights_arg", "compute_grid", "save_grid",
    "load_grid", "grid_path", "regenerate_command", "measure_live", "main",
]


@dataclass
class GridConfig:
    """What :func:`compute_grid` measures; the defaults are sized for one model in ≤ about 17 min on 2 CPU cores.

    Why these defaults: the grid's time is its runs, about 0.23 s each for ``default`` at 48 tokens on the lab's
    2-core VM (format 2: 8 skip sets x 36 settings x 2 prompts x 3 repetitions = 1,728 speculative runs and 624
    plain ones in 535 s). The draft-weights axis doubles the settings; with six thresholds that would be 72
    settings, 3,456 + 1,200 runs, about 1,060 s (18 min). Five thresholds give 60 settings, 2,880 + 1,008 runs:
    about 880 s (15 min) for ``default`` and 900 s for ``plain`` (7 skip sets, slower runs); int8 runs cost no more
    than fp32 ones, and the second cost model adds seconds. The threshold left out is 0.9: in both format-2 grids
    its median speedup over the cells was within 1 % of 0.8's, so it showed little the slider does not show at
    0.8. The repetitions, prompts and tokens stay as they were: they set the noise every comparison in notebook 04
    is held against.
    """

    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS
    max_drafts: tuple[int, ...] = DEFAULT_MAX_DRAFTS
    policies: tuple[str, ...] = POLICIES
    draft_weights: tuple[str, ...] = DRAFT_WEIGHTS   # "fp32": the model's own weights; "int8": int8 draft copies
    n_prompts: int = 2
    max_new_tokens: int = 48
    repeats: int = 3                    # every cell runs this many times: its speedup's min-max is the noise
    showcase_model: str | None = "default"   # first prompt: this model's showcase prompt (None: benchmark order)
    prompt_seed: int = 0
    seed: int = 0                       # order of the cells inside a block
    plain_every: int = 3                # a plain-loop run after every this many speculative runs (a chunk)
    max_ratio: float = 1.0              # leave out searched skip sets above this skip ratio
    cost_model_repeats: int = 5         # 0: no cost model; the analytic limit then uses the trace timings
    cost_model_sets: int | None = None  # random skip sets of the cost-model regression (default 4L + 8)

    def __post_init__(self) -> None:
        self.thresholds = tuple(float(t) for t in self.thresholds)
        self.max_drafts = tuple(int(k) for k in self.max_drafts)
        self.policies = tuple(self.policies)
        self.draft_weights = tuple(self.draft_weights)
        for t in self.thresholds:
            if not 0.0 <= t <= 1.0:
                raise ValueError(f"thresholds must lie in [0, 1], got {t}")
        if any(k < 1 for k in self.max_drafts):
            raise ValueError(f"max_drafts must be >= 1, got {self.max_drafts}")
        if not self.thresholds or not self.max_drafts or not self.policies or not self.draft_weights:
            raise ValueError("thresholds, max_drafts, policies and draft_weights must not be empty")
        for p in self.policies:
            if p not in POLICIES:
                raise ValueError(f"policies must be among {POLICIES}, got {p!r}")
        for w in self.draft_weights:
            if w not in DRAFT_WEIGHTS:
                raise ValueError(f"draft_weights must be among {DRAFT_WEIGHTS}, got {w!r}")
        if len(set(self.draft_weights)) != len(self.draft_weights):
            raise ValueError(f"draft_weights lists a value twice: {self.draft_weights}")
        if self.n_prompts < 1 or self.max_new_tokens < 2 or self.plain_every < 1 or self.repeats < 1:
            raise ValueError("n_prompts, plain_every and repeats must be >= 1, max_new_tokens >= 2")


def _rounded(value, digits: int = 5):
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return float(f"{value:.{digits}g}")
    return value


def _grid_entries(model_name, n_layers: int, cfg: GridConfig, skip_sets, search_dir) -> tuple[list[dict], str]:
    """The skip sets of the grid's ratio axis, by ratio, and where they came from."""
    if skip_sets is None:
        entries = [e for e in skip_sets_by_bucket(model_name, n_layers, search_dir=search_dir)
                   if e["ratio"] <= cfg.max_ratio + 1e-9]
        if not entries:
            raise ValueError(f"no searched skip set of {model_name!r} has a skip ratio <= {cfg.max_ratio}")
        return entries, ("labkit.best_skip_set "
                         "(search results: the skip set of the best draft per 0.125-wide ratio bucket)")
    entries = [{"bucket": list(ratio_buckets()[bucket_index(s.ratio(n_layers))]), "ratio": s.ratio(n_layers),
                "n_skipped": s.n_skipped, "skip": s.to_dict()} for s in skip_sets]
    return sorted(entries, key=lambda e: e["ratio"]), "given skip sets"


def _default_prompts(model, model_name, tokenizer, cfg: GridConfig) -> list[dict]:
    """The showcase prompt chosen by ``cfg.showcase_model``'s greedy text (novel text, by a rule; the same for
    every model's grid), then the benchmark prompts in order (unselected: they show what is typical)."""
    bench = [{"source": p.source, "text": p.text, "why": "benchmark order"}
             for p in benchmark_prompts(cfg.n_prompts, seed=cfg.prompt_seed)]
    if not cfg.showcase_model:
        return bench
    same = model_key(model_name) == model_key(cfg.showcase_model)
    chooser, chooser_tokenizer = (model, tokenizer) if same else load_model(cfg.showcase_model)
    found = showcase_prompt(chooser, chooser_tokenizer, seed=cfg.prompt_seed)
    first = {"source": found.prompt.source, "text": found.prompt.text,
             "why": f"showcase ({found.rule}, greedy text of {cfg.showcase_model!r})"}
    return ([first] + [p for p in bench if p["text"] != first["text"]])[: cfg.n_prompts]


def _grid_prompts(model, model_name, tokenizer, cfg: GridConfig, prompt_texts) -> tuple[list[dict], list]:
    """Default: :func:`_default_prompts` (never the prompts the skip sets were chosen on)."""
    if prompt_texts is None:
        info = _default_prompts(model, model_name, tokenizer, cfg)
    else:
        info = [{"source": f"given prompt {i}", "text": t} for i, t in enumerate(prompt_texts[: cfg.n_prompts])]
    ids = [tokenizer(p["text"], return_tensors="pt", add_special_tokens=False)["input_ids"] for p in info]
    for p, x in zip(info, ids):
        p["n_tokens"] = int(x.shape[1])
    return info, ids


class _GridRunner:
    """Runs the cells of one skip set (a block), interleaved with plain-loop runs (see :func:`compute_grid`).
    ``settings``: (threshold, max draft, policy, draft weights) tuples; ``cost_models``: by draft weights."""

    def __init__(self, model, cfg: GridConfig, settings: list[tuple], cost_models: dict, bar):
        self.model, self.cfg, self.settings, self.cost_models, self.bar = model, cfg, settings, cost_models, bar
        self.rng = random.Random(cfg.seed)

    def spec(self, ids, skip, policy, weights: str = "fp32", n=None):
        return speculative_generate(self.model, ids, skip=skip, policy=policy,
                                    max_new_tokens=n or self.cfg.max_new_tokens, eos_token_id=[],
                                    draft_weights=draft_weights_arg(weights))

    def plain(self, ids, n=None):
        return autoregressive_generate(self.model, ids, n or self.cfg.max_new_tokens, eos_token_id=[])

    def one_prompt(self, ids, skip, policies: dict, stats: dict) -> list[float]:
        """The cells in a shuffled order (fp32 and int8 ones mixed), in chunks of ``plain_every`` with a plain run
        before and after each chunk; a chunk's runs are timed against the mean of those two plain runs (the load a
        few seconds apart is alike, the load minutes apart is not). Returns the plain runs' ms per token."""
        order = list(self.settings)
        self.rng.shuffle(order)
        previous = self.plain(ids)
        plain_ms = [previous.ms_per_token]
        for i in range(0, len(order), self.cfg.plain_every):
            results = []
            for s in order[i: i + self.cfg.plain_every]:
                results.append((s, self.spec(ids, skip, policies[s], s[3])))
                self.bar.update()
            following = self.plain(ids)
            local = 0.5 * (previous.ms_per_token + following.ms_per_token)
            for s, result in results:
                stats[s].add(result, previous.sequences, self.cost_models.get(s[3]), plain_ms=local)
            plain_ms.append(following.ms_per_token)
            previous = following
        return plain_ms

    def skip_set(self, entry: dict, prompt_ids) -> tuple[list[dict], dict]:
        """The cells of one skip set (rows) and its ratio-axis entry. Each repetition runs every cell once
        per prompt with a fresh policy (an adaptive one carries its state from prompt to prompt)."""
        skip = SkipSet.from_dict(entry["skip"])
        c_forward = {w: cm.draft_cost_ratio(skip) for w, cm in self.cost_models.items()}
        rounds = {s: [] for s in self.settings}
        plain_ms: list[list[float]] = [[] for _ in prompt_ids]
        for _ in range(self.cfg.repeats):
            policies = {s: make_policy(s[2], s[0], s[1]) for s in self.settings}
            stats = {s: _CellStats() for s in self.settings}
            for p, ids in enumerate(prompt_ids):
                plain_ms[p] += self.one_prompt(ids, skip, policies, stats)
            for s in self.settings:
                rounds[s].append(stats[s])
        baseline = [statistics.median(runs) for runs in plain_ms]
        cells = [_cell_row(Setting(entry["ratio"], *s), rounds[s], c_forward.get(s[3]), self.cost_models.get(s[3]))
                 for s in self.settings]
        every = [m for runs in plain_ms for m in runs]
        ratio_row = {**entry, "plain_ms_per_token": statistics.fmean(baseline),
                     "plain_ms_per_token_by_prompt": baseline, "plain_ms_min": min(every), "plain_ms_max": max(every),
                     "plain_runs": len(every),
                     "c_forward": c_forward.get("fp32"), "c_forward_int8": c_forward.get("int8")}
        return cells, ratio_row


def _grid_cost_models(model, model_name, cfg: GridConfig, prompt_info: list[dict]) -> dict[str, CostModel]:
    """One cost model per draft weights of the grid (none with ``cost_model_repeats`` 0): the int8 one times its
    drafts with int8 weights, its full step and verifies with the model's own, as an int8 cell runs them."""
    if cfg.cost_model_repeats <= 0:
        return {}
    context = int(statistics.fmean(p["n_tokens"] for p in prompt_info) + cfg.max_new_tokens // 2)
    return {w: measure_cost_model(model, context=context, repeats=cfg.cost_model_repeats,
                                  max_draft=max(max(cfg.max_drafts), 1), n_sets=cfg.cost_model_sets,
                                  model_name=str(model_name), draft_weights=draft_weights_arg(w))
            for w in cfg.draft_weights}


def compute_grid(model, tokenizer, *, model_name: str, config: GridConfig | None = None,
                 skip_sets: Sequence[SkipSet] | None = None, search_dir=None, prompt_texts: Sequence[str] | None = None,
                 command: str | None = None, progress: bool = True) -> dict:
    """Measure the playground grid of ``model`` on this machine; returns the JSON-able grid.

    ``skip_sets``: the sets to use (default: the searched best set of every ratio bucket).
    ``prompt_texts``: default the showcase prompt (novel text, chosen by a rule) and the first benchmark
    prompts (typical text; neither kind is among the prompts the skip sets were chosen on). Skip set by skip
    set, ``repeats`` times, and prompt by prompt, the cells run in a shuffled order, in chunks of ``plain_every``
    with a plain-loop run before and after each chunk; a chunk's runs are compared with the mean of those two
    plain runs (on a shared machine the load changes over minutes, so only runs seconds apart see the same
    load). Each cell's speedup is the median over repetitions, with their min-max as its noise. The draft
    weights are one more axis of the settings, so fp32 and int8 cells of a skip set share its plain runs.
    """
    cfg = config or GridConfig()
    clock = Stopwatch()
    entries, source = _grid_entries(model_name, int(model.config.num_hidden_layers), cfg, skip_sets, search_dir)
    prompt_info, prompt_ids = _grid_prompts(model, model_name, tokenizer, cfg, prompt_texts)
    cost_models = _grid_cost_models(model, model_name, cfg, prompt_info)
    settings = [(t, k, p, w) for w in cfg.draft_weights for p in cfg.policies for k in cfg.max_drafts
                for t in cfg.thresholds]
    bar = tqdm(total=len(entries) * cfg.repeats * len(prompt_ids) * len(settings),
               desc=f"playground grid ({model_name})", unit="run", disable=not progress, dynamic_ncols=True)
    runner = _GridRunner(model, cfg, settings, cost_models, bar)
    runner.plain(prompt_ids[0], min(16, cfg.max_new_tokens))                   # warm-up, not timed
    for p in cfg.policies:                            # (the first int8 run also builds the int8 copies)
        for w in cfg.draft_weights:
            runner.spec(prompt_ids[0], SkipSet.from_dict(entries[len(entries) // 2]["skip"]), make_policy(p, 0.6, 4),
                        w, min(16, cfg.max_new_tokens))
    cells, ratio_rows = [], []
    for entry in entries:
        rows, ratio_row = runner.skip_set(entry, prompt_ids)
        cells += rows
        ratio_rows.append(ratio_row)
    bar.close()
    return _grid_payload(model, model_name, cfg, source, prompt_info, (ratio_rows, cells), cost_models,
                         (command, clock.seconds))


def _grid_payload(model, model_name, cfg, source, prompt_info, runs: tuple[list, list], cost_models: dict,
                  provenance: tuple[str | None, float]) -> dict:
    """The grid's JSON: ``runs`` = (one row per skip set, one per cell), ``provenance`` = (command, seconds)."""
    (ratio_rows, cells), (command, seconds) = runs, provenance
    adaptive = make_policy("adaptive", 0.6, 12)
    return {
        "format": FORMAT, "model": str(model_name), "n_layers": int(model.config.num_hidden_layers),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine_info(),
        "command": command or regenerate_command(model_name), "seconds": round(seconds, 1),
        "settings": {**asdict(cfg), "skip_set_source": source, "decoding": "greedy, EOS ignored",
                     "timing": "wall clock of whole calls (prefill included) / new tokens",
                     "adaptive_policy": {k: getattr(adaptive, k) for k in ("beta1", "target", "epsilon", "beta2")}},
        "prompts": prompt_info,
        "noise": _noise_summary(ratio_rows, cells),
        "ratios": [{k: _rounded(v) for k, v in r.items()} for r in ratio_rows],
        "cost_model": cost_models["fp32"].to_dict() if "fp32" in cost_models else None,
        "cost_model_int8": cost_models["int8"].to_dict() if "int8" in cost_models else None,
        "columns": list(cells[0]),
        "cells": [{k: _rounded(v) for k, v in c.items()} for c in cells],
    }


def _noise_summary(ratio_rows: list[dict], cells: list[dict]) -> dict:
    """How noisy the grid is: the median relative min-max width of a cell's speedup over repetitions, and how
    far the blocks' plain baselines are apart (machine drift over the run)."""
    widths = [(c["speedup_max"] - c["speedup_min"]) / c["speedup"] for c in cells
              if c["speedup"] and not math.isnan(c["speedup"])]
    baselines = [r["plain_ms_per_token"] for r in ratio_rows]
    return {"median_relative_spread": statistics.median(widths) if widths else None,
            "baseline_ms_min": min(baselines), "baseline_ms_max": max(baselines)}


def save_grid(grid: dict, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(grid, indent=1))
    return path


def measure_live(model, tokenizer, skip: SkipSet, setting: Setting, prompt_texts: Sequence[str], *,
                 max_new_tokens: int = 48, cost_model=None) -> dict:
    """Re-measure one setting on this machine: for each prompt the plain loop, the speculative run (with the
    setting's draft weights), the plain loop again (interleaved, after one untimed warm-up of each); greedy,
    EOS ignored. ``cost_model``: the one measured with the setting's draft weights
    (:meth:`PlaygroundGrid.cost_model_for`), or None.

    The speedup uses the mean of the two plain runs of each prompt; ``speedup_min`` / ``speedup_max`` use
    the faster and the slower of them: how much the answer moves with the plain loop's own noise."""
    clock = Stopwatch()
    ids_list = [tokenizer(t, return_tensors="pt", add_special_tokens=False)["input_ids"] for t in prompt_texts]
    weights = draft_weights_arg(setting.draft_weights)

    def spec(ids, n, policy):
        return speculative_generate(model, ids, skip=skip, policy=policy, max_new_tokens=n, eos_token_id=[],
                                    draft_weights=weights)
    warm = min(8, max_new_tokens)
    autoregressive_generate(model, ids_list[0], warm, eos_token_id=[])
    spec(ids_list[0], warm, make_policy(setting.policy, setting.threshold, setting.max_draft))
    policy = make_policy(setting.policy, setting.threshold, setting.max_draft)   # one policy over the prompts
    st = _CellStats()
    plain_pairs = []
    for ids in ids_list:
        before = autoregressive_generate(model, ids, max_new_tokens, eos_token_id=[])
        st.add(spec(ids, max_new_tokens, policy), before.sequences, cost_model, plain_ms=before.ms_per_token)
        after = autoregressive_generate(model, ids, max_new_tokens, eos_token_id=[])
        plain_pairs.append((before.ms_per_token, after.ms_per_token))
    c_forward = cost_model.draft_cost_ratio(skip) if cost_model is not None else None
    st.plain_ms_by_prompt = [statistics.fmean(pair) for pair in plain_pairs]
    row = _cell_row(setting, [st], c_forward, cost_model)
    row["speedup_min"] = _timing(st, [min(pair) for pair in plain_pairs])["speedup"]
    row["speedup_max"] = _timing(st, [max(pair) for pair in plain_pairs])["speedup"]
    row["n_prompts"], row["max_new_tokens"] = len(ids_list), max_new_tokens
    row["seconds"] = clock.seconds
    row["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return row


def _showcase_model(text: str) -> str:
    """--showcase-model: a model to read, or 'none'."""
    return text if text == "none" else arguments.model(text)


def _parser() -> argparse.ArgumentParser:
    p = arguments.command_parser(
        "Measure the skip-ratio × threshold grid of notebook 04 and save it as JSON "
        "(default: data/playground/<model>.json).")
    p.add_argument("--model", type=arguments.model, default="default",
                   help="shipped model name or a Hugging Face model folder")
    p.add_argument("--out", type=arguments.output_file, default=None,
                   help="JSON path (default: data/playground/<model>.json)")
    p.add_argument("--search-dir", type=arguments.existing_folder, default=None,
                   help="folder of the search results (default: data/search)")
    p.add_argument("--thresholds", type=arguments.fraction, nargs="+", default=list(DEFAULT_THRESHOLDS))
    p.add_argument("--max-drafts", type=arguments.count, nargs="+", default=list(DEFAULT_MAX_DRAFTS))
    p.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    p.add_argument("--draft-weights", nargs="+", default=list(DRAFT_WEIGHTS), choices=DRAFT_WEIGHTS,
                   help="the self-draft's weights: fp32 (the model's own) and/or int8 copies")
    p.add_argument("--n-prompts", type=arguments.count, default=GridConfig.n_prompts)
    p.add_argument("--max-new-tokens", type=arguments.at_least(2), default=GridConfig.max_new_tokens)
    p.add_argument("--prompt-seed", type=arguments.natural, default=0)
    p.add_argument("--seed", type=arguments.natural, default=0, help="order of the cells inside a block")
    p.add_argument("--max-ratio", type=arguments.fraction, default=1.0,
                   help="leave out searched skip sets above this ratio")
    p.add_argument("--showcase-model", type=_showcase_model, default=GridConfig.showcase_model,
                   help="the first prompt is this model's showcase prompt (novel text); 'none': benchmark order only")
    p.add_argument("--repeats", type=arguments.count, default=GridConfig.repeats,
                   help="runs of every cell (the min-max over them is the noise shown as error bars)")
    p.add_argument("--plain-every", type=arguments.count, default=GridConfig.plain_every,
                   help="a plain-loop run after every this many speculative runs (a chunk's baseline)")
    p.add_argument("--cost-model-repeats", type=arguments.natural, default=GridConfig.cost_model_repeats,
                   help="repeats of the cost-model timings (0: analytic limit from the trace timings)")
    p.add_argument("--threads", type=arguments.count, default=1, help="torch threads (default 1)")
    p.add_argument("--device", type=arguments.device, default=None,
                   help="where the model runs: cpu (default), cuda, cuda:N, mps or auto")
    p.add_argument("--dtype", type=arguments.dtype, default=None, help="its precision: fp32 (default), bf16 or fp16")
    return p


def main(argv: Sequence[str] | None = None) -> Path:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = arguments.checked(
        parser, GridConfig, thresholds=tuple(args.thresholds), max_drafts=tuple(args.max_drafts),
        policies=tuple(args.policies), draft_weights=tuple(args.draft_weights), n_prompts=args.n_prompts,
        max_new_tokens=args.max_new_tokens, prompt_seed=args.prompt_seed, seed=args.seed,
        plain_every=args.plain_every, repeats=args.repeats,
        showcase_model=None if args.showcase_model in (None, "none") else args.showcase_model,
        max_ratio=args.max_ratio, cost_model_repeats=args.cost_model_repeats)
    model, tokenizer = load_model(args.model, device=args.device, dtype=args.dtype)
    command = "python -m labkit grid " + " ".join(shlex.quote(a) for a in argv)
    grid = compute_grid(model, tokenizer, model_name=args.model, config=cfg, search_dir=args.search_dir,
                        command=command.strip())
    out = save_grid(grid, args.out or grid_path(args.model))
    g = PlaygroundGrid(grid, name=args.model)
    print(g.describe())
    for weights in g.draft_weights:
        best_setting, best = g.best(weights)
        print(f"best {weights} cell: {best_setting.describe()}: speedup {best['speedup']:.2f}x "
              f"(min-max {best['speedup_min']:.2f}-{best['speedup_max']:.2f}; analytic "
              f"{best.get('analytic_speedup') or float('nan'):.2f}x); {len(g.within_noise(best_setting))} other "
              f"{weights} cells within its noise")
    print(f"saved {out} ({grid['seconds']:.0f} s)")
    return out


if __name__ == "__main__":
    main()
