"""The objectives of the draft search, all in ms per generated token (lower is better).

- ``modelled``: teacher-forced agreement α(z) of the skip set z (:class:`~labkit.measure.agreement.AgreementProbe`)
  turned into predicted ms per token by this machine's cost model with the best draft length for that α
  (:func:`labkit.measure.costs.analytic.predict`): f(z) = (γ·draft_ms(z) + verify_ms[γ]) / E(α, γ). One batched
  forward per trial.
- ``measured``: wall clock of real greedy :func:`~labkit.core.decoding.speculative_generate` runs on a few
  held-out prompts (a fresh draft policy per trial), decode phase only (the prefill is the same for every
  set), per generated token: the paper's objective, about a second per trial. Each trial times the plain loop
  on the same prompts right before it and reports ``baseline_ms × spec / plain``, so a trial is judged against
  the load of its own seconds, not of the minute the study started in.
- ``priced``: the draft's real condition at no timing noise. Real greedy ``speculative_generate`` runs on the
  choosing prompts (the context's KV written by the full model, later drafts conditioned on earlier drafts, the
  stop rule deciding γ step by step, an adaptive threshold carried from prompt to prompt as Draft & Verify's
  evaluation does), and every step priced with this machine's cost models: k·(draft_ms(z, weights) + o_d) +
  verify_ms[k] + o_v for a step that drafted k tokens, o_d and o_v the decoding loop's own per-token and per-step
  work, calibrated once against real traces. Deterministic (greedy tokens, fixed prices), so the GP sees no
  noise; it searches the whole :class:`~labkit.core.draft_config.DraftConfig` (blocks, draft weights, stop rule).
  Why not ``modelled``: its α is teacher-forced over the whole sequence, not the condition a draft meets while
  decoding, and it overrates the very sets a search ends up choosing (``docs/decisions.md``).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from ..artifacts.prompts import BUILTIN_SOURCES, prompts
from ..core.cache import new_cache
from ..core.decoding import speculative_generate
from ..core.draft_config import DraftConfig
from ..core.forward import forward_tokens
from ..core.policies import AdaptiveThreshold, FixedK
from ..core.skip import SkipSet
from ..measure.agreement import AgreementProbe
from ..measure.costs.analytic import predict
from ..measure.harness import timed

__all__ = ["OBJECTIVES", "DEFAULT_SETTINGS", "ModelledObjective", "MeasuredObjective", "PricedObjective",
           "objective_settings", "build_objective", "policy_factory", "plain_decode_ms", "choosing_texts"]

OBJECTIVES = ("modelled", "measured", "priced")


#: Defaults of each objective's settings (prompts are labkit.prompts(n_prompts, seed=prompt_seed)).
DEFAULT_SETTINGS = {
    "modelled": {"n_prompts": 8, "n_tokens": 32, "prompt_seed": 0},
    "measured": {"n_prompts": 3, "max_new_tokens": 32, "prompt_seed": 0, "policy": "adaptive", "sources": ["stdlib"]},
    # n_prompts per source: the first prompts of each source, which choose configurations (never timed by the bench)
    "priced": {"n_prompts": 2, "max_new_tokens": 48, "prompt_seed": 0, "sources": ["stdlib", "packages"]},
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
    space = "mask"

    def __init__(self, model, tokenizer, cost_model, prompt_texts: list[str], n_tokens: int = 32):
        self.model, self.cost_model = model, cost_model
        self.probe = AgreementProbe.from_prompts(model, tokenizer, prompt_texts, n_tokens)
        self.baseline_ms = cost_model.full_step_ms

    def evaluate(self, skip: SkipSet) -> dict:
        alpha = self.probe.agreement(skip)
        pred = predict(self.cost_model, skip, alpha)
        return {"value": pred.ms_per_token, "alpha": alpha, "gamma": pred.gamma,
                "tokens_per_step": pred.tokens_per_step, "speedup": pred.speedup}


@torch.inference_mode()
def plain_decode_ms(model, inputs: list[torch.Tensor], max_new_tokens: int) -> float:
    """ms per token of plain greedy decoding of ``inputs``, decode phase only: the cache of each prompt minus its
    last token is written untimed, then one forward per emitted token is timed, exactly as the speculative runs'
    decode phase is (not autoregressive_generate, whose time includes the prefill)."""
    seconds, tokens = 0.0, 0
    for ids in inputs:
        cache = new_cache(model)
        if ids.shape[1] > 1:
            forward_tokens(model, ids[:, :-1], 0, cache, logits_to_keep=1)
        token, position = int(ids[0, -1]), ids.shape[1] - 1

        def decode(token=token, position=position, cache=cache):
            for step in range(max_new_tokens):
                token = int(forward_tokens(model, [token], position + step, cache, logits_to_keep=1)[-1].argmax())
        seconds += timed(decode)[1]                              # labkit.measure.harness: the one timer
        tokens += max_new_tokens
    return 1e3 * seconds / tokens


def _as_config(draft) -> tuple[DraftConfig | None, SkipSet]:
    """(config or None, skip set) of what a trial evaluates: a DraftConfig, or a bare SkipSet (mask-only space)."""
    if isinstance(draft, DraftConfig):
        return draft, draft.skip
    if isinstance(draft, SkipSet):
        return None, draft
    raise TypeError(f"an objective evaluates a SkipSet or a DraftConfig, got {type(draft).__name__}")


def _decode_all(model, inputs, draft, policy_factory, max_new_tokens: int) -> list:
    """Greedy speculative decoding of every input with one stop rule carried across them (the paper's evaluation
    does not reset its adaptive threshold between prompts); the traces."""
    config, skip = _as_config(draft)
    kwargs = config.generate_kwargs() if config else {"skip": skip, "policy": policy_factory()}
    return [speculative_generate(model, ids, max_new_tokens=max_new_tokens, eos_token_id=[], **kwargs).trace
            for ids in inputs]


def _trace_counts(traces) -> dict:
    emitted, accepted = sum(t.n_emitted for t in traces), sum(t.n_accepted for t in traces)
    drafted, steps = sum(t.n_drafted for t in traces), sum(len(t.steps) for t in traces)
    return {"acceptance_rate": accepted / drafted if drafted else float("nan"), "tokens_per_step": emitted / steps,
            "drafted_per_step": drafted / steps}


class MeasuredObjective:
    """Wall-clock ms per generated token of greedy speculative decoding (prefill excluded), each trial against
    the plain loop timed on the same prompts just before it."""

    name = "measured"
    space = "mask"

    def __init__(self, model, tokenizer, prompt_texts: list[str], max_new_tokens: int = 32, policy: str = "adaptive"):
        self.model, self.max_new_tokens = model, max_new_tokens
        self.policy_factory = policy_factory(policy)
        self.inputs = [tokenizer(t, return_tensors="pt", add_special_tokens=False)["input_ids"] for t in prompt_texts]
        self._spec_ms(SkipSet())                                            # warm-up
        self.baseline_ms = statistics.median(self._plain_ms() for _ in range(3))

    def _plain_ms(self) -> float:
        return plain_decode_ms(self.model, self.inputs, self.max_new_tokens)

    def _spec_ms(self, draft) -> tuple[float, list]:
        traces = _decode_all(self.model, self.inputs, draft, self.policy_factory, self.max_new_tokens)
        seconds = sum(t.total_s - t.prefill_s for t in traces)
        return 1e3 * seconds / sum(t.n_emitted for t in traces), traces

    def evaluate(self, draft) -> dict:
        plain = self._plain_ms()
        spec, traces = self._spec_ms(draft)
        counts = _trace_counts(traces)
        return {"value": self.baseline_ms * spec / plain, **counts, "speedup": plain / spec, "plain_ms": plain}


class PricedObjective:
    """Real greedy decoding of the choosing prompts, priced step by step by this machine's cost models (see the
    module docstring). ``cost_models``: {None: the model's own weights, "int8": int8 draft weights} as
    :func:`~labkit.measure.costs.costmodel.measure_cost_model` measures them."""

    name = "priced"
    space = "config"

    def __init__(self, model, tokenizer, prompt_texts: list[str], cost_models: dict, max_new_tokens: int = 48,
                 calibration: dict | None = None):
        if None not in cost_models:
            raise ValueError("cost_models needs the model's own weights (key None)")
        self.model, self.max_new_tokens, self.cost_models = model, max_new_tokens, cost_models
        self.inputs = [tokenizer(t, return_tensors="pt", add_special_tokens=False)["input_ids"] for t in prompt_texts]
        if calibration is None:
            calibration = self.calibrate()
        self.calibration = calibration
        self.overhead = {None if w == "fp32" else w: o for w, o in calibration["overhead"].items()}
        self.plain_overhead_ms = calibration["plain_overhead_ms"]
        self.baseline_ms = cost_models[None].full_step_ms + self.plain_overhead_ms

    def calibrate(self) -> dict:
        """The loop's own work, measured now (JSON-ready; a search stores it beside its cost models, so every study
        of a model prices in one currency): per drafted token and per step for each draft weights, and per token of
        the plain loop."""
        plain = statistics.median(plain_decode_ms(self.model, self.inputs[:2], 16) for _ in range(3))
        return {"overhead": {w or "fp32": self._calibrate(w) for w in self.cost_models},
                "plain_overhead_ms": max(0.0, plain - self.cost_models[None].full_step_ms),
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}

    def _calibrate(self, weights) -> dict:
        """The loop's own work per drafted token (o_d) and per step (o_v): measured trace times minus the cost
        model's forwards, for every-other-layer drafts on two prompts (median of 3; never below 0)."""
        L = self.cost_models[None].n_layers
        odd = [layer for layer in range(L) if layer % 2]
        config = DraftConfig(SkipSet(attention=odd, mlp=odd), weights, "static", 0.3, 8)
        o_d, o_v = [], []
        for _ in range(3):
            for trace in _decode_all(self.model, self.inputs[:2], config, None, 24):
                drafted, steps = trace.n_drafted, len(trace.steps)
                model_draft, model_verify = self._forward_ms(config, trace)
                o_d.append((1e3 * sum(s.draft_s for s in trace.steps) - model_draft) / max(1, drafted))
                o_v.append((1e3 * sum(s.verify_s for s in trace.steps) - model_verify) / steps)
        return {"draft_ms": max(0.0, statistics.median(o_d)), "step_ms": max(0.0, statistics.median(o_v))}

    def _forward_ms(self, config: DraftConfig, trace) -> tuple[float, float]:
        """(draft ms, verify ms) of a trace's forwards by the cost models alone."""
        draft_cm, verify_cm = self.cost_models[config.draft_weights], self.cost_models[None]
        per_draft = draft_cm.draft_ms(config.skip)
        drafted = sum(s.n_drafted for s in trace.steps)
        verify = sum(verify_cm.verify_step_ms(min(s.n_drafted, verify_cm.max_draft)) for s in trace.steps)
        return per_draft * drafted, verify

    def price(self, config: DraftConfig, traces) -> float:
        """Priced ms per emitted token of ``traces`` decoded with ``config``."""
        o = self.overhead[config.draft_weights]
        total = 0.0
        for trace in traces:
            draft_ms, verify_ms = self._forward_ms(config, trace)
            total += draft_ms + verify_ms + o["draft_ms"] * trace.n_drafted + o["step_ms"] * len(trace.steps)
        return total / sum(t.n_emitted for t in traces)

    def evaluate(self, config: DraftConfig) -> dict:
        if not isinstance(config, DraftConfig):
            raise TypeError(f"the priced objective evaluates a DraftConfig, got {type(config).__name__}")
        if config.draft_weights not in self.cost_models:
            raise ValueError(f"no cost model for draft_weights={config.draft_weights!r}")
        traces = _decode_all(self.model, self.inputs, config, None, self.max_new_tokens)
        value = self.price(config, traces)
        counts = _trace_counts(traces)
        return {"value": value, **counts, "speedup": self.baseline_ms / value}


def choosing_texts(settings: dict) -> list[str]:
    """The prompts an objective chooses on: the first ``n_prompts`` of ``prompt_seed``'s order of each source
    (these are never among the benchmark's timed prompts, :func:`~labkit.artifacts.prompts.benchmark_prompts`)."""
    sources = settings.get("sources") or ["stdlib"]
    return [p.text for source in sources for p in prompts(settings["n_prompts"], seed=settings["prompt_seed"],
                                                         source=source)]


def objective_settings(objective: str, overrides: dict) -> dict:
    settings = dict(DEFAULT_SETTINGS[objective])
    for k, v in overrides.items():
        if v is not None and k in settings:
            settings[k] = list(v) if k == "sources" else v
    for k in ("n_prompts", "n_tokens", "max_new_tokens"):
        if k in settings and (isinstance(settings[k], bool) or not isinstance(settings[k], int) or settings[k] < 1):
            raise ValueError(f"{k} must be an integer >= 1, got {settings[k]!r}")
    if "policy" in settings:
        policy_factory(settings["policy"])
    for source in settings.get("sources", []):
        if source not in BUILTIN_SOURCES:
            raise ValueError(f"sources must be among {', '.join(BUILTIN_SOURCES)}, got {source!r}")
    return settings


def build_objective(objective: str, model, tokenizer, settings: dict, cost_model=None, calibration: dict | None = None):
    """The evaluator of ``objective``; ``cost_model``: a CostModel (modelled) or {weights: CostModel} (priced),
    ``calibration``: the priced objective's stored loop overheads (None: measured now)."""
    texts = choosing_texts(settings)
    if objective == "modelled":
        return ModelledObjective(model, tokenizer, cost_model, texts, settings["n_tokens"])
    if objective == "priced":
        return PricedObjective(model, tokenizer, texts, cost_model, settings["max_new_tokens"], calibration)
    return MeasuredObjective(model, tokenizer, texts, settings["max_new_tokens"], settings["policy"])
