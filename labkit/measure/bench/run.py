"""Side-by-side wall-clock benchmark: self-speculative decoding vs plain decoding vs transformers' built-ins.

    python -m labkit bench            # default size (about 10 minutes on 2 CPU cores)
    python -m labkit bench --quick    # about a minute: for tests and notebooks
    python -m labkit bench --models path/to/checkpoint --device cuda --dtype bf16 --out results/bench-gpu

Every model runs on ``--device`` in ``--dtype`` (default: the CPU, fp32); greedy rows are checked against the plain
loop in that same precision. Everything runs in one process, warm, batch 1, one thread by default, *interleaved*:
for each repetition and each prompt, every method runs once in turn (A B C ... A B C ...), so a slow
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
reads int8 copies of the kept blocks' weights, verification the model's own, so the output is unchanged); then the
model's shipped draft (:func:`labkit.best_config`) drafting one continuation (the chain), growing trees
(``--no-trees`` leaves them out), atop cascades (prompt lookup and the dynamic controller, ``--no-cascades``) and the
model's Medusa heads (chain and tree, ``--no-heads``; none when it has none), lookahead decoding (alone and in
front of the shipped draft, ``--no-lookahead``) and token recycling (alone and behind prompt lookup,
``--no-recycling``), each checked token-identical to the
plain loop and tabled once more beside the chain with tokens per verify, c, c_v and the analytic limit. The long
sources (stdlib-long, packages-long: a few hundred tokens of file text before each function) fit the lab's models'
512 positions with 128 new tokens and a draft's overshoot (:mod:`labkit.artifacts.prompts`).
``--prompt-source`` picks the prompts of the main greedy and sampling sections (stdlib, packages, their long
variants stdlib-long and packages-long, or a file).
"""
from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict
from pathlib import Path

import torch

from ...artifacts import arguments
from ...artifacts.models import load_model, model_folder
from ...artifacts.prompts import benchmark_prompts, source_info, source_label
from ...artifacts.results import skip_set_for
from ...core.decoding import speculative_generate
from ...core.devices import device_name, dtype_name, model_device, model_dtype, resolve_device, resolve_dtype
from ...core.draft_weights import DRAFT_WEIGHTS
from ...core.policies import AdaptiveThreshold, StaticThreshold
from ..harness import Decoder, Runs, Stopwatch, json_safe, run_interleaved, summarise, timed
from ..machine import machine_info
from ..signals.early_exit import CallProfile, hf_early_exit_profile, labkit_early_exit_profile
from .methods import (
    BenchConfig,
    build_methods,
    early_exit_and_gate_methods,
    hf_method,
    jacobi_methods,
    plain_method,
    sampling_methods,
    skip_strategy_methods,
)
from .results import format_drafter_table, format_profiles, format_strategy_table, format_table, load_results

__all__ = ["BenchConfig", "run_benchmark", "summarise_by_model", "load_results", "trace_overhead", "format_table",
           "format_strategy_table", "format_drafter_table", "jacobi_methods", "write_results", "main"]


def summarise_by_model(runs: Runs) -> list[dict]:
    """The harness's rows (:func:`labkit.measure.harness.summarise`), each model against its own plain loop, plus
    ``speedup_vs_generate``: the model's ``generate`` row's median ms per token / the row's (NaN without one)."""
    rows = {}
    for model in dict.fromkeys(m.model for m in runs.methods):
        own = [m for m in runs.methods if m.model == model]
        part = Runs(own, {m: runs.records[m] for m in own})
        reference = next((m for m in own if m.kind == "plain"), None)
        summary = summarise(part, reference)
        generate = next((r for m, r in zip(own, summary) if m.kind == "generate" and m.family == "baseline"), None)
        for m, row in zip(own, summary):
            row["speedup_vs_generate"] = (generate["ms_per_token"] / row["ms_per_token"] if generate
                                          else float("nan"))
            rows[m] = row
    return [rows[m] for m in runs.methods]


def _section(decoders: list[Decoder], prompt_ids, cfg: BenchConfig, desc: str) -> list[dict]:
    runs = run_interleaved(decoders, prompt_ids, max_new_tokens=cfg.max_new_tokens, repeats=cfg.repeats,
                           warmup_tokens=16, desc=desc)
    return summarise_by_model(runs)


def _load(cfg: BenchConfig) -> dict:
    """The benchmark's models by name, on ``cfg.device`` in ``cfg.dtype`` (the draft model only when its folder
    exists)."""
    resolve_device(cfg.device), resolve_dtype(cfg.dtype)               # a bad name fails before any model is read
    loaded = {}
    for name in dict.fromkeys(list(cfg.models) + [cfg.draft_model]):
        if name == cfg.draft_model and not (model_folder(name) / "config.json").exists():
            continue
        loaded[name] = load_model(name, device=cfg.device, dtype=cfg.dtype)
    return loaded


def run_benchmark(cfg: BenchConfig) -> dict:
    """Every method on the same prompts, interleaved (the caller sets torch's threads, e.g. to ``cfg.threads``)."""
    clock = Stopwatch()
    loaded = _load(cfg)
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
        greedy_rows = _section(methods, prompt_ids, cfg, "greedy")
        if cfg.sampling:
            sampling_rows = _section(sampling_methods(cfg, loaded), prompt_ids, cfg, "sampling")
    exit_layer = notes.get(cfg.models[0], {}).get("early_exit_layer")
    if cfg.early_exit_and_gate and exit_layer:
        profiles = early_exit_profiles(loaded[cfg.models[0]][0], prompt_ids, exit_layer, cfg.max_new_tokens)
    first = loaded[cfg.models[0]][0]
    return {"config": asdict(cfg), "machine": machine_info(), "device": str(model_device(first)),
            "device_name": device_name(model_device(first)), "dtype": dtype_name(model_dtype(first)),
            "prompt_source": source_info(cfg.prompt_source),
            "strategies": run_strategy_section(cfg, loaded) if cfg.strategies else None,
            "prompts": [p.source for p in prompt_list], "notes": notes, "greedy": greedy_rows,
            "sampling": sampling_rows, "early_exit_profile": profiles, "seconds": round(clock.seconds, 1)}


# ---------------------------------------------------------------------------------------
# skip strategies, on each prompt source
# ---------------------------------------------------------------------------------------
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
        methods = [hf_method("HF generate", name, model), plain_method(name, model)]
        methods += skip_strategy_methods(cfg, loaded)
        rows = _section(methods, ids, cfg, f"strategies, {label} prompts")
        out["rows"] += [{"prompts": label, **row} for row in rows]
        out["sources"][label], out["prompts"][label] = source_info(source), [p.source for p in chosen]
    return out


def early_exit_profiles(model, prompt_ids: list[torch.Tensor], exit_layer: int, max_new_tokens: int) -> dict:
    """Why transformers' ``assistant_early_exit`` and labkit's early-exit drafter differ at the same exit layer and
    the same drafting rule: each generation profiled (model calls classified by the layers they ran), summed
    over the prompts, one run each after the interleaved benchmark (see :mod:`labkit.measure.signals.early_exit`)."""
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


def trace_overhead(model_name: str = "default", *, n_prompts: int = 4, max_new_tokens: int = 128, rounds: int = 5,
                   seed: int = 0, device=None, dtype=None) -> dict:
    """What recording the trace costs: the same self-speculative calls with ``record_trace`` on and off,
    interleaved, median ms per token of each (tracing never changes the tokens; the tests check that); the model
    on ``device`` in ``dtype`` (None: the CPU, fp32)."""
    model, tokenizer = load_model(model_name, device=device, dtype=dtype)
    skip, _ = skip_set_for(model_name, model.config.num_hidden_layers)
    ids = [tokenizer(p.text, return_tensors="pt")["input_ids"] for p in benchmark_prompts(n_prompts, seed=seed)]
    ms = {True: [], False: []}
    for _ in range(rounds + 1):                                   # the first round warms up and is dropped
        for record in (True, False):
            outs, seconds = timed(lambda: [speculative_generate(model, x, skip=skip, policy=AdaptiveThreshold(),
                                                                max_new_tokens=max_new_tokens, record_trace=record)
                                           for x in ids])
            ms[record].append(1e3 * seconds / sum(len(out.new_tokens) for out in outs))
    on, off = statistics.median(ms[True][1:]), statistics.median(ms[False][1:])
    return {"model": model_name, "ms_per_token_traced": on, "ms_per_token_untraced": off,
            "overhead": on / off - 1, "rounds": rounds, "n_prompts": n_prompts, "threads": torch.get_num_threads()}


def write_results(result: dict, out_dir: Path) -> list[Path]:
    """bench.json (NaN written as null) and a CSV per section, in ``out_dir``."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "bench.json", out_dir / "bench_greedy.csv", out_dir / "bench_sampling.csv"]
    paths[0].write_text(json.dumps(json_safe(result), indent=2))   # load_results reads null as NaN
    pd.DataFrame(result["greedy"]).to_csv(paths[1], index=False)
    pd.DataFrame(result["sampling"]).to_csv(paths[2], index=False)
    if result.get("strategies"):
        paths.append(out_dir / "bench_strategies.csv")
        pd.DataFrame(result["strategies"]["rows"]).to_csv(paths[-1], index=False)
    return paths


def _parser() -> argparse.ArgumentParser:
    parser = arguments.command_parser(__doc__, raw=True)
    parser.add_argument("--quick", action="store_true", help="about a minute: 1 model, 2 prompts, 48 tokens")
    parser.add_argument("--models", nargs="+", type=arguments.model)
    parser.add_argument("--strategy-sources", nargs="+", type=arguments.prompt_source,
                        help="prompt sources of the skip-strategy section (default: stdlib packages; also "
                             "stdlib-long, packages-long or .txt/.jsonl files)")
    for flag in ("--prompts", "--tokens", "--repeats", "--threads"):
        parser.add_argument(flag, type=arguments.count)
    for flag, what in _SWITCHES.items():
        parser.add_argument(flag, action="store_true", help=what[2])
    parser.add_argument("--prompt-source", type=arguments.prompt_source,
                        help="prompts of the greedy/sampling sections: stdlib (default), packages, stdlib-long, "
                             "packages-long (each function after the file text before it), or a .txt/.jsonl file "
                             "(see labkit.artifacts.prompts)")
    parser.add_argument("--draft-weights", nargs="*", choices=DRAFT_WEIGHTS,
                        help="extra strategy-section rows of the static sets with these draft weights "
                             "(default: int8; the flag with no value: no extra rows)")
    parser.add_argument("--device", type=arguments.device,
                        help="where the models run: cpu (default), cuda, cuda:N, mps or auto")
    parser.add_argument("--dtype", type=arguments.dtype,
                        help="their precision: fp32 (default), bf16 or fp16 (greedy rows are checked against the "
                             "plain loop in that precision)")
    parser.add_argument("--out", type=arguments.output_folder, help="results folder (default data/bench)")
    parser.add_argument("--trace-overhead", action="store_true",
                        help="only measure what recording the trace costs (record_trace on vs off)")
    return parser


#: on/off flags: --flag -> (BenchConfig field, the value it sets, help)
_SWITCHES = {
    "--no-sampling": ("sampling", False, "leave out the sampling section"),
    "--no-hf-builtins": ("hf_builtins", False, "leave out transformers' built-in drafters"),
    "--no-early-exit-and-gate": ("early_exit_and_gate", False,
                                 "leave out the early-exit drafter and target-confidence gate rows"),
    "--no-jacobi": ("jacobi", False, "leave out the Jacobi / Gauss-Seidel rows"),
    "--no-strategies": ("strategies", False, "leave out the skip-strategy section"),
    "--only-strategies": ("only_strategies", True, "run the skip-strategy section alone"),
    "--no-draft-head": ("draft_head", False, "leave out the strategy-section rows with the model's draft head"),
    "--no-trees": ("trees", (), "leave out the strategy-section rows of the shipped draft's trees (its chain stays)"),
    "--no-cascades": ("cascades", (), "leave out the strategy-section rows of cascades under the shipped draft"),
    "--no-heads": ("heads", (), "leave out the strategy-section rows of the model's Medusa heads"),
    "--no-lookahead": ("lookahead", (), "leave out the strategy-section rows of lookahead decoding"),
    "--no-recycling": ("recycling", (), "leave out the strategy-section rows of token recycling"),
}


def config_from_args(args) -> BenchConfig:
    """The :class:`BenchConfig` the command line asks for (``--quick``: :meth:`BenchConfig.quick`)."""
    given = {"models": tuple(args.models) if args.models else None, "n_prompts": args.prompts,
             "max_new_tokens": args.tokens, "repeats": args.repeats, "threads": args.threads, "out_dir": args.out,
             "prompt_source": args.prompt_source, "device": args.device, "dtype": args.dtype,
             "strategy_sources": tuple(args.strategy_sources) if args.strategy_sources else None,
             "draft_weights": tuple(args.draft_weights) if args.draft_weights is not None else None}
    overrides = {k: v for k, v in given.items() if v is not None}
    for flag, (field_name, value, _) in _SWITCHES.items():
        if getattr(args, flag[2:].replace("-", "_")):
            overrides[field_name] = value
    return BenchConfig.quick(**overrides) if args.quick else BenchConfig(**overrides)


def report(result: dict, cfg: BenchConfig) -> str:
    """What ``python -m labkit bench`` prints: the machine, the skip sets, every section's table."""
    machine = result["machine"]
    cpu = f" ({machine['cpu_model']}; {', '.join(machine['cpu_flags'])})" if machine.get("cpu_model") else ""
    out = [f"\nMachine: {machine['processor']}{cpu}, {cfg.threads} thread(s), torch {machine['torch']}; models on "
           f"{result.get('device_name', 'cpu')} in {result.get('dtype', 'fp32')}"]
    out += [f"{name}: skip set {n['skip_set']} ({n['skip_ratio']:.0%} of sub-layers; from {n['skip_source']})"
            for name, n in result["notes"].items()]
    if result["greedy"]:
        out.append("\nGreedy\n" + format_table(result["greedy"]))
    if result["sampling"]:
        out.append(f"\nSampling (temperature {cfg.temperature}, fixed seeds)\n" + format_table(result["sampling"]))
    if result["strategies"]:
        section = result["strategies"]
        out.append(f"\nSkip strategies (greedy, static threshold {cfg.static_threshold}; select% = time choosing "
                   f"sets / decode time)" + format_strategy_table(section["rows"]))
        out += [f"{label} prompts: {info}" for label, info in section["sources"].items()]
        drafters = format_drafter_table(section["rows"])
        if drafters:
            out.append("\nThe shipped draft's chain, trees and cascades, and the Medusa heads (vs chain: the chain's "
                       "ms per token / the row's; tok/verify: tokens emitted per verify; c, c_v: a drafted token's "
                       "and a verify's cost, x a plain step)" + drafters)
    if result.get("early_exit_profile"):
        out.append(f"\nEarly exit at layer {result['notes'][cfg.models[0]]['early_exit_layer']}, same drafting rule, "
                   "where the time goes (ms per generated token in model calls that ran all layers / only the early "
                   "layers / only the late layers / outside model calls; tokens read by the first and the last "
                   "layer):\n" + format_profiles(result["early_exit_profile"]))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    torch.set_num_threads(args.threads or BenchConfig.threads)
    if args.trace_overhead:
        print(json.dumps(trace_overhead(device=args.device, dtype=args.dtype), indent=2))
        return
    cfg = config_from_args(args)
    result = run_benchmark(cfg)
    print(report(result, cfg))
    paths = write_results(result, Path(cfg.out_dir))
    print(f"\n{result['seconds']:.0f} s in all; written: {', '.join(str(p) for p in paths)}")


if __name__ == "__main__":
    main()
