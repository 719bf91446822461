"""The one timing harness of labkit: decoders run interleaved over prompts and repetitions, one row per decoder.

Every wall-clock comparison in :mod:`labkit.measure` (the benchmark, the drafters, parallel decoding, skip
strategies, the stop signal, the temperature sweep, the playground grid) and the search's ``measured`` objective
time through here, so they share one protocol and one column vocabulary.

Protocol (:func:`run_interleaved`): every decoder runs once untimed (first-call costs), then for each repetition
and each prompt every decoder runs once in turn; odd repetitions run the decoders in reverse order (A B C, C B A,
...), so a slow patch of the shared machine, or a decoder that warms the cache for the next, hits all alike.
:func:`interleaved_ms` is the same protocol for plain callables (one forward, one kernel), and :func:`ratio_spread`
reads a cost ratio (c, c_v) from it against a reference timed in the same rounds.

Notation (docs/notation.md): A accepted and d drafted tokens per step, c the cost of one drafted token and c_v of
one verification, both relative to the reference's (the plain loop's) ms per token; the analytic limit
(A + 1)/(d·c + c_v) is :func:`labkit.core.expectation.speedup_limit`.

Columns of a row (:func:`summarise`; NaN wherever a column does not apply, never None):

========================  ==================================================================================
method, kind, model, ...  the :class:`Method` that made the row (its fields, ``method`` its label)
ms_per_token              median over repetitions of (all prompts' seconds / all their new tokens), in ms
ms_min, ms_max            the spread of that over repetitions
speedup                   the reference's median ms per token / this row's (1 for the reference itself)
speedup_min, speedup_max  the spread of the per-repetition speedups (same repetition's reference runs)
acceptance                accepted / drafted (Jacobi: confirmed guesses / guesses fed in)
tokens_per_step           emitted / steps (Jacobi: tokens per iteration)
accepted_per_step (A)     accepted / steps
drafted_per_step (d)      drafted / steps
c, c_v                    draft ms per drafted token and verify ms per step, over the reference's ms per token
limit                     (A + 1)/(d·c + c_v); measured_over_limit = speedup / limit
select_share              a skip strategy's time choosing sets / (draft + verify time)
gated_fraction            steps the target-confidence gate made plain / steps
new_tokens                new tokens per repetition (all prompts)
identical                 greedy decoders: the same tokens as the reference on every run (NaN: not greedy)
========================  ==================================================================================
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields

import torch
from tqdm.auto import tqdm

from ..core.checks import check_int
from ..core.devices import clock
from ..core.expectation import speedup_limit
from ..core.jacobi import JacobiTrace

__all__ = ["Method", "Decoder", "RunRecord", "Runs", "record_of", "timed", "Stopwatch", "run_interleaved",
           "interleaved_ms", "ratio_spread", "run_by_source", "summarise", "frame", "phase_costs", "json_safe",
           "ROW_COLUMNS", "NAN"]

NAN = float("nan")
ROW_COLUMNS = ("ms_per_token", "ms_min", "ms_max", "speedup", "speedup_min", "speedup_max", "acceptance",
               "tokens_per_step", "accepted_per_step", "drafted_per_step", "c", "c_v", "limit",
               "measured_over_limit", "select_share", "gated_fraction", "new_tokens", "identical")


@dataclass(frozen=True)
class Method:
    """What a decoder is, as data: rows are keyed by this, never by parsing their label.

    ``kind``: 'plain', 'generate', 'self-spec', 'early exit', 'separate model', 'prompt lookup', 'jacobi',
    'strategy', ... (free text, compared as is); ``name``: the row's label (default: built from the fields)."""

    kind: str
    name: str = ""
    model: str = ""
    family: str = "labkit"           # 'baseline', 'labkit', 'transformers'
    policy: str = ""
    skip: str = ""                   # a skip set or a strategy
    weights: str = ""                # draft weights ('' the model's own)
    lookup: int = 0                  # prompt-lookup tokens in front of the draft (0: none)
    gate: float | None = None        # the target-confidence gate's min confidence
    exit_layer: int | None = None
    greedy: bool = True

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        parts = [self.kind] + [f"{f.name} {getattr(self, f.name)}" for f in fields(self)[2:-1]
                               if getattr(self, f.name) not in ("", 0, None) and f.name not in ("model", "family")]
        return (f"{self.model}: " if self.model else "") + ", ".join(parts)

    def columns(self) -> dict:
        """The method's fields as row columns (``method``: its label)."""
        out = {"method": self.label}
        out.update({f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"})
        return out


@dataclass
class Decoder:
    """A method and how to run it: ``run(prompt ids (1, T), max new tokens)`` returns a
    :class:`~labkit.core.decoding.GenerationResult` or the output ids of ``model.generate``."""

    method: Method
    run: Callable[[torch.Tensor, int], object]


@dataclass
class RunRecord:
    """One timed call: its seconds, new tokens and output, and the counts its trace recorded (0 without one)."""

    seconds: float
    n_new: int
    sequences: torch.Tensor
    drafted: int = 0
    accepted: int = 0
    steps: int = 0
    emitted: int = 0
    draft_s: float = 0.0
    verify_s: float = 0.0
    select_s: float = 0.0            # a skip strategy's time choosing sets (not in draft_s / verify_s)
    gated: int = 0                   # steps the target-confidence gate made plain
    result: object = None            # the GenerationResult, when the decoder returned one (its trace)


def record_of(out, seconds: float, prompt_length: int) -> RunRecord:
    """A :class:`RunRecord` of a decoder's output. A Jacobi iteration is a verify step whose draft is the previous
    iterate: guesses fed in count as drafted, confirmed guesses as accepted, initial-guess time as draft time."""
    if isinstance(out, torch.Tensor):                              # model.generate's output ids
        return RunRecord(seconds, out.shape[1] - prompt_length, out)
    rec = RunRecord(seconds, out.sequences.shape[1] - out.prompt_length, out.sequences, result=out)
    trace = out.trace
    if isinstance(trace, JacobiTrace):
        s = trace.summary()
        rec.drafted, rec.accepted, rec.steps, rec.emitted = s["guessed"], s["matched"], s["iterations"], rec.n_new
        rec.draft_s, rec.verify_s = s["init_s"], s["forward_s"]
    elif trace is not None:
        s = trace.summary()
        rec.drafted, rec.accepted, rec.steps, rec.emitted = s["drafted"], s["accepted"], s["steps"], s["emitted"]
        rec.draft_s, rec.verify_s, rec.select_s = s["draft_s"], s["verify_s"], s.get("select_s", 0.0)
        # a step was gated when the step before it left the gate closed (policy_state is recorded after it)
        rec.gated = sum(1 for st in trace.steps[:-1] if st.policy_state.get("gate_open") is False)
    return rec


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    """(fn(), its wall-clock seconds)."""
    t0 = clock()
    out = fn()
    return out, clock() - t0


class Stopwatch:
    """Seconds since it was made (``seconds``): how long a whole measurement took, for its record."""

    def __init__(self) -> None:
        self._t0 = clock()

    @property
    def seconds(self) -> float:
        return clock() - self._t0


@dataclass
class Runs:
    """What :func:`run_interleaved` timed: ``records[method][repetition][prompt]`` and the order the calls ran in."""

    methods: list[Method]
    records: dict = field(default_factory=dict)
    order: list[tuple[int, int, Method]] = field(default_factory=list)     # (repetition, prompt, method) per call

    def results(self, method: Method, repetition: int = -1) -> list:
        """The GenerationResults of one repetition (default the last), in prompt order."""
        return [r.result for r in self.records[method][repetition]]


def run_interleaved(decoders: Sequence[Decoder], prompt_ids: Sequence[torch.Tensor], *, max_new_tokens: int,
                    repeats: int = 3, warmup_tokens: int = 16, alternate: bool = True, desc: str = "runs",
                    progress: bool = True) -> Runs:
    """Every decoder on every prompt, ``repeats`` times, interleaved (see the module's protocol): one untimed call
    of ``min(warmup_tokens, max_new_tokens)`` tokens each first (``warmup_tokens`` 0: none)."""
    check_int("repeats", repeats, 1)
    check_int("max_new_tokens", max_new_tokens, 1)
    check_int("warmup_tokens", warmup_tokens, 0)
    methods = [d.method for d in decoders]
    if not prompt_ids or not decoders:
        raise ValueError("give at least one prompt (prompt_ids) and one decoder (decoders)")
    if len(set(methods)) != len(methods):
        raise ValueError(f"decoders must describe distinct methods, got {[m.label for m in methods]}")
    if warmup_tokens:
        for d in decoders:
            d.run(prompt_ids[0], min(warmup_tokens, max_new_tokens))
    runs = Runs(methods, {m: [[] for _ in range(repeats)] for m in methods})
    bar = tqdm(total=repeats * len(prompt_ids) * len(decoders), desc=desc, disable=not progress)
    for rep in range(repeats):
        turn = list(reversed(decoders)) if alternate and rep % 2 else list(decoders)
        for p, ids in enumerate(prompt_ids):
            for d in turn:
                out, seconds = timed(lambda: d.run(ids, max_new_tokens))
                runs.records[d.method][rep].append(record_of(out, seconds, ids.shape[1]))
                runs.order.append((rep, p, d.method))
                bar.update()
    bar.close()
    return runs


def interleaved_ms(calls: Mapping[str, Callable[[], object]], *, repeats: int = 5, inner: int = 1,
                   warmup: int = 1) -> dict[str, list[float]]:
    """The same protocol for plain callables (one forward, one kernel): ``warmup`` untimed calls of each, then
    ``repeats`` rounds in which every callable runs ``inner`` times in turn, odd rounds in reverse order.
    {name: ms per call in each round (the mean of its ``inner`` calls)}."""
    check_int("repeats", repeats, 1)
    check_int("inner", inner, 1)
    check_int("warmup", warmup, 0)
    if not calls:
        raise ValueError("give at least one callable (calls)")
    order = list(calls.items())
    for _, call in order:
        for _ in range(warmup):
            call()
    samples: dict[str, list[float]] = {name: [] for name, _ in order}
    for rep in range(repeats):
        for name, call in (order if rep % 2 == 0 else list(reversed(order))):
            _, seconds = timed(lambda call=call: [call() for _ in range(inner)])
            samples[name].append(1e3 * seconds / inner)
    return samples


def ratio_spread(samples: Sequence[float], reference: Sequence[float],
                 estimate: str = "median") -> tuple[float, float, float]:
    """(estimate, min, max) of the ratio of ``samples`` to ``reference`` (two callables timed in the same rounds).
    min and max: of the per-round ratios samples[i] / reference[i]. ``estimate``: "median", the median of those
    ratios, or "fastest", min(samples) / min(reference): on a busy shared machine other work only ever adds time,
    and a round can catch one call in a slow patch and not the other, so the fastest of each is the steadier
    estimate of what the work itself costs."""
    if estimate not in ("median", "fastest"):
        raise ValueError(f"estimate must be 'median' or 'fastest', got {estimate!r}")
    ratios = [_ratio(a, b) for a, b in zip(samples, reference)]
    if not ratios:
        raise ValueError("no rounds to compare")
    value = statistics.median(ratios) if estimate == "median" else _ratio(min(samples), min(reference))
    return value, min(ratios), max(ratios)


def run_by_source(make_decoders: Callable[[], Sequence[Decoder]], prompt_ids: Mapping[str, Sequence[torch.Tensor]],
                  *, max_new_tokens: int, repeats: int = 3, progress: bool = False) -> dict[str, Runs]:
    """{source: :func:`run_interleaved` of fresh decoders (``make_decoders()``, made per source so that stateful
    policies start alike) on that source's prompts}: the same comparison on several prompt sources."""
    out = {}
    for source, ids in prompt_ids.items():
        with torch.inference_mode():
            out[source] = run_interleaved(make_decoders(), ids, max_new_tokens=max_new_tokens, repeats=repeats,
                                          desc=source, progress=progress)
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b else NAN


def phase_costs(draft_s: float, drafted: int, verify_s: float, steps: int, base_ms: float) -> tuple[float, float]:
    """(c, c_v): draft ms per drafted token and verify ms per step over ``base_ms`` (a plain step's ms); c is 0
    when steps drafted nothing (a gate kept them plain), both NaN without steps."""
    if not steps or not base_ms or math.isnan(base_ms):
        return NAN, NAN
    c = 1e3 * draft_s / drafted / base_ms if drafted else 0.0
    return c, 1e3 * verify_s / steps / base_ms


def _timing(reps: list[list[RunRecord]]) -> list[float]:
    """ms per token of each repetition: all its prompts' seconds / all their new tokens."""
    return [_ratio(1e3 * sum(r.seconds for r in rep), sum(r.n_new for r in rep)) for rep in reps]


def _trace_columns(flat: list[RunRecord], base_ms: float) -> dict:
    steps, drafted, accepted = (sum(r.steps for r in flat), sum(r.drafted for r in flat),
                                sum(r.accepted for r in flat))
    if not steps:
        return dict.fromkeys(("acceptance", "tokens_per_step", "accepted_per_step", "drafted_per_step", "c", "c_v",
                              "limit", "select_share", "gated_fraction"), NAN)
    draft_s, verify_s = sum(r.draft_s for r in flat), sum(r.verify_s for r in flat)
    c, c_v = phase_costs(draft_s, drafted, verify_s, steps, base_ms)
    A, d = accepted / steps, drafted / steps
    return {"acceptance": _ratio(accepted, drafted), "tokens_per_step": sum(r.emitted for r in flat) / steps,
            "accepted_per_step": A, "drafted_per_step": d, "c": c, "c_v": c_v,
            "limit": speedup_limit(A, d, c, c_v) if c_v and not math.isnan(c_v) else NAN,
            "select_share": _ratio(sum(r.select_s for r in flat), draft_s + verify_s),
            "gated_fraction": sum(r.gated for r in flat) / steps}


def _identical(own: list[list[RunRecord]], ref: list[list[RunRecord]]) -> bool:
    return all(torch.equal(a.sequences, b.sequences) for ra, rb in zip(own, ref) for a, b in zip(ra, rb))


def summarise(runs: Runs, reference: Method | None = None) -> list[dict]:
    """One row per method (the module's column vocabulary), in the order the methods were given. ``reference``
    (default: the first method whose kind is 'plain', else none): the speedups, c, c_v and the identity check are
    against its runs; without one they are NaN."""
    if reference is None:
        reference = next((m for m in runs.methods if m.kind == "plain"), None)
    elif reference not in runs.records:
        raise ValueError(f"reference {reference.label!r} is not among the methods run")
    ref_ms = _timing(runs.records[reference]) if reference is not None else None
    base_ms = statistics.median(ref_ms) if ref_ms else NAN
    rows = []
    for m in runs.methods:
        reps = runs.records[m]
        ms = _timing(reps)
        median = statistics.median(ms)
        each = [_ratio(r, s) for r, s in zip(ref_ms, ms)] if ref_ms else [NAN]
        row = {**m.columns(), "ms_per_token": median, "ms_min": min(ms), "ms_max": max(ms),
               "speedup": _ratio(base_ms, median), "speedup_min": min(each), "speedup_max": max(each),
               **_trace_columns([r for rep in reps for r in rep], base_ms),
               "new_tokens": sum(r.n_new for r in reps[0])}
        row["measured_over_limit"] = _ratio(row["speedup"], row["limit"])
        row["identical"] = (_identical(reps, runs.records[reference]) if m.greedy and reference is not None
                            and reference.greedy else NAN)
        rows.append(row)
    return rows


def json_safe(value):
    """``value`` with every NaN float written as None (recursively): rows stored as strict JSON (which has no NaN);
    their readers turn null back into NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def frame(rows: list[dict], index: str | None = "method"):
    """The rows as a pandas DataFrame (indexed by ``index`` when given)."""
    import pandas as pd

    out = pd.DataFrame(rows)
    return out.set_index(index) if index else out
