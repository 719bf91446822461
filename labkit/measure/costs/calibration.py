"""Will self-drafting pay on *this* hardware and model? A calibration that predicts it, then measures it.

Draft & Verify's most common complaint is a speedup that does not reproduce on someone else's model and hardware;
its maintainers answer "match the environment, search on a calibration set". :func:`calibrate` does the cheap part
of that on the reader's own machine in under a minute, before any search:

1. **costs**: c against the fraction of blocks kept (whole layers skipped, spread evenly) and of the draft's own
   skip set, c_v(γ) of a verify forward over γ + 1 tokens, and the prompt's prefill, all in plain decoding steps at
   the context the run will see (:mod:`labkit.measure.costs.roofline`, interleaved);
2. **agreement** α of the draft's skip set on a few prompts (teacher-forced, :class:`AgreementProbe`);
3. **prediction**: for each γ, E(α, γ) tokens per step for γ·c + c_v(γ) plain steps, and the end-to-end speedup of
   a run of N new tokens after a prefill worth P plain steps: (P + N) / (P + N·(γ·c + c_v) / E(α, γ)); the best γ;
4. **measurement**: that γ (a fixed draft length, :class:`~labkit.FixedK`) against the plain loop through the
   harness (:func:`~labkit.measure.harness.run_interleaved`) on the same prompts, and where the prediction went:
   each predicted quantity beside what the run did (:meth:`Calibration.budget`).

The prediction assumes i.i.d. acceptance at rate α, drafts and verifies that cost what a lone forward costs, and
no time outside the forwards; the budget says which of these failed, and by how much.

Notation (docs/notation.md): α per-token acceptance probability (here its greedy estimate, the agreement), γ tokens
drafted per step, E(α, γ) = (1 − α^(γ+1)) / (1 − α), c the cost of one drafted token and c_v of one verify forward,
both in plain decoding steps; tokens per step A + 1.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ...artifacts import arguments
from ...artifacts.models import SHIPPED_MODELS, load_model
from ...artifacts.prompts import benchmark_prompts
from ...artifacts.results import skip_set_for
from ...core.checks import check_int, check_probability, record_from
from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.devices import device_name, model_device, model_dtype
from ...core.draft_weights import draft_weights as build_draft_weights
from ...core.expectation import expected_tokens
from ...core.policies import FixedK
from ...core.skip import SkipSet, decoder_layers
from ..agreement import AgreementProbe
from ..harness import Decoder, Method, Stopwatch, frame, run_interleaved, summarise
from ..machine import machine_info
from .analytic import interpolate_cv
from .roofline import draft_cost_curve, inner_for, prefill_cost, uniform_layer_skip, verify_cost_curve, widened_model

__all__ = ["Calibration", "CalibrationPlan", "calibrate", "expected_run", "predict_speedup", "main"]


def expected_run(alpha: float, gamma: int, new_tokens: int, c: float, c_v: Callable[[int], float]) -> dict:
    """What a run of ``new_tokens`` with a fixed draft length γ costs under i.i.d. acceptance at rate α, exactly:
    the loop drafts min(γ, tokens still to emit − 1) tokens per step (so its last steps draft fewer), a step that
    drafted k accepts j < k tokens with probability α^j (1 − α) and all k with α^k, and emits j + 1. A dynamic
    programme over the tokens still to emit gives the expected ``steps``, ``drafted`` tokens and ``cost`` in plain
    steps (k·c + c_v(k) per step; ``c_v(k)``: a verify forward over k + 1 tokens)."""
    check_probability("alpha", alpha)
    check_int("gamma", gamma, 1)
    check_int("new_tokens", new_tokens, 1)
    steps, drafted, cost = [0.0] * (new_tokens + 1), [0.0] * (new_tokens + 1), [0.0] * (new_tokens + 1)
    for r in range(1, new_tokens + 1):
        k = min(gamma, r - 1)
        probs = [alpha ** j * (1.0 - alpha) for j in range(k)] + [alpha ** k]
        after = [(p, r - j - 1) for j, p in enumerate(probs)]
        steps[r] = 1.0 + sum(p * steps[n] for p, n in after)
        drafted[r] = k + sum(p * drafted[n] for p, n in after)
        cost[r] = k * c + c_v(k) + sum(p * cost[n] for p, n in after)
    return {"steps": steps[-1], "drafted": drafted[-1], "cost": cost[-1]}


def predict_speedup(alpha: float, gamma: int, c: float, verify_rows: Sequence[dict], *, prefill: float = 0.0,
                    new_tokens: int = 32) -> dict:
    """The prediction for one γ, with c_v read off ``verify_rows`` (a verify-cost curve over tokens):

    - ``decode_speedup``: E(α, γ) / (γ·c + c_v(γ + 1 tokens)), the analytic limit of a long run;
    - ``speedup``: the whole run of N = ``new_tokens`` new tokens, (P + N − 1) / (P + cost(N)), where the plain
      loop reads the prompt (P plain steps, ``prefill``) and then takes N − 1 steps, and the self-draft reads it
      too and spends :func:`expected_run`'s cost (its last steps draft fewer tokens);
    - ``tokens_per_step`` N / expected steps (E(α, γ) in a long run), ``draft_per_step`` and ``verify_per_step``
      (plain steps), ``drafted_per_step``."""
    def c_v(k: int) -> float:
        return interpolate_cv(verify_rows, k + 1)

    run = expected_run(alpha, gamma, new_tokens, c, c_v)
    E = expected_tokens(alpha, gamma)
    steps = run["steps"]
    draft = c * run["drafted"] / steps
    return {"gamma": int(gamma), "tokens_per_step_long": E, "decode_speedup": E / (gamma * c + c_v(gamma)),
            "tokens_per_step": new_tokens / steps, "drafted_per_step": run["drafted"] / steps,
            "draft_per_step": draft, "verify_per_step": run["cost"] / steps - draft,
            "step_cost": run["cost"] / steps,
            "speedup": (prefill + new_tokens - 1) / (prefill + run["cost"])}


@dataclass
class Calibration:
    """What :func:`calibrate` measured and predicted. Costs are in plain decoding steps at ``context``.

    ``draft_costs``: rows of :func:`~labkit.measure.costs.roofline.draft_cost_curve` (the uniform layer skips and the
    draft's own set, labelled "draft set"); ``verify_costs``: rows of
    :func:`~labkit.measure.costs.roofline.verify_cost_curve` with ``gamma`` added; ``predictions``: one
    :func:`predict_speedup` row per γ; ``rows``: the harness's rows of the plain loop and the draft at the chosen γ;
    ``run``: the draft's measured phases summed over every timed call (see :meth:`budget`)."""

    model: str
    device: str
    dtype: str
    threads: int
    n_layers: int
    n_parameters: int
    prompts: list[str]
    prompt_tokens: float
    context: int
    max_new_tokens: int
    repeats: int
    plain_ms: float
    draft_costs: list[dict]
    verify_costs: list[dict]
    prefill: float
    skip: dict
    skip_source: str
    draft_weights: str | None
    c: float
    alpha: float
    n_positions: int
    predictions: list[dict]
    gamma: int
    rows: list[dict]
    run: dict
    seconds: float = 0.0
    machine: dict = field(default_factory=dict)

    # -- the headline numbers --------------------------------------------------------------------------------------
    @property
    def prediction(self) -> dict:
        """The prediction at the chosen γ."""
        return next(p for p in self.predictions if p["gamma"] == self.gamma)

    @property
    def predicted_speedup(self) -> float:
        return self.prediction["speedup"]

    @property
    def measured(self) -> dict:
        """The harness's row of the draft (speedup, its min–max over repetitions, acceptance, tokens per step)."""
        return self.rows[1]

    @property
    def measured_speedup(self) -> float:
        return self.measured["speedup"]

    @property
    def error(self) -> float:
        """predicted / measured − 1: above 0 the prediction promised too much."""
        return self.predicted_speedup / self.measured_speedup - 1.0

    @property
    def within_noise(self) -> bool:
        """Does the prediction fall inside the measured speedup's min–max over repetitions?"""
        return self.measured["speedup_min"] <= self.predicted_speedup <= self.measured["speedup_max"]

    @property
    def kept(self) -> float:
        """The fraction of blocks the draft's skip set keeps."""
        return 1.0 - SkipSet.from_dict(self.skip).ratio(self.n_layers)

    # -- where the prediction went -----------------------------------------------------------------------------------
    def budget(self) -> list[dict]:
        """Each quantity of the prediction beside what the run did, in plain steps of the run's own plain loop:
        tokens per step, draft cost per step, verify cost per step, the rest of a step (the loop, the drafter's
        bookkeeping, the call around it: 0 in the prediction) and the prefill; each with ``speedup_if``, the
        prediction with that one quantity replaced by its measured value."""
        p, r = self.prediction, self.run
        keys = (("tokens per step", "tokens_per_step"), ("draft cost per step", "draft_per_step"),
                ("verify cost per step", "verify_per_step"), ("rest of a step", "rest_per_step"),
                ("prefill", "prefill"))
        predicted = {name: (p.get(key, 0.0) if key != "prefill" else self.prefill) for name, key in keys}
        measured = {name: r[key] for name, key in keys}
        out = []
        for key in predicted:
            swapped = {**predicted, key: measured[key]}
            out.append({"quantity": key, "predicted": predicted[key], "measured": measured[key],
                        "speedup_if": _whole(swapped, self.max_new_tokens)})
        return out

    def frame(self):
        """The predictions per γ as a pandas DataFrame indexed by γ (the chosen one marked)."""
        rows = [{**p, "chosen": p["gamma"] == self.gamma} for p in self.predictions]
        return frame(rows, "gamma")

    def summary(self) -> dict:
        """The headline numbers as one flat dict."""
        m = self.measured
        return {"model": self.model, "device": self.device, "dtype": self.dtype, "threads": self.threads,
                "kept": self.kept, "c": self.c, "c_v": interpolate_cv(self.verify_costs, self.gamma + 1),
                "alpha": self.alpha, "gamma": self.gamma, "predicted_speedup": self.predicted_speedup,
                "measured_speedup": self.measured_speedup, "measured_min": m["speedup_min"],
                "measured_max": m["speedup_max"], "error": self.error, "within_noise": self.within_noise,
                "acceptance": m["acceptance"], "tokens_per_step": m["tokens_per_step"], "seconds": self.seconds}

    def table(self) -> str:
        """A short text table: the costs, α, the prediction per γ and the measurement."""
        lines = [f"{self.model} on {self.device} ({self.dtype}, {self.threads} thread(s)): {self.n_layers} layers, "
                 f"{self.n_parameters / 1e6:.1f} M parameters; plain step {self.plain_ms:.2f} ms at context "
                 f"{self.context}",
                 "draft cost c against blocks kept: " + ", ".join(
                     f"{r['kept']:.2f} -> {r['c']:.2f}" for r in self.draft_costs if r["label"] != "draft set"),
                 "verify cost c_v against tokens verified: " + ", ".join(
                     f"{r['tokens']} -> {r['c_v']:.2f}" for r in self.verify_costs),
                 f"draft set ({self.skip_source}{', int8 weights' if self.draft_weights else ''}): {self.kept:.2f} "
                 f"of the blocks kept, c = {self.c:.2f}, "
                 f"agreement alpha = {self.alpha:.3f} ({self.n_positions} positions); prefill "
                 f"{self.prefill:.2f} plain steps",
                 f"{'gamma':>5} {'E(a,g)':>7} {'limit x':>8} | this run: {'tok/step':>8} {'step cost':>9} "
                 f"{'speedup':>7}"]
        for p in self.predictions:
            mark = "  <- measured" if p["gamma"] == self.gamma else ""
            lines.append(f"{p['gamma']:>5} {p['tokens_per_step_long']:>7.2f} {p['decode_speedup']:>8.2f} | "
                         f"{'':>10}{p['tokens_per_step']:>8.2f} {p['step_cost']:>9.2f} {p['speedup']:>7.2f}{mark}")
        m = self.measured
        lines.append(f"predicted {self.predicted_speedup:.2f}x, measured {self.measured_speedup:.2f}x "
                     f"({m['speedup_min']:.2f}-{m['speedup_max']:.2f} over {self.repeats} repetitions; "
                     f"{m['tokens_per_step']:.2f} tokens per step): prediction {100 * self.error:+.1f} %"
                     f"{' (inside the measured range)' if self.within_noise else ''}; took {self.seconds:.0f} s")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {**asdict(self), "summary": self.summary(), "budget": self.budget()}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_clean(self.to_dict()), indent=2))
        return path


def _clean(value):
    """JSON-safe: NaN and infinities as None, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _whole(parts: dict, new_tokens: int) -> float:
    """(P + N − 1) / (P + N / tokens per step · step cost), the step cost the sum of its three parts."""
    cost = parts["draft cost per step"] + parts["verify cost per step"] + parts["rest of a step"]
    P = parts["prefill"]
    return (P + new_tokens - 1) / (P + new_tokens / parts["tokens per step"] * cost)


def _run_phases(runs, spec: Method, plain: Method, new_tokens: int) -> dict:
    """The draft's phases over every timed call, in plain steps of the run's own plain loop (its seconds less its
    prefill, taken as the draft's measured prefill, per decoding step after the prefill), and how acceptance went:
    ``first_acceptance`` (a step's first drafted token accepted) and ``later_acceptance`` (a drafted token accepted
    given the one before it in its step was)."""
    spec_recs = [r for rep in runs.records[spec] for r in rep]
    plain_recs = [r for rep in runs.records[plain] for r in rep]
    traces = [r.result.trace for r in spec_recs]
    prefill_s = sum(t.prefill_s for t in traces)
    unit = (sum(r.seconds for r in plain_recs) - prefill_s) / sum(r.n_new - 1 for r in plain_recs)
    steps = sum(r.steps for r in spec_recs)
    draft_s, verify_s = sum(r.draft_s for r in spec_recs), sum(r.verify_s for r in spec_recs)
    rest_s = sum(r.seconds for r in spec_recs) - prefill_s - draft_s - verify_s
    drafting = [s for t in traces for s in t.steps if s.n_drafted]
    later_tried = sum(min(s.n_accepted, s.n_drafted - 1) for s in drafting)
    later_kept = sum(max(0, s.n_accepted - 1) for s in drafting)
    return {"plain_step_ms": 1e3 * unit, "steps": steps, "tokens_per_step": sum(r.emitted for r in spec_recs) / steps,
            "drafted_per_step": sum(r.drafted for r in spec_recs) / steps,
            "draft_per_step": draft_s / steps / unit, "verify_per_step": verify_s / steps / unit,
            "rest_per_step": rest_s / steps / unit, "prefill": prefill_s / len(traces) / unit,
            "first_acceptance": sum(s.n_accepted > 0 for s in drafting) / len(drafting) if drafting else math.nan,
            "later_acceptance": later_kept / later_tried if later_tried else math.nan,
            "speedup_of_sums": sum(r.seconds for r in plain_recs) / sum(r.seconds for r in spec_recs),
            "new_tokens": new_tokens}


def _prompt_texts(prompts, n_prompts: int, seed: int) -> list[str]:
    if prompts is None:
        return [p.text for p in benchmark_prompts(n_prompts, seed=seed, source="stdlib")]
    texts = [p if isinstance(p, str) else p.text for p in prompts]
    if not texts or not all(texts):
        raise ValueError("prompts must be a non-empty list of non-empty strings (or labkit Prompts)")
    return texts


@dataclass(frozen=True)
class CalibrationPlan:
    """What :func:`calibrate` measures and how (each field is described in its docstring)."""

    kept: Sequence[float] = (1.0, 0.75, 0.5, 0.25)
    gammas: Sequence[int] = (1, 2, 4, 8)
    max_new_tokens: int = 32
    repeats: int = 3
    skip_source: str = ""
    draft_kept: float = 0.5
    draft_weights: str | None = None
    n_prompts: int = 2
    cost_repeats: int = 5
    model_name: str = ""
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("max_new_tokens", self.max_new_tokens, 2)
        check_probability("draft_kept", self.draft_kept)
        object.__setattr__(self, "gammas", sorted({check_int("a gamma", g, 1) for g in self.gammas}))


def _costs(model, prompt_tokens: float, plan: CalibrationPlan,
           skip: SkipSet) -> tuple[int, list[dict], list[dict], float]:
    """(context, draft cost rows, verify cost rows with γ, prefill in plain steps) at the context the run will see."""
    limit = getattr(model.config, "max_position_embeddings", None) or 10 ** 9
    context = min(round(prompt_tokens + plan.max_new_tokens / 2), limit - max(plan.gammas) - 2)
    inner, repeats, seed = inner_for(model, context), plan.cost_repeats, plan.seed
    draft_rows = draft_cost_curve(model, plan.kept, context=context, repeats=repeats, inner=inner,
                                  skips={"draft set": skip}, draft_weights=plan.draft_weights, seed=seed)
    verify_rows = [{**r, "gamma": r["tokens"] - 1} for r in verify_cost_curve(
        model, [1] + [g + 1 for g in plan.gammas], context=context, repeats=repeats, inner=inner, seed=seed)]
    prefill = prefill_cost(model, max(1, round(prompt_tokens) - 1), repeats=repeats, inner=inner,
                           seed=seed)["prefill"]
    return context, draft_rows, verify_rows, prefill


def calibrate(model, tokenizer, plan: CalibrationPlan | None = None, *, prompts=None, skip: SkipSet | None = None,
              progress: bool = False, **options) -> Calibration:
    """Measure c(kept fraction), c_v(γ) and α, predict the speedup self-drafting reaches on this machine, and
    measure it beside the prediction (see the module docstring). Runs on ``model``'s device and dtype.

    ``plan``: a :class:`CalibrationPlan`, or its fields by name (``calibrate(model, tok, max_new_tokens=16)``).
    ``prompts``: texts (or labkit Prompts); None: ``n_prompts`` held-out stdlib prompts (``seed`` picks them). The
    agreement and the measured run use the same prompts, ``max_new_tokens`` new tokens each. ``skip``: the draft's
    skip set (say where it came from in ``skip_source``); None:
    :func:`~labkit.measure.costs.roofline.uniform_layer_skip` at ``draft_kept``. ``draft_weights``: what the draft
    reads ("int8", or None: the model's own), in the costs, the agreement and the run alike. ``repeats``: interleaved
    repetitions of the measured run; ``cost_repeats``: rounds of the cost timings. Takes a few seconds for the shipped
    models and about a minute for a 350 M model on one CPU thread with the defaults."""
    plan = record_from("plan", plan, CalibrationPlan, options)
    max_new_tokens, gammas, draft_weights = plan.max_new_tokens, plan.gammas, plan.draft_weights
    watch = Stopwatch()
    n_layers = len(decoder_layers(model))
    skip_source = plan.skip_source or ("" if skip is not None else f"uniform layer skip, kept {plan.draft_kept:.2f}")
    skip = skip if skip is not None else uniform_layer_skip(n_layers, plan.draft_kept)
    skip.validate(n_layers)
    texts = _prompt_texts(prompts, plan.n_prompts, plan.seed)
    prompt_ids = [tokenizer(t, return_tensors="pt", add_special_tokens=False)["input_ids"] for t in texts]
    prompt_tokens = statistics.fmean(ids.shape[1] for ids in prompt_ids)
    context, draft_rows, verify_rows, prefill = _costs(model, prompt_tokens, plan, skip)
    c = next(r["c"] for r in draft_rows if r["label"] == "draft set")
    device = model_device(model)
    probe = AgreementProbe.from_prompts(model, tokenizer, texts, max_new_tokens)     # it feeds the model's device
    weights = build_draft_weights(model, draft_weights)
    with weights.swapped() if weights is not None else nullcontext():
        alpha = probe.agreement(skip)
    predictions = [predict_speedup(alpha, g, c, verify_rows, prefill=prefill, new_tokens=max_new_tokens)
                   for g in gammas]
    gamma = max(predictions, key=lambda p: p["speedup"])["gamma"]
    plain = Method("plain", "plain loop", family="baseline")
    spec = Method("self-spec", f"self-draft, gamma {gamma}", policy=f"FixedK({gamma})", skip=str(skip),
                  weights=draft_weights or "")
    decoders = [Decoder(plain, lambda x, n: autoregressive_generate(model, x, n, eos_token_id=[])),
                Decoder(spec, lambda x, n: speculative_generate(model, x, skip=skip, policy=FixedK(gamma),
                                                                draft_weights=draft_weights, max_new_tokens=n,
                                                                eos_token_id=[]))]
    with torch.inference_mode():
        runs = run_interleaved(decoders, prompt_ids, max_new_tokens=max_new_tokens, repeats=plan.repeats,
                               desc="calibration", progress=progress)
    return Calibration(
        model=plan.model_name or getattr(model.config, "_name_or_path", "") or type(model).__name__,
        device=device_name(device), dtype=str(model_dtype(model)).removeprefix("torch."),
        threads=torch.get_num_threads(), n_layers=n_layers, n_parameters=sum(p.numel() for p in model.parameters()),
        prompts=texts, prompt_tokens=prompt_tokens, context=context, max_new_tokens=max_new_tokens,
        repeats=plan.repeats, plain_ms=draft_rows[0]["plain_ms"], draft_costs=draft_rows, verify_costs=verify_rows,
        prefill=prefill, skip=skip.to_dict(), skip_source=skip_source, draft_weights=draft_weights, c=c,
        alpha=alpha,
        n_positions=probe.n_positions, predictions=predictions, gamma=gamma, rows=summarise(runs),
        run=_run_phases(runs, spec, plain, max_new_tokens), seconds=watch.seconds, machine=machine_info())


def _widen(text: str) -> tuple[int, int]:
    try:
        hidden, layers = (int(v) for v in text.lower().split("x"))
    except ValueError:
        hidden = layers = 0
    if hidden < 1 or layers < 1:
        raise argparse.ArgumentTypeError(f"must be HIDDENxLAYERS, two integers >= 1 (e.g. 1536x12), got {text!r}")
    return hidden, layers


def main(argv: Sequence[str] | None = None) -> Calibration:
    parser = arguments.command_parser(
        "Predict the speedup self-drafting reaches on this machine (costs c and c_v, agreement alpha), "
        "then measure it beside the prediction.")
    parser.add_argument("--model", type=arguments.model, default="default",
                        help="shipped model name or a Hugging Face model folder")
    parser.add_argument("--device", type=arguments.device, default=None,
                        help="cpu (default), cuda, cuda:N, mps or auto")
    parser.add_argument("--dtype", type=arguments.dtype, default=None, help="fp32 (default), bf16 or fp16")
    parser.add_argument("--widen", type=_widen, default=None, metavar="HIDDENxLAYERS",
                        help="calibrate a randomly initialised model of MODEL's family this wide and deep instead")
    parser.add_argument("--branch-scale", type=arguments.positive, default=0.004,
                        help="with --widen: scale of the blocks' output projections (small: a skip-tolerant model)")
    parser.add_argument("--kept", type=arguments.fraction, nargs="+", default=[1.0, 0.75, 0.5, 0.25],
                        help="fractions of blocks kept for the draft-cost curve")
    parser.add_argument("--draft-kept", type=arguments.fraction, default=0.5,
                        help="blocks kept by the draft when the model has no searched skip set")
    parser.add_argument("--draft-weights", default=None, choices=["int8"],
                        help="the draft reads int8 copies of the weights (default: the model's own)")
    parser.add_argument("--gammas", type=arguments.count, nargs="+", default=[1, 2, 4, 8],
                        help="draft lengths to predict")
    parser.add_argument("--tokens", type=arguments.at_least(2), default=32, help="new tokens per prompt")
    parser.add_argument("--prompts", type=arguments.count, default=2, help="held-out stdlib prompts")
    parser.add_argument("--repeats", type=arguments.count, default=3,
                        help="interleaved repetitions of the measured run")
    parser.add_argument("--seed", type=arguments.natural, default=0)
    parser.add_argument("--threads", type=arguments.count, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", type=arguments.output_file, default=None, help="write the calibration as JSON here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    model, tokenizer = load_model(args.model, device=args.device, dtype=args.dtype)
    name, skip, source = str(args.model), None, ""
    if args.widen:
        hidden, layers = args.widen
        model = widened_model(model, hidden_size=hidden, n_layers=layers, branch_scale=args.branch_scale,
                              seed=args.seed)
        name = f"random {name}-family {hidden}x{layers} (branch scale {args.branch_scale:g})"
    elif str(args.model) in SHIPPED_MODELS:
        skip, source = skip_set_for(args.model, model.config.num_hidden_layers)
    result = calibrate(model, tokenizer, kept=args.kept, gammas=args.gammas, max_new_tokens=args.tokens,
                       repeats=args.repeats, skip=skip, skip_source=source, draft_kept=args.draft_kept,
                       draft_weights=args.draft_weights,
                       n_prompts=args.prompts, model_name=name, seed=args.seed)
    print(result.table())
    if args.out:
        print(f"written to {result.save(args.out)}")
    return result


if __name__ == "__main__":
    main()
