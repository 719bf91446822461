"""The two objectives of the skip-set search, both in ms per generated token (lower is better).

- ``modelled``: teacher-forced agreement α(z) of the skip set z (:class:`~labkit.measure.agreement.AgreementProbe`)
  turned into predicted ms per token by this machine's cost model with the best draft length for that α
  (:func:`labkit.measure.analytic.predict`): f(z) = (γ·draft_ms(z) + verify_ms[γ]) / E(α, γ). One batched
  forward per trial.
- ``measured``: wall clock of real greedy :func:`~labkit.core.decoding.speculative_generate` runs on a few
  held-out prompts (a fresh draft policy per trial), decode phase only (the prefill is the same for every
  set), per generated token: the paper's objective, about a second per trial.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from ..artifacts.prompts import prompts
from ..core.cache import new_cache
from ..core.decoding import speculative_generate
from ..core.forward import forward_tokens
from ..core.policies import AdaptiveThreshold, FixedK
from ..core.skip import SkipSet
from ..measure.agreement import AgreementProbe
from ..measure.analytic import predict

__all__ = ["OBJECTIVES", "DEFAULT_SETTINGS", "ModelledObjective", "MeasuredObjective", "objective_settings",
           "build_objective", "policy_factory"]

OBJECTIVES = ("modelled", "measured")


#: Defaults of each objective's settings (prompts are labkit.prompts(n_prompts, seed=prompt_seed)).
DEFAULT_SETTINGS = {
    "modelled": {"n_prompts": 8, "n_tokens": 32, "prompt_seed": 0},
    "measured": {"n_prompts": 3, "max_new_tokens": 32, "prompt_seed": 0, "policy": "adaptive"},
}


def policy_factory(spec: str) -> Callable:
    if spec == "adaptive":
        return AdaptiveThreshold
    if spec.startswith("fixed:"):
        k = int(spec.split(":", 1)[1])
        FixedK(k)                                                      # validates k
        return lambda: FixedK(k)
    raise ValueError(f"policy must be 'adaptive' or 'fixed:K', got {spec!r}")


class ModelledObjective:
    """alpha(z) from teacher-forced agreement -> predicted ms/token from the cost model."""

    name = "modelled"

    def __init__(self, model, tokenizer, cost_model, prompt_texts: list[str], n_tokens: int = 32):
        self.model, self.cost_model = model, cost_model
        self.probe = AgreementProbe.from_prompts(model, tokenizer, prompt_texts, n_tokens)
        self.baseline_ms = cost_model.full_step_ms

    def evaluate(self, skip: SkipSet) -> dict:
        alpha = self.probe.agreement(skip)
        pred = predict(self.cost_model, skip, alpha)
        return {"value": pred.ms_per_token, "alpha": alpha, "gamma": pred.gamma,
                "tokens_per_step": pred.tokens_per_step, "speedup": pred.speedup}


class MeasuredObjective:
    """Wall-clock ms per generated token of greedy speculative decoding (prefill excluded)."""

    name = "measured"

    def __init__(self, model, tokenizer, prompt_texts: list[str], max_new_tokens: int = 32, policy: str = "adaptive"):
        self.model, self.max_new_tokens = model, max_new_tokens
        self.policy_factory = policy_factory(policy)
        self.inputs = [tokenizer(t, return_tensors="pt", add_special_tokens=False)["input_ids"] for t in prompt_texts]
        self.evaluate(SkipSet())                                            # warm-up
        # plain greedy decoding per token, prefill excluded (as for the speculative runs), median of 3
        per_token = [self._plain_ms_per_token() for _ in range(3)]
        self.baseline_ms = statistics.median(per_token)

    @torch.inference_mode()
    def _plain_ms_per_token(self) -> float:
        # Not autoregressive_generate: this loop is timed exactly like the speculative runs below (cache of the
        # prompt minus its last token, then one forward per emitted token), so the ratio is like for like.
        seconds, tokens = 0.0, 0
        for ids in self.inputs:
            cache = new_cache(self.model)
            if ids.shape[1] > 1:
                forward_tokens(self.model, ids[:, :-1], 0, cache, logits_to_keep=1)
            token, position = int(ids[0, -1]), ids.shape[1] - 1
            t0 = time.perf_counter()
            for _ in range(self.max_new_tokens):
                token = int(forward_tokens(self.model, [token], position, cache, logits_to_keep=1)[-1].argmax())
                position += 1
            seconds += time.perf_counter() - t0
            tokens += self.max_new_tokens
        return 1e3 * seconds / tokens

    def evaluate(self, skip: SkipSet) -> dict:
        policy = self.policy_factory()
        seconds, emitted, accepted, drafted, steps = 0.0, 0, 0, 0, 0
        for ids in self.inputs:
            trace = speculative_generate(self.model, ids, skip=skip, policy=policy, max_new_tokens=self.max_new_tokens,
                                         eos_token_id=[]).trace
            seconds += trace.total_s - trace.prefill_s
            emitted, accepted = emitted + trace.n_emitted, accepted + trace.n_accepted
            drafted, steps = drafted + trace.n_drafted, steps + len(trace.steps)
        value = 1e3 * seconds / emitted
        return {"value": value, "acceptance_rate": accepted / drafted if drafted else float("nan"),
                "tokens_per_step": emitted / steps, "drafted_per_step": drafted / steps,
                "speedup": getattr(self, "baseline_ms", float("nan")) / value}


def objective_settings(objective: str, overrides: dict) -> dict:
    settings = dict(DEFAULT_SETTINGS[objective])
    for k, v in overrides.items():
        if v is not None and k in settings:
            settings[k] = v
    for k in ("n_prompts", "n_tokens", "max_new_tokens"):
        if k in settings and (isinstance(settings[k], bool) or not isinstance(settings[k], int) or settings[k] < 1):
            raise ValueError(f"{k} must be an integer >= 1, got {settings[k]!r}")
    if "policy" in settings:
        policy_factory(settings["policy"])
    return settings


def build_objective(objective: str, model, tokenizer, settings: dict, cost_model=None):
    texts = [p.text for p in prompts(settings["n_prompts"], seed=settings["prompt_seed"])]
    if objective == "modelled":
        return ModelledObjective(model, tokenizer, cost_model, texts, settings["n_tokens"])
    return MeasuredObjective(model, tokenizer, texts, settings["max_new_tokens"], settings["policy"])
