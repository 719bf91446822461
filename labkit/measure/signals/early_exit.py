"""Where an early-exit generation spends its time: labkit's :class:`~labkit.core.early_exit.EarlyExitDrafter`
against transformers' ``generate(assistant_early_exit=E)``, instrumented the same way.

Notation (as everywhere in labkit): p target, q draft, γ max draft, d drafted per step.

Every call of the model's base (``model.model``) is timed and classified by how many tokens its first and
its last decoder layer read (forward hooks on the instance only, removed afterwards):

- ``full``: every layer on every token (a plain step, a prefill, a plain verify: transformers' verify of a draft);
- ``early``: layers 0..E-1 only (drafting; transformers' assistant also prefills the prompt this way);
- ``late``: the late layers on every token, the early ones on fewer (labkit's verify, which reuses the draft's
  early layers and runs them on the one token the draft never fed back).

The sums say how many tokens each layer group processed (with cache sharing the first layer reads each
drafted token once; without it, twice) and how much wall time lies outside model calls (the decoding
loop: transformers' nested ``generate`` per drafting round, logits processors, stopping criteria).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from ...core.decoding import speculative_generate
from ...core.devices import clock
from ...core.early_exit import EarlyExitDrafter
from ...core.policies import DraftPolicy
from ...core.skip import decoder_layers

__all__ = ["CallProfile", "profiling_calls", "hf_early_exit_profile", "labkit_early_exit_profile",
           "interleaved_profiles"]


@dataclass
class CallProfile:
    calls: list[tuple[str, int, int, float]] = field(default_factory=list)   # (kind, first-layer tokens,
                                                                             #  last-layer tokens, s)
    total_s: float = 0.0
    new_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    steps: int = 0

    def summary(self) -> dict:
        n = self.new_tokens
        out = {"ms_per_token": 1e3 * self.total_s / n if n else float("nan"), "new_tokens": n, "steps": self.steps,
               "acceptance": self.accepted / self.drafted if self.drafted else float("nan"),
               "tokens_per_step": n / self.steps if self.steps else float("nan")}
        in_calls = 0.0
        for kind in ("full", "early", "late"):
            mine = [c for c in self.calls if c[0] == kind]
            seconds = sum(c[3] for c in mine)
            in_calls += seconds
            out[f"{kind}_calls"] = len(mine)
            out[f"{kind}_ms_per_token"] = 1e3 * seconds / n if n else float("nan")
        out["outside_ms_per_token"] = 1e3 * (self.total_s - in_calls) / n if n else float("nan")
        out["first_layer_tokens"] = sum(c[1] for c in self.calls)
        out["last_layer_tokens"] = sum(c[2] for c in self.calls)
        return out


def _kind(first: int, last: int) -> str:
    if last == 0:
        return "early" if first else "none"
    return "full" if first == last else "late"            # late: the early layers read fewer tokens (or none)


@contextlib.contextmanager
def profiling_calls(model, profile: CallProfile):
    """Time every call of ``model.model`` (the decoder stack + final norm) while inside, with the tokens its first
    and its last decoder layer read."""
    layers, base = decoder_layers(model), model.model
    read = {"first": 0, "last": 0}
    started = []

    def before(module, args):
        read.update(first=0, last=0)
        started.append(clock())

    def after(module, args, output):
        seconds = clock() - started.pop()
        profile.calls.append((_kind(read["first"], read["last"]), read["first"], read["last"], seconds))

    def counter(key):
        def hook(module, args, kwargs, output):
            hidden = args[0] if args else kwargs["hidden_states"]
            read[key] += int(hidden.shape[1])
        return hook

    handles = [base.register_forward_pre_hook(before), base.register_forward_hook(after),
               layers[0].register_forward_hook(counter("first"), with_kwargs=True),
               layers[-1].register_forward_hook(counter("last"), with_kwargs=True)]
    try:
        yield profile
    finally:
        for h in handles:
            h.remove()


def hf_early_exit_profile(model, input_ids: torch.Tensor, exit_layer: int, max_new_tokens: int) -> CallProfile:
    """One greedy ``model.generate(..., assistant_early_exit=exit_layer)``, profiled. transformers drafts with a
    nested ``generate`` of the same model cut to ``exit_layer`` layers and a cache of its own (so it prefills
    the prompt a second time), up to 20 tokens per round while the draft's confidence is >= 0.4 (its defaults),
    then verifies [last token, drafts] with all layers."""
    profile = CallProfile()
    with profiling_calls(model, profile):
        t0 = clock()
        out = model.generate(input_ids.to(model.device), max_new_tokens=max_new_tokens, do_sample=False,
                             assistant_early_exit=exit_layer,
                             pad_token_id=model.generation_config.pad_token_id)
        profile.total_s = clock() - t0
    profile.new_tokens = out.shape[1] - input_ids.shape[1]
    verifies = [c for c in profile.calls if c[0] == "full"]
    profile.steps = len(verifies)
    # the first verify reads the prompt too; later ones read [last token, candidates]
    profile.drafted = sum(c[2] - 1 for c in verifies[1:]) + (verifies[0][2] - input_ids.shape[1] if verifies else 0)
    profile.accepted = profile.new_tokens - profile.steps
    return profile


def labkit_early_exit_profile(model, input_ids: torch.Tensor, exit_layer: int, max_new_tokens: int,
                              policy: DraftPolicy) -> CallProfile:
    """The same generation with labkit's :class:`EarlyExitDrafter` (greedy), profiled the same way."""
    profile = CallProfile()
    drafter = EarlyExitDrafter(model, exit_layer)
    with profiling_calls(model, profile):
        t0 = clock()
        out = speculative_generate(model, input_ids, drafter=drafter, policy=policy, max_new_tokens=max_new_tokens)
        profile.total_s = clock() - t0
    summary = out.trace.summary()
    profile.new_tokens, profile.steps = summary["emitted"], summary["steps"]
    profile.drafted, profile.accepted = summary["drafted"], summary["accepted"]
    return profile


def interleaved_profiles(model, input_ids: torch.Tensor, exit_layer: int, max_new_tokens: int, make_policy, *,
                         repeats: int = 3) -> dict[str, dict]:
    """Both implementations profiled ``repeats`` times, interleaved (labkit, transformers; then transformers,
    labkit; ...) after one untimed warm-up call each, so a slow patch of a shared machine hits both alike.
    Returns {"labkit" | "transformers": the summary of its median repetition (by ms per token) with ``ms_min``,
    ``ms_max`` (the spread over repetitions) and ``ms_each`` added}. ``make_policy``: a fresh draft policy for
    labkit's run (transformers uses its own defaults: up to 20 tokens while the draft's confidence is >= 0.4)."""
    runs = {"labkit": lambda n: labkit_early_exit_profile(model, input_ids, exit_layer, n, make_policy()),
            "transformers": lambda n: hf_early_exit_profile(model, input_ids, exit_layer, n)}
    for run in runs.values():
        run(min(8, max_new_tokens))                                   # warm-up, untimed
    summaries: dict[str, list[dict]] = {name: [] for name in runs}
    for rep in range(repeats):
        for name in (list(runs) if rep % 2 == 0 else list(reversed(runs))):
            summaries[name].append(runs[name](max_new_tokens).summary())
    out = {}
    for name, reps in summaries.items():
        ms = [s["ms_per_token"] for s in reps]
        median = sorted(reps, key=lambda s: s["ms_per_token"])[len(reps) // 2]
        out[name] = {**median, "ms_min": min(ms), "ms_max": max(ms), "ms_each": ms}
    return out
