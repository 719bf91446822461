"""Side-by-side wall-clock benchmark: self-speculative decoding vs plain decoding vs transformers' built-ins.

    python -m labkit.bench            # default size (about 10 minutes on 2 CPU cores)
    python -m labkit.bench --quick    # about a minute: for tests and notebooks

Everything runs in one process, warm, batch 1, one thread by default, *interleaved*: for each
repetition and each prompt, every method runs once in turn (A B C ... A B C ...), so a slow
patch of the shared machine hits all methods alike. For each method: ms per generated token
(median over repetitions, with min/max), speedup vs ``model.generate`` and vs labkit's own plain
loop, acceptance (accepted/drafted), tokens per step, and for labkit's speculative rows the
analytic limit (A + 1)/(d·c + c_v) from the same run's measured draft cost c, verify cost c_v,
accepted A and drafted d per step (all relative to the plain loop's ms per token), and the
ratio measured/limit. Greedy rows also check that their output is token-identical to plain
greedy decoding. Parallel-decoding rows (:func:`jacobi_methods`, ``--no-jacobi`` leaves them out) read
"accept" as confirmed guesses / guesses fed in and "tok/step" as tokens per iteration.

Skip strategies (on by default, ``--no-strategies`` leaves them out): a section per prompt source
(``--strategy-sources``, default the stdlib validation prompts and the outside prompts of installed packages), each
interleaved on its own: the plain loop, ``generate``, the model's static sets and every strategy of
:func:`labkit.skip_strategy`, each with and without prompt lookup, the time spent choosing sets shown separately
("select %" of decode time); the static sets once more with int8 draft weights (``draft_weights``: the draft
reads int8 copies of the kept blocks' weights, verification the model's own, so the output is unchanged).
``--prompt-source`` picks the prompts of the main greedy and sampling sections (stdlib, packages, their long
variants stdlib-long and packages-long, or a file).
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from ..artifacts.models import load_draft_head, load_model, model_folder
from ..artifacts.paths import BENCH_DIR
from ..artifacts.prompts import benchmark_prompts, source_info, source_label
from ..artifacts.results import skip_set_for
from ..core.decoding import GenerationResult, autoregressive_generate, speculative_generate
from ..core.draft_weights import DRAFT_WEIGHTS
from ..core.early_exit import EarlyExitDrafter
from ..core.gate import TargetConfidenceGate
from ..core.jacobi import INITS, METHODS, jacobi_generate
from ..core.policies import AdaptiveThreshold, FixedK, StaticThreshold
from .adaptive import reference_sets, strategy_methods
from .early_exit import CallProfile, hf_early_exit_profile, labkit_early_exit_profile
from .machine import machine_info

__all__ = ["BenchConfig", "Method", "run_benchmark", "summarise", "load_results", "trace_overhead", "format_table",
           "jacobi_methods"]





@dataclass
class BenchConfig:
    models: tuple[str, ...] = ("default", "plain")
    draft_model: str = "draft"          # separate small draft (skipped when absent)
    n_prompts: int = 6
    max_new_tokens: int = 128
    repeats: int = 3
    threads: int = 1
    seed: int = 0
    fixed_k: int = 4
    static_threshold: float = 0.5
    lookup_tokens: int = 6              # labkit's prompt-lookup drafts (HF's row uses prompt_lookup_num_tokens=3)
    sampling: bool = True               # also a sampling section (temperature below, fixed seeds)
    temperature: float = 0.7
    hf_builtins: bool = True
    early_exit_and_gate: bool = True    # labkit's early-exit drafter and the target-confidence gate
    gate_min_confidence: float = 0.4
    jacobi: bool = True                 # Jacobi / Gauss-Seidel rows (each initialisation) on the first model
    jacobi_block: int = 4                # the fewest iterations per token for the self-draft (docs/decisions.md)
    prompt_source: str = "stdlib"       # prompts of the greedy and sampling sections: stdlib, packages or a file
    strategies: bool = True             # the skip-strategy section (labkit.skip_strategy), first model only
    strategy_sources: tuple[str, ...] = ("stdlib", "packages")
    strategy_names: tuple[str, ...] = ("on-the-fly", "in-context", "knapsack")
    only_strategies: bool = False       # --only-strategies: the strategy section alone
    draft_weights: tuple[str, ...] = ("int8",)   # extra rows of the static sets with these draft weights
    draft_head: bool = True             # rows with the first model's draft head (when it has one), on its set
    out_dir: str = str(BENCH_DIR)       # committed: the README quotes it

    @classmethod
    def quick(cls, **overrides) -> "BenchConfig":
        base = dict(models=("default",), n_prompts=2, max_new_tokens=48, repeats=2, hf_builtins=True, jacobi=False)
        base.update(overrides)
        return cls(**base)


@dataclass
class Method:
    name: str                          # row label
    model: str                         # which model's baselines it is compared with
    family: str                        # 'baseline', 'labkit', 'transformers'
    run: Callable[[torch.Tensor, int], "RunRecord"]
    greedy: bool = True


@dataclass
class RunRecord:
    seconds: float
    n_new: int
    sequences: torch.Tensor
    drafted: int = 0
    accepted: int = 0
    steps: int = 0
    draft_s: float = 0.0
    verify_s: float = 0.0
    select_s: float = 0.0               # a skip strategy's time choosing sets (not in draft_s / verify_s)


def _record(result: GenerationResult, seconds: float) -> RunRecord:
    rec = RunRecord(seconds, result.sequences.shape[1] - result.prompt_length, result.sequences)
    if result.trace is not None:
        s = result.trace.summary()
        rec.drafted, rec.accepted, rec.steps = s["drafted"], s["accepted"], s["steps"]
        rec.draft_s, rec.verify_s, rec.select_s = s["draft_s"], s["verify_s"], s.get("select_s", 0.0)
    return rec


def _timed(fn) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# ---------------------------------------------------------------------------------------
# the methods
# ---------------------------------------------------------------------------------------
def _hf_method(name, model_name, model, **generate_kwargs) -> Method:
    def run(ids, max_new):
        out, sec = _timed(lambda: model.generate(ids, max_new_tokens=max_new, do_sample=False,
                                                 pad_token_id=model.generation_config.pad_token_id,
                                                 **generate_kwargs))
        return RunRecord(sec, out.shape[1] - ids.shape[1], out)
    return Method(name, model_name, "transformers" if generate_kwargs else "baseline", run)


def _labkit_method(name, model_name, fn, greedy=True) -> Method:
    def run(ids, max_new):
        result, sec = _timed(lambda: fn(ids, max_new))
        return _record(result, sec)
    return Method(name, model_name, "baseline" if "labkit plain loop" in name else "labkit", run, greedy)




def _best_early_exit_layer(model, ids, max_new: int) -> int:
    n = model.config.num_hidden_layers
    best = None
    for layer in sorted({max(1, n // 4), n // 2, max(1, 3 * n // 4)}):
        times = []
        for _ in range(2):
            _, sec = _timed(lambda: model.generate(ids, max_new_tokens=max_new, do_sample=False,
                                                   assistant_early_exit=layer,
                                                   pad_token_id=model.generation_config.pad_token_id))
            times.append(sec)
        if best is None or min(times) < best[1]:
            best = (layer, min(times))
    return best[0]


def build_methods(cfg: BenchConfig, loaded: dict, calib_ids: torch.Tensor) -> tuple[list[Method], dict]:
    methods, notes = [], {}
    draft = loaded.get(cfg.draft_model)
    for name in cfg.models:
        model, _ = loaded[name]
        skip, source = skip_set_for(name, model.config.num_hidden_layers)
        notes[name] = {"skip_set": str(skip), "skip_ratio": skip.ratio(model.config.num_hidden_layers),
                       "skip_source": source}
        methods.append(_hf_method(f"{name}: HF generate", name, model))
        methods.append(_labkit_method(f"{name}: labkit plain loop", name,
                                      lambda ids, n, m=model: autoregressive_generate(m, ids, n)))
        policies = {"fixed K": lambda: FixedK(cfg.fixed_k),
                    "static threshold": lambda: StaticThreshold(cfg.static_threshold, 12),
                    "adaptive threshold": lambda: AdaptiveThreshold()}
        for pname, make_policy in policies.items():
            policy = make_policy()          # one object per row: adaptive state carries across prompts
            methods.append(_labkit_method(
                f"{name}: self-spec, {pname}", name,
                lambda ids, n, m=model, s=skip, p=policy: speculative_generate(m, ids, skip=s, policy=p, max_new_tokens=n)))
        policy = AdaptiveThreshold()
        methods.append(_labkit_method(
            f"{name}: self-spec adaptive + prompt lookup", name,
            lambda ids, n, m=model, s=skip, p=policy: speculative_generate(m, ids, skip=s, policy=p, max_new_tokens=n,
                                                                           lookup=cfg.lookup_tokens)))
        if name != cfg.models[0] or not cfg.hf_builtins:
            continue
        exit_layer = _best_early_exit_layer(model, calib_ids, 32)
        notes[name]["early_exit_layer"] = exit_layer
        methods.append(_hf_method(f"{name}: HF early exit (layer {exit_layer})", name, model,
                                  assistant_early_exit=exit_layer))
        methods.append(_hf_method(f"{name}: HF prompt lookup", name, model, prompt_lookup_num_tokens=3))
        if draft is not None:
            draft_model = draft[0]
            methods.append(_hf_method(f"{name}: HF assistant model (draft)", name, model, assistant_model=draft_model))
            policy = AdaptiveThreshold()
            methods.append(_labkit_method(
                f"{name}: labkit, separate draft model", name,
                lambda ids, n, m=model, d=draft_model, p=policy: speculative_generate(m, ids, draft_model=d, policy=p,
                                                                                      max_new_tokens=n)))
    return methods, notes


def early_exit_and_gate_methods(cfg: BenchConfig, loaded: dict, notes: dict) -> list[Method]:
    """labkit's early-exit drafter at the exit layer of transformers' early-exit row (else L // 2), once with
    transformers' drafting rule (up to 20 tokens while the draft's confidence is >= 0.4) and once adaptive;
    the target-confidence gate around self-speculation's adaptive and fixed-K policies."""
    out = []
    g = cfg.gate_min_confidence
    for name in cfg.models:
        model, _ = loaded[name]
        n = model.config.num_hidden_layers
        skip, _ = skip_set_for(name, n)
        exit_layer = notes.get(name, {}).get("early_exit_layer") or max(1, n // 2)
        notes.setdefault(name, {})["labkit_early_exit_layer"] = exit_layer
        rules = {"HF rule": lambda: StaticThreshold(0.4, 20), "adaptive": AdaptiveThreshold}
        for label, make_policy in rules.items():
            policy = make_policy()
            out.append(_labkit_method(
                f"{name}: labkit early exit (layer {exit_layer}), {label}", name,
                lambda ids, k, m=model, e=exit_layer, p=policy: speculative_generate(
                    m, ids, drafter=EarlyExitDrafter(m, e), policy=p, max_new_tokens=k)))
        for label, make_policy in {"adaptive": AdaptiveThreshold, "fixed K": lambda: FixedK(cfg.fixed_k)}.items():
            policy = TargetConfidenceGate(make_policy(), g)
            out.append(_labkit_method(
                f"{name}: self-spec {label} + gate {g:g}", name,
                lambda ids, k, m=model, s=skip, p=policy: speculative_generate(m, ids, skip=s, policy=p,
                                                                               max_new_tokens=k)))
    return out


def _jacobi_record(result: GenerationResult, seconds: float) -> RunRecord:
    """A Jacobi iteration is a verify step whose draft is the previous iterate: guesses fed in count as drafted,
    confirmed guesses as accepted, iterations as steps, initial-guess time as draft time."""
    s = result.trace.summary()
    return RunRecord(seconds, result.sequences.shape[1] - result.prompt_length, result.sequences, drafted=s["guessed"],
                     accepted=s["matched"], steps=s["iterations"], draft_s=s["init_s"], verify_s=s["forward_s"])


def jacobi_methods(cfg: BenchConfig, loaded: dict) -> list[Method]:
    """Parallel decoding rows (:func:`labkit.jacobi_generate`: Jacobi and Gauss-Seidel, each initialisation) on
    the first model; greedy, so checked token for token against the plain loop like every greedy row."""
    name = cfg.models[0]
    model, _ = loaded[name]
    skip, _ = skip_set_for(name, model.config.num_hidden_layers)
    out = []
    for method in METHODS:
        for init in INITS:
            kw = {"skip": skip} if init == "self-draft" else {}

            def run(ids, n, m=method, i=init, kw=kw):
                result, sec = _timed(lambda: jacobi_generate(model, ids, n, block_size=cfg.jacobi_block, method=m,
                                                             init=i, **kw))
                return _jacobi_record(result, sec)
            out.append(Method(f"{name}: {method}, {init} (block {cfg.jacobi_block})", name, "labkit", run))
    return out


def sampling_methods(cfg: BenchConfig, loaded: dict) -> list[Method]:
    out = []
    name = cfg.models[0]
    model, _ = loaded[name]
    skip, _ = skip_set_for(name, model.config.num_hidden_layers)
    seeds = iter(range(10**9))
    out.append(_labkit_method(
        f"{name}: labkit plain loop, T={cfg.temperature}", name,
        lambda ids, n: autoregressive_generate(model, ids, n, do_sample=True, temperature=cfg.temperature,
                                               generator=torch.Generator().manual_seed(next(seeds))), greedy=False))
    policy = AdaptiveThreshold()
    out.append(_labkit_method(
        f"{name}: self-spec adaptive, T={cfg.temperature}", name,
        lambda ids, n: speculative_generate(model, ids, skip=skip, policy=policy, max_new_tokens=n, do_sample=True,
                                            temperature=cfg.temperature,
                                            generator=torch.Generator().manual_seed(next(seeds))), greedy=False))
    return out


# ---------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------
def _interleaved(methods: list[Method], prompt_ids: list[torch.Tensor], cfg: BenchConfig, desc: str) -> dict:
    """records[method][rep] = list of RunRecord (one per prompt)."""
    for m in methods:                                        # warm-up: every method once
        m.run(prompt_ids[0], min(16, cfg.max_new_tokens))
    records = {m.name: [[] for _ in range(cfg.repeats)] for m in methods}
    bar = tqdm(total=cfg.repeats * len(prompt_ids) * len(methods), desc=desc)
    for rep in range(cfg.repeats):
        for ids in prompt_ids:
            for m in methods:
                records[m.name][rep].append(m.run(ids, cfg.max_new_tokens))
                bar.update()
    bar.close()
    return records


def summarise(methods: list[Method], records: dict, reference: dict[str, str]) -> list[dict]:
    """One row per method. ``reference[model]`` names the model's labkit plain-loop row."""
    rows = {}
    for m in methods:
        reps = records[m.name]
        ms = [1e3 * sum(r.seconds for r in rep) / max(1, sum(r.n_new for r in rep)) for rep in reps]
        flat = [r for rep in reps for r in rep]
        drafted, accepted, steps = (sum(r.drafted for r in flat), sum(r.accepted for r in flat),
                                    sum(r.steps for r in flat))
        rows[m.name] = {
            "method": m.name, "model": m.model, "family": m.family, "greedy": m.greedy,
            "ms_per_token": statistics.median(ms), "ms_min": min(ms), "ms_max": max(ms),
            "new_tokens": sum(r.n_new for r in reps[0]),
            "acceptance": accepted / drafted if drafted else None,
            "tokens_per_step": (accepted + steps) / steps if steps else None,  # approx: each step emits n + 1
            "draft_ms_per_drafted": 1e3 * sum(r.draft_s for r in flat) / drafted if drafted else None,
            "verify_ms_per_step": 1e3 * sum(r.verify_s for r in flat) / steps if steps else None,
            "mean_accepted": accepted / steps if steps else None,
            "mean_drafted": drafted / steps if steps else None,
            "select_share": (sum(r.select_s for r in flat) / (sum(r.draft_s + r.verify_s for r in flat))
                             if steps else None),
        }
    for m in methods:
        row = rows[m.name]
        base_hf = rows.get(f"{m.model}: HF generate")
        base_ar = rows.get(reference.get(m.model, ""))
        row["speedup_vs_generate"] = base_hf["ms_per_token"] / row["ms_per_token"] if base_hf else None
        row["speedup_vs_plain_loop"] = base_ar["ms_per_token"] / row["ms_per_token"] if base_ar else None
        row["identical_to_plain"] = None
        if m.greedy and base_ar is not None:
            ref = records[reference[m.model]]
            row["identical_to_plain"] = all(torch.equal(a.sequences, b.sequences)
                                            for rep_a, rep_b in zip(records[m.name], ref)
                                            for a, b in zip(rep_a, rep_b))
        row["limit"] = row["measured_over_limit"] = None
        if row["mean_drafted"] is not None and base_ar is not None:
            full = base_ar["ms_per_token"]
            c = row["draft_ms_per_drafted"] / full if row["draft_ms_per_drafted"] is not None else 0.0  # nothing drafted (gated)
            c_v = row["verify_ms_per_step"] / full
            row["limit"] = (row["mean_accepted"] + 1) / (row["mean_drafted"] * c + c_v)
            row["c"], row["c_v"] = c, c_v
            row["measured_over_limit"] = row["speedup_vs_plain_loop"] / row["limit"]
    return list(rows.values())


def run_benchmark(cfg: BenchConfig) -> dict:
    """Every method on the same prompts, interleaved (the caller sets torch's threads, e.g. to ``cfg.threads``)."""
    t0 = time.perf_counter()
    names = list(dict.fromkeys(list(cfg.models) + [cfg.draft_model]))
    loaded = {}
    for name in names:
        if name == cfg.draft_model and not (model_folder(name) / "config.json").exists():
            continue
        loaded[name] = load_model(name)
    tokenizer = loaded[cfg.models[0]][1]
    prompt_list = benchmark_prompts(cfg.n_prompts, seed=cfg.seed, source=cfg.prompt_source)
    prompt_ids = [tokenizer(p.text, return_tensors="pt")["input_ids"] for p in prompt_list]
    greedy_rows, sampling_rows, notes, profiles = [], [], {}, {}
    if not cfg.only_strategies:
        methods, notes = build_methods(cfg, loaded, prompt_ids[0])
        if cfg.early_exit_and_gate:
            methods += early_exit_and_gate_methods(cfg, loaded, notes)
        if cfg.jacobi:
            methods += jacobi_methods(cfg, loaded)
        reference = {name: f"{name}: labkit plain loop" for name in cfg.models}
        greedy_rows = summarise(methods, _interleaved(methods, prompt_ids, cfg, "greedy"), reference)
    if cfg.sampling and not cfg.only_strategies:
        smethods = sampling_methods(cfg, loaded)
        sref = {cfg.models[0]: smethods[0].name}
        sampling_rows = summarise(smethods, _interleaved(smethods, prompt_ids, cfg, "sampling"), sref)
    exit_layer = notes.get(cfg.models[0], {}).get("early_exit_layer")
    if cfg.early_exit_and_gate and exit_layer:
        profiles = early_exit_profiles(loaded[cfg.models[0]][0], prompt_ids, exit_layer, cfg.max_new_tokens)
    strategy_section = run_strategy_section(cfg, loaded) if cfg.strategies else None
    return {
        "config": asdict(cfg),
        "machine": machine_info(),
        "prompt_source": source_info(cfg.prompt_source),
        "strategies": strategy_section,
        "prompts": [p.source for p in prompt_list],
        "notes": notes,
        "greedy": greedy_rows,
        "sampling": sampling_rows,
        "early_exit_profile": profiles,
        "seconds": round(time.perf_counter() - t0, 1),
    }


# ---------------------------------------------------------------------------------------
# skip strategies, on each prompt source
# ---------------------------------------------------------------------------------------
def skip_strategy_methods(cfg: BenchConfig, loaded: dict) -> list[Method]:
    """Rows of the strategy section for the first model: its static sets and every strategy, each without and
    with prompt lookup; every row gets fresh strategy and policy objects (state carries across its prompts)."""
    name = cfg.models[0]
    model, tokenizer = loaded[name]
    methods = []
    for label, make in strategy_methods(model, tokenizer, cfg.strategy_names).items():
        weights = (None,) + (tuple(cfg.draft_weights) if label.startswith("static") else ())
        for w, lookup in itertools.product(weights, (0, cfg.lookup_tokens)):
            strategy, policy = make(), StaticThreshold(cfg.static_threshold, 12)
            methods.append(_labkit_method(
                f"{name}: {label}" + (f", {w} draft" if w else "") + (" + prompt lookup" if lookup else ""), name,
                lambda ids, n, m=model, s=strategy, p=policy, k=lookup, w=w: speculative_generate(
                    m, ids, skip=s, policy=p, max_new_tokens=n, lookup=k, draft_weights=w)))
    return methods + draft_head_methods(cfg, name, model)


def draft_head_methods(cfg: BenchConfig, name: str, model) -> list[Method]:
    """Rows of the model's draft head (:func:`labkit.load_draft_head`) on the set it was fitted for, at the stop
    threshold recorded with it, each draft weight without and with prompt lookup; none when it has no head."""
    try:
        head = load_draft_head(model_folder(name)) if cfg.draft_head else None
    except FileNotFoundError:
        head = None
    if head is None:
        return []
    trained = reference_sets(model).get("trained draft path")
    label = f"{name}: static: " + ("trained draft path" if head.skip == trained else "head's set") + " + draft head"
    methods = []
    for w, lookup in itertools.product((None,) + tuple(cfg.draft_weights), (0, cfg.lookup_tokens)):
        policy = StaticThreshold(head.threshold, 12)
        methods.append(_labkit_method(
            label + (f", {w} draft" if w else "") + (" + prompt lookup" if lookup else ""), name,
            lambda ids, n, m=model, p=policy, k=lookup, w=w: speculative_generate(
                m, ids, skip=head.skip, policy=p, max_new_tokens=n, lookup=k, draft_weights=w, draft_head=head)))
    return methods


def run_strategy_section(cfg: BenchConfig, loaded: dict) -> dict:
    """For each of ``cfg.strategy_sources``: generate, the plain loop and :func:`skip_strategy_methods`,
    interleaved on that source's benchmark prompts; rows carry the source in "prompts"."""
    name = cfg.models[0]
    model, tokenizer = loaded[name]
    out = {"sources": {}, "prompts": {}, "rows": []}
    for source in cfg.strategy_sources:
        label = source_label(source)
        chosen = benchmark_prompts(cfg.n_prompts, seed=cfg.seed, source=source)
        ids = [tokenizer(p.text, return_tensors="pt")["input_ids"] for p in chosen]
        methods = [_hf_method(f"{name}: HF generate", name, model),
                   _labkit_method(f"{name}: labkit plain loop", name,
                                  lambda x, n: autoregressive_generate(model, x, n))]
        methods += skip_strategy_methods(cfg, loaded)
        rows = summarise(methods, _interleaved(methods, ids, cfg, f"strategies, {label} prompts"),
                         {name: f"{name}: labkit plain loop"})
        out["rows"] += [{"prompts": label, **row} for row in rows]
        out["sources"][label], out["prompts"][label] = source_info(source), [p.source for p in chosen]
    return out


def early_exit_profiles(model, prompt_ids: list[torch.Tensor], exit_layer: int, max_new_tokens: int) -> dict:
    """Why transformers' ``assistant_early_exit`` and labkit's early-exit drafter differ at the same exit layer and
    the same drafting rule: each generation profiled (model calls classified by the layers they ran), summed
    over the prompts, one run each after the interleaved benchmark (see :mod:`labkit.measure.early_exit`)."""
    out = {}
    for label, run in (("transformers", lambda ids: hf_early_exit_profile(model, ids, exit_layer, max_new_tokens)),
                       ("labkit", lambda ids: labkit_early_exit_profile(model, ids, exit_layer, max_new_tokens,
                                                                        StaticThreshold(0.4, 20)))):
        total = CallProfile()
        for ids in prompt_ids:
            p = run(ids)
            total.calls += p.calls
            total.total_s += p.total_s
            for key in ("new_tokens", "drafted", "accepted", "steps"):
                setattr(total, key, getattr(total, key) + getattr(p, key))
        out[label] = total.summary()
    return out


def format_profiles(profiles: dict) -> str:
    head = f"{'':14} {'ms/tok':>7} {'accept':>7} {'tok/step':>8} {'full':>6} {'early':>6} {'late':>6} {'outside':>7} {'layer-0 tok':>11} {'last-layer tok':>14}"
    lines = [head]
    for label, p in profiles.items():
        lines.append(f"{label:14} {p['ms_per_token']:>7.2f} {p['acceptance']:>7.3f} {p['tokens_per_step']:>8.2f} "
                     f"{p['full_ms_per_token']:>6.2f} {p['early_ms_per_token']:>6.2f} {p['late_ms_per_token']:>6.2f} "
                     f"{p['outside_ms_per_token']:>7.2f} {p['first_layer_tokens']:>11} {p['last_layer_tokens']:>14}")
    return "\n".join(lines)


def trace_overhead(model_name: str = "default", *, n_prompts: int = 4, max_new_tokens: int = 128, rounds: int = 5,
                   seed: int = 0) -> dict:
    """What recording the trace costs: the same self-speculative calls with ``record_trace`` on and off,
    interleaved, median ms per token of each (tracing never changes the tokens; the tests check that)."""
    model, tokenizer = load_model(model_name)
    skip, _ = skip_set_for(model_name, model.config.num_hidden_layers)
    ids = [tokenizer(p.text, return_tensors="pt")["input_ids"] for p in benchmark_prompts(n_prompts, seed=seed)]
    ms = {True: [], False: []}
    for _ in range(rounds + 1):                                   # the first round warms up and is dropped
        for record in (True, False):
            t0, n = time.perf_counter(), 0
            for x in ids:
                out = speculative_generate(model, x, skip=skip, policy=AdaptiveThreshold(),
                                           max_new_tokens=max_new_tokens, record_trace=record)
                n += out.sequences.shape[1] - x.shape[1]
            ms[record].append(1e3 * (time.perf_counter() - t0) / n)
    on, off = statistics.median(ms[True][1:]), statistics.median(ms[False][1:])
    return {"model": model_name, "ms_per_token_traced": on, "ms_per_token_untraced": off,
            "overhead": on / off - 1, "rounds": rounds, "n_prompts": n_prompts, "threads": torch.get_num_threads()}


# ---------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------
def format_table(rows: list[dict]) -> str:
    def f(v, spec):
        return "-" if v is None else format(v, spec)
    w = max([44] + [len(r["method"]) for r in rows])
    head = (f"{'method':<{w}} {'ms/tok':>7} {'(min-max)':>13} {'vs gen':>7} {'vs loop':>7} {'accept':>7} "
            f"{'tok/step':>8} {'limit':>6} {'meas/lim':>8} {'same':>5}")
    lines = [head, "-" * len(head)]
    for r in rows:
        same = "-" if r["identical_to_plain"] is None else ("yes" if r["identical_to_plain"] else "NO")
        lines.append(f"{r['method']:<{w}} {r['ms_per_token']:>7.2f} {r['ms_min']:>6.2f}-{r['ms_max']:<6.2f} "
                     f"{f(r['speedup_vs_generate'], '.2f'):>7} {f(r['speedup_vs_plain_loop'], '.2f'):>7} "
                     f"{f(r['acceptance'], '.3f'):>7} {f(r['tokens_per_step'], '.2f'):>8} {f(r['limit'], '.2f'):>6} "
                     f"{f(r['measured_over_limit'], '.2f'):>8} {same:>5}")
    return "\n".join(lines)


def format_strategy_table(rows: list[dict]) -> str:
    """The strategy section: one block per prompt source, the selection overhead in its own column."""
    lines = []
    for source in dict.fromkeys(r["prompts"] for r in rows):
        sel = [r for r in rows if r["prompts"] == source]
        lines.append(f"\n{source} prompts")
        table = format_table(sel).splitlines()
        lines.append(table[0] + f" {'select%':>8}")
        lines.append(table[1] + "-" * 9)
        for line, r in zip(table[2:], sel):
            share = "-" if r.get("select_share") is None else f"{100 * r['select_share']:.1f}"
            lines.append(line + f" {share:>8}")
    return "\n".join(lines)


def write_results(result: dict, out_dir: Path) -> list[Path]:
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "bench.json", out_dir / "bench_greedy.csv", out_dir / "bench_sampling.csv"]
    paths[0].write_text(json.dumps(result, indent=2))
    pd.DataFrame(result["greedy"]).to_csv(paths[1], index=False)
    pd.DataFrame(result["sampling"]).to_csv(paths[2], index=False)
    if result.get("strategies"):
        paths.append(out_dir / "bench_strategies.csv")
        pd.DataFrame(result["strategies"]["rows"]).to_csv(paths[-1], index=False)
    return paths


def load_results(path: str | Path | None = None) -> dict:
    """The committed benchmark (data/bench/bench.json), with a clear error naming the command that makes it."""
    path = Path(path) if path else BENCH_DIR / "bench.json"
    if not path.exists():
        raise FileNotFoundError(f"no benchmark results at {path}: run `python -m labkit.bench`")
    return json.loads(path.read_text())




def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="about a minute: 1 model, 2 prompts, 48 tokens")
    parser.add_argument("--models", nargs="+")
    parser.add_argument("--prompts", type=int)
    parser.add_argument("--tokens", type=int)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--no-sampling", action="store_true")
    parser.add_argument("--no-hf-builtins", action="store_true")
    parser.add_argument("--no-early-exit-and-gate", action="store_true", help="leave out the early-exit drafter and target-confidence gate rows")
    parser.add_argument("--no-jacobi", action="store_true", help="leave out the Jacobi / Gauss-Seidel rows")
    parser.add_argument("--prompt-source", help="prompts of the greedy/sampling sections: stdlib (default), "
                                                "packages, stdlib-long, packages-long (each function after the "
                                                "file text before it), or a .txt/.jsonl file (see "
                                                "labkit.artifacts.prompts)")
    parser.add_argument("--no-strategies", action="store_true", help="leave out the skip-strategy section")
    parser.add_argument("--only-strategies", action="store_true", help="run the skip-strategy section alone")
    parser.add_argument("--strategy-sources", nargs="+", help="prompt sources of the skip-strategy section "
                                                               "(default: stdlib packages; also stdlib-long, "
                                                               "packages-long or .txt/.jsonl files)")
    parser.add_argument("--draft-weights", nargs="*", choices=DRAFT_WEIGHTS,
                        help="extra strategy-section rows of the static sets with these draft weights "
                             "(default: int8; the flag with no value: no extra rows)")
    parser.add_argument("--no-draft-head", action="store_true",
                        help="leave out the strategy-section rows with the model's draft head")
    parser.add_argument("--out", help="results folder (default data/bench)")
    parser.add_argument("--trace-overhead", action="store_true",
                        help="only measure what recording the trace costs (record_trace on vs off)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads or BenchConfig.threads)
    if args.trace_overhead:
        print(json.dumps(trace_overhead(), indent=2))
        return
    overrides = {k: v for k, v in {"models": tuple(args.models) if args.models else None, "n_prompts": args.prompts,
                                   "max_new_tokens": args.tokens, "repeats": args.repeats, "threads": args.threads,
                                   "out_dir": args.out, "prompt_source": args.prompt_source,
                                   "strategy_sources": tuple(args.strategy_sources) if args.strategy_sources else None,
                                   "draft_weights": tuple(args.draft_weights) if args.draft_weights is not None else None,
                                   }.items() if v is not None}
    if args.no_sampling:
        overrides["sampling"] = False
    if args.no_hf_builtins:
        overrides["hf_builtins"] = False
    if args.no_early_exit_and_gate:
        overrides["early_exit_and_gate"] = False
    if args.no_jacobi:
        overrides["jacobi"] = False
    if args.no_strategies:
        overrides["strategies"] = False
    if args.only_strategies:
        overrides["only_strategies"] = True
    if args.no_draft_head:
        overrides["draft_head"] = False
    cfg = BenchConfig.quick(**overrides) if args.quick else BenchConfig(**overrides)
    result = run_benchmark(cfg)
    machine = result["machine"]
    cpu = f" ({machine['cpu_model']}; {', '.join(machine['cpu_flags'])})" if machine.get("cpu_model") else ""
    print(f"\nMachine: {machine['processor']}{cpu}, {cfg.threads} thread(s), torch {machine['torch']}")
    for name, note in result["notes"].items():
        print(f"{name}: skip set {note['skip_set']} ({note['skip_ratio']:.0%} of sub-layers; from {note['skip_source']})")
    if result["greedy"]:
        print("\nGreedy\n" + format_table(result["greedy"]))
    if result["sampling"]:
        print(f"\nSampling (temperature {cfg.temperature}, fixed seeds)\n" + format_table(result["sampling"]))
    if result["strategies"]:
        section = result["strategies"]
        print(f"\nSkip strategies (greedy, static threshold {cfg.static_threshold}; select% = time choosing sets / "
              f"decode time)" + format_strategy_table(section["rows"]))
        for label, info in section["sources"].items():
            print(f"{label} prompts: {info}")
    if result.get("early_exit_profile"):
        print(f"\nEarly exit at layer {result['notes'][cfg.models[0]]['early_exit_layer']}, same drafting rule, where the "
              "time goes (ms per generated token in model calls that ran all layers / only the early layers / only the "
              "late layers / outside model calls; tokens read by the first and the last layer):\n"
              + format_profiles(result["early_exit_profile"]))
    paths = write_results(result, Path(cfg.out_dir))
    print(f"\n{result['seconds']:.0f} s in all; written: {', '.join(str(p) for p in paths)}")


if __name__ == "__main__":
    main()
