"""Where an early-exit generation spends its time: labkit's :class:`~labkit.core.early_exit.EarlyExitDrafter`
against transformers' ``generate(assistant_early_exit=E)``, instrumented the same way.

Notation (as everywhere in labkit): p target, q draft, γ max draft, d drafted per step.

Every call of the model's base (``model.model``) is timed and classified by which decoder layers it ran
(forward hooks on the first and the last decoder layer, on the instance only, removed afterwards):

- ``full``: layers 0..L-1 (a plain step, a prefill, a plain verify: transformers' verify of a draft);
- ``early``: layers 0..E-1 only (drafting; transformers' assistant also prefills the prompt this way);
- ``late``: layers E..L-1 only (labkit's verify, which reuses the draft's early layers).

The sums say how many tokens each layer group processed (with cache sharing the first layer reads each
drafted token once; without it, twice) and how much wall time lies outside model calls (the decoding
loop: transformers' nested ``generate`` per drafting round, logits processors, stopping criteria).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import torch

from ..core.decoding import speculative_generate
from ..core.early_exit import EarlyExitDrafter
from ..core.policies import DraftPolicy
from ..core.skip import decoder_layers

__all__ = ["CallProfile", "profiling_calls", "hf_early_exit_profile", "labkit_early_exit_profile"]


@dataclass
class CallProfile:
    calls: list[tuple[str, int, float]] = field(default_factory=list)    # (kind, tokens, seconds) per base call
    total_s: float = 0.0
    new_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    steps: int = 0

    def summary(self) -> dict:
        out = {"ms_per_token": 1e3 * self.total_s / self.new_tokens if self.new_tokens else float("nan"),
               "new_tokens": self.new_tokens, "steps": self.steps,
               "acceptance": self.accepted / self.drafted if self.drafted else float("nan"),
               "tokens_per_step": self.new_tokens / self.steps if self.steps else float("nan")}
        in_calls = 0.0
        for kind in ("full", "early", "late"):
            mine = [c for c in self.calls if c[0] == kind]
            seconds = sum(c[2] for c in mine)
            in_calls += seconds
            out[f"{kind}_calls"] = len(mine)
            out[f"{kind}_tokens"] = sum(c[1] for c in mine)
            out[f"{kind}_ms_per_token"] = 1e3 * seconds / self.new_tokens if self.new_tokens else float("nan")
        out["outside_ms_per_token"] = 1e3 * (self.total_s - in_calls) / self.new_tokens if self.new_tokens else float("nan")
        out["first_layer_tokens"] = out["full_tokens"] + out["early_tokens"]
        out["last_layer_tokens"] = out["full_tokens"] + out["late_tokens"]
        return out


@contextlib.contextmanager
def profiling_calls(model, profile: CallProfile):
    """Time and classify every call of ``model.model`` (the decoder stack + final norm) while inside."""
    layers, base = decoder_layers(model), model.model
    ran = {"first": False, "last": False}
    started = []

    def before(module, args, kwargs):
        ran.update(first=False, last=False)
        started.append(time.perf_counter())

    def after(module, args, kwargs, output):
        seconds = time.perf_counter() - started.pop()
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            ids = kwargs["inputs_embeds"]
        kind = {(True, True): "full", (True, False): "early", (False, True): "late"}.get((ran["first"], ran["last"]))
        profile.calls.append((kind or "none", int(ids.shape[1]), seconds))

    handles = [base.register_forward_pre_hook(before, with_kwargs=True),
               base.register_forward_hook(after, with_kwargs=True),
               layers[0].register_forward_hook(lambda *a: ran.__setitem__("first", True)),
               layers[-1].register_forward_hook(lambda *a: ran.__setitem__("last", True))]
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
        t0 = time.perf_counter()
        out = model.generate(input_ids, max_new_tokens=max_new_tokens, do_sample=False, assistant_early_exit=exit_layer,
                             pad_token_id=model.generation_config.pad_token_id)
        profile.total_s = time.perf_counter() - t0
    profile.new_tokens = out.shape[1] - input_ids.shape[1]
    verifies = [c for c in profile.calls if c[0] == "full"]
    profile.steps = len(verifies)
    # the first verify reads the prompt too; later ones read [last token, candidates]
    profile.drafted = sum(t - 1 for _, t, _ in verifies[1:]) + (verifies[0][1] - input_ids.shape[1] if verifies else 0)
    profile.accepted = profile.new_tokens - profile.steps
    return profile


def labkit_early_exit_profile(model, input_ids: torch.Tensor, exit_layer: int, max_new_tokens: int,
                              policy: DraftPolicy) -> CallProfile:
    """The same generation with labkit's :class:`EarlyExitDrafter` (greedy), profiled the same way."""
    profile = CallProfile()
    drafter = EarlyExitDrafter(model, exit_layer)
    with profiling_calls(model, profile):
        t0 = time.perf_counter()
        out = speculative_generate(model, input_ids, drafter=drafter, policy=policy, max_new_tokens=max_new_tokens)
        profile.total_s = time.perf_counter() - t0
    summary = out.trace.summary()
    profile.new_tokens, profile.steps = summary["emitted"], summary["steps"]
    profile.drafted, profile.accepted = summary["drafted"], summary["accepted"]
    return profile
