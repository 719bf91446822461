"""Which signal should stop a draft while sampling: the draft's top-1 probability, or q(d) of the token it drew?

    python -m labkit stop-signal            # about 5 minutes on 2 cores; prints the tables docs/decisions.md quotes

While sampling, a drafted token d ~ q is accepted with probability a = min(1, p(d) / q(d)). The policy stops
drafting after a token whose signal falls below its threshold; the signal should predict rejection. Greedy
drafting has one candidate signal (the top-1 probability, which is q(d) there). Sampling has two: the top-1
probability ("confidence") and q(d) itself (the official Draft & Verify code reads the latter). Three
measurements, on stdlib benchmark prompts and on prompts from outside the training distribution (a fixed list
of documented functions of installed third-party packages):

1. how well each signal ranks drafted tokens by their acceptance (ROC AUC; soft labels a over every drafted
   position of fixed-length drafts, and realized accept/reject on the positions the verifier judged);
2. tokens per step at matched drafted-per-step d (a static-threshold sweep per signal, interpolated): at equal
   d a step costs the same, so more tokens per step is faster;
3. wall clock of the adaptive policy with each signal against the plain loop, interleaved.

Both signals are lossless: a stopping rule that reads only the draft's own values changes how many tokens are
drafted, never the distribution of what is emitted.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import sys
import textwrap
from collections.abc import Sequence

import numpy as np
import torch

from ...artifacts import arguments
from ...artifacts.models import load_model
from ...artifacts.prompts import Prompt, benchmark_prompts
from ...artifacts.results import skip_set_for
from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.policies import AdaptiveThreshold, FixedK, StaticThreshold
from ..harness import Decoder, Method, Stopwatch, run_interleaved, summarise

__all__ = ["OUTSIDE_FUNCTIONS", "SIGNALS", "outside_prompts", "signal_samples", "soft_auc", "auc", "signal_auc",
           "matched_length", "interleaved_timing", "main"]

SIGNALS = ("confidence", "q")

#: Documented functions of installed third-party packages (never in the stdlib training text): (module, name).
OUTSIDE_FUNCTIONS = (
    ("tqdm.std", "tqdm.format_sizeof"), ("tqdm.std", "tqdm.format_interval"), ("tqdm.std", "tqdm.format_num"),
    ("tqdm.std", "tqdm.set_description"), ("tqdm.utils", "disp_len"), ("tqdm.utils", "disp_trim"),
    ("optuna.distributions", "json_to_distribution"), ("optuna.distributions", "distribution_to_json"),
)


def _function_prompt(module: str, name: str) -> Prompt:
    """Signature and docstring of ``module.name`` (dedented, ending at the docstring's closing quotes)."""
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    obj = inspect.unwrap(getattr(obj, "__func__", obj))
    source = textwrap.dedent(inspect.getsource(obj))
    node = ast.parse(source).body[0]
    doc = node.body[0]
    if not (isinstance(doc, ast.Expr) and isinstance(getattr(doc, "value", None), ast.Constant)):
        raise ValueError(f"{module}.{name} has no docstring")
    text = "\n".join(source.splitlines()[:doc.end_lineno])
    return Prompt(text=text, source=f"{module}:{name}")


def outside_prompts(functions: Sequence[tuple[str, str]] = OUTSIDE_FUNCTIONS) -> list[Prompt]:
    """Prompts from :data:`OUTSIDE_FUNCTIONS`: code the models never trained on (not the stdlib)."""
    return [_function_prompt(m, n) for m, n in functions]


def signal_samples(model, tokenizer, skip, prompts: Sequence[Prompt], *, gamma: int = 8, temperature: float = 0.7,
                   max_new_tokens: int = 64, seed: int = 0) -> dict[str, np.ndarray]:
    """Every drafted token of fixed-length (``gamma``) sampled drafts: its confidence (top-1 q), q(d), the soft
    label a = min(1, p(d)/q(d)), and the realized outcome (1 accepted, 0 rejected, -1 never judged)."""
    rows = []
    for i, prompt in enumerate(prompts):
        ids = tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        out = speculative_generate(model, ids, skip=skip, policy=FixedK(gamma), max_new_tokens=max_new_tokens,
                                   do_sample=True, temperature=temperature, eos_token_id=[],
                                   generator=torch.Generator().manual_seed(seed + i))
        for step in out.trace.steps:
            for j, (top, q, p) in enumerate(zip(step.confidence, step.q, step.p)):
                judged = 1 if j < step.n_accepted else 0 if j == step.n_accepted else -1
                rows.append((top, q, min(1.0, p / q) if q > 0 else 0.0, judged))
    arr = np.array(rows, dtype=float)
    return {"confidence": arr[:, 0], "q": arr[:, 1], "a": arr[:, 2], "realized": arr[:, 3]}


def soft_auc(scores: np.ndarray, weights: np.ndarray) -> float:
    """ROC AUC with soft labels: each token counts as accepted with weight a and rejected with 1 - a;
    P(score of an accepted token > score of a rejected one) over pairs of different tokens, ties counted half."""
    order = np.argsort(scores, kind="mergesort")
    s, w = np.asarray(scores, float)[order], np.asarray(weights, float)[order]
    neg = 1.0 - w
    total, below, i = 0.0, 0.0, 0                                   # below: rejected mass with a lower score
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        pos_here, neg_here = w[i:j].sum(), neg[i:j].sum()
        total += pos_here * (below + 0.5 * neg_here)
        below += neg_here
        i = j
    self_pairs = float((w * neg).sum())                             # a token is not compared with itself
    denominator = w.sum() * neg.sum() - self_pairs
    return float((total - 0.5 * self_pairs) / denominator) if denominator > 0 else float("nan")


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """ROC AUC with 0/1 labels."""
    return soft_auc(scores, np.asarray(labels, dtype=float))


def signal_auc(samples: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """{signal: {'soft': AUC against a on every drafted token, 'realized': AUC on the judged positions}}."""
    judged = samples["realized"] >= 0
    return {s: {"soft": soft_auc(samples[s], samples["a"]),
                "realized": auc(samples[s][judged], samples["realized"][judged])} for s in SIGNALS}


def _sweep_point(model, ids_list, skip, signal: str, threshold: float, temperature: float, max_new_tokens: int,
                 seed: int) -> dict:
    steps = drafted = accepted = emitted = 0
    for i, ids in enumerate(ids_list):
        policy = StaticThreshold(threshold, 12)
        policy.sampling_signal = signal
        trace = speculative_generate(model, ids, skip=skip, policy=policy, max_new_tokens=max_new_tokens,
                                     do_sample=True, temperature=temperature, eos_token_id=[],
                                     generator=torch.Generator().manual_seed(seed + i)).trace
        steps, drafted = steps + len(trace.steps), drafted + trace.n_drafted
        accepted, emitted = accepted + trace.n_accepted, emitted + trace.n_emitted
    return {"signal": signal, "threshold": threshold, "d": drafted / steps, "accepted_per_drafted": accepted / drafted,
            "tokens_per_step": emitted / steps}


def matched_length(model, tokenizer, skip, prompts: Sequence[Prompt], *,
                   thresholds=(0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9), temperature: float = 0.7,
                   max_new_tokens: int = 64, seed: int = 0, at_d=(2.5, 3.0, 4.0)) -> dict:
    """Static-threshold sweeps per signal; tokens per step interpolated at the drafted-per-step values ``at_d``
    (linear in d, within each signal's measured range; NaN outside it)."""
    ids_list = [tokenizer(p.text, return_tensors="pt", add_special_tokens=False)["input_ids"] for p in prompts]
    points = [_sweep_point(model, ids_list, skip, s, t, temperature, max_new_tokens, seed)
              for s in SIGNALS for t in thresholds]
    matched = {}
    for s in SIGNALS:
        own = sorted((p["d"], p["tokens_per_step"]) for p in points if p["signal"] == s)
        ds, tps = np.array([d for d, _ in own]), np.array([t for _, t in own])
        matched[s] = {d: float(np.interp(d, ds, tps)) if ds.min() <= d <= ds.max() else float("nan") for d in at_d}
    return {"points": points, "matched": matched}


def interleaved_timing(model, tokenizer, skip, prompts: Sequence[Prompt], *, rounds: int = 3, temperature: float = 0.7,
                       max_new_tokens: int = 64, seed: int = 0) -> dict:
    """ms per token of the plain loop and of the adaptive policy reading each signal, all sampling, interleaved by
    :func:`labkit.measure.harness.run_interleaved` (same generator seed per prompt); medians and min-max of the
    per-round speedups."""
    ids_list = [tokenizer(p.text, return_tensors="pt", add_special_tokens=False)["input_ids"] for p in prompts]
    seeds = {id(ids): seed + i for i, ids in enumerate(ids_list)}

    def generator(ids):
        return torch.Generator().manual_seed(seeds.get(id(ids), seed))

    def adaptive(signal):
        policy = AdaptiveThreshold()
        policy.sampling_signal = signal
        return policy
    decoders = [Decoder(Method("plain", "plain", family="baseline", greedy=False),
                        lambda ids, n: autoregressive_generate(model, ids, n, do_sample=True, temperature=temperature,
                                                               generator=generator(ids), eos_token_id=[]))]
    decoders += [Decoder(Method("self-spec", s, policy=f"adaptive, signal {s}", greedy=False),
                         lambda ids, n, s=s: speculative_generate(
                             model, ids, skip=skip, policy=adaptive(s), max_new_tokens=n, do_sample=True,
                             temperature=temperature, generator=generator(ids), eos_token_id=[]))
                 for s in SIGNALS]
    rows = {r["method"]: r for r in summarise(run_interleaved(decoders, ids_list, max_new_tokens=max_new_tokens,
                                                              repeats=rounds, desc="stop signal", progress=False))}
    return {"ms_per_token": {k: r["ms_per_token"] for k, r in rows.items()},
            "speedup": {s: rows[s]["speedup"] for s in SIGNALS},
            "speedup_min_max": {s: (rows[s]["speedup_min"], rows[s]["speedup_max"]) for s in SIGNALS},
            "accepted_per_drafted": {s: rows[s]["acceptance"] for s in SIGNALS}}


def _report(name: str, model, tokenizer, skip, prompts, args) -> dict:
    clock = Stopwatch()
    samples = signal_samples(model, tokenizer, skip, prompts, gamma=args.gamma, temperature=args.temperature,
                             max_new_tokens=args.max_new_tokens, seed=args.seed)
    aucs = signal_auc(samples)
    print(f"\n== {name}: {len(prompts)} prompts x {args.max_new_tokens} tokens, T = {args.temperature} ==")
    print(f"ROC AUC over {len(samples['a'])} drafted tokens (fixed drafts of {args.gamma}; soft labels a = "
          f"min(1, p/q)) and {int((samples['realized'] >= 0).sum())} judged positions (realized):")
    for s in SIGNALS:
        print(f"  {s:>10}: soft {aucs[s]['soft']:.3f}   realized {aucs[s]['realized']:.3f}")
    matched = matched_length(model, tokenizer, skip, prompts, temperature=args.temperature,
                             max_new_tokens=args.max_new_tokens, seed=args.seed)
    print("static-threshold sweep (signal, threshold: d, accepted / drafted, tokens per step):")
    for p in matched["points"]:
        print(f"  {p['signal']:>10} {p['threshold']:.2f}: d {p['d']:.2f}  acc {p['accepted_per_drafted']:.3f}  "
              f"tokens/step {p['tokens_per_step']:.3f}")
    for d in next(iter(matched["matched"].values())):
        print(f"  at d = {d}: tokens per step " + ", ".join(f"{s} {matched['matched'][s][d]:.3f}" for s in SIGNALS))
    timing = interleaved_timing(model, tokenizer, skip, prompts, rounds=args.rounds, temperature=args.temperature,
                                max_new_tokens=args.max_new_tokens, seed=args.seed)
    print(f"adaptive policy, interleaved x {args.rounds}: plain {timing['ms_per_token']['plain']:.2f} ms/token; " +
          "; ".join(f"{s}: {timing['ms_per_token'][s]:.2f} ms/token, speedup {timing['speedup'][s]:.3f} "
                    f"(min-max {timing['speedup_min_max'][s][0]:.3f}-{timing['speedup_min_max'][s][1]:.3f}), "
                    f"accepted / drafted {timing['accepted_per_drafted'][s]:.3f}" for s in SIGNALS))
    print(f"({clock.seconds:.0f} s)")
    return {"auc": aucs, "matched": matched, "timing": timing}


def main(argv: Sequence[str] | None = None) -> dict:
    parser = arguments.command_parser(__doc__.split("\n")[0])
    parser.add_argument("--model", type=arguments.model, default="default")
    parser.add_argument("--n-prompts", type=arguments.count, default=8,
                        help="per prompt set (stdlib benchmark, outside)")
    parser.add_argument("--max-new-tokens", type=arguments.count, default=64)
    parser.add_argument("--temperature", type=arguments.positive, default=0.7)
    parser.add_argument("--gamma", type=arguments.count, default=8, help="fixed draft length of the AUC samples")
    parser.add_argument("--rounds", type=arguments.count, default=3, help="interleaved rounds of the timing")
    parser.add_argument("--seed", type=arguments.natural, default=0)
    parser.add_argument("--threads", type=arguments.count, default=1)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    torch.set_num_threads(args.threads)
    model, tokenizer = load_model(args.model)
    skip, source = skip_set_for(args.model, model.config.num_hidden_layers)
    print(f"{args.model}, skip set {skip} ({source})")
    sets = {"stdlib benchmark prompts": benchmark_prompts(args.n_prompts, seed=args.seed),
            "outside prompts (tqdm, optuna)": outside_prompts()[: args.n_prompts]}
    return {name: _report(name, model, tokenizer, skip, prompts, args) for name, prompts in sets.items()}
