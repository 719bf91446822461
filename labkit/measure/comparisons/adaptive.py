"""Static versus adaptive skip sets, measured side by side on several prompt sources (notebook 07's numbers).

Every method runs on the same prompts, interleaved (for each repetition and prompt, every method once in
turn), greedy, one strategy object per method and source that carries what it learns from prompt to prompt.
A row per (source, method) with the columns of :mod:`labkit.measure.harness` (ms per token, speedup over the
plain loop of the same run and its spread, acceptance, tokens per step, A and d per step, c, c_v, the analytic
limit (A + 1) / (d c + c_v), the share of decode time spent choosing sets, whether the output equals plain greedy
decoding), plus how many sets a strategy drafted with. Traces are kept, so the sets each strategy drafted with can
be drawn step by step.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ...artifacts.prompts import benchmark_prompts, prompts, source_info, source_label
from ...artifacts.results import skip_set_for, trained_draft_path
from ...core.checks import record_from
from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.draft_config import DraftConfig
from ...core.draft_head import DraftHead
from ...core.policies import StaticThreshold
from ...core.skip import SkipSet
from ..agreement import AgreementProbe
from ..harness import Decoder, Method, run_interleaved, summarise
from ..strategy_inputs import block_importance, model_name_of, skip_strategy, strategy_cost_model

__all__ = ["reference_sets", "strategy_methods", "Comparison", "compare_strategies", "StrategyPlan",
           "set_timeline",
           "agreement_by_source", "compare_configs", "PLAIN"]

PLAIN = "plain loop"


def reference_sets(model, model_name: str | None = None) -> dict[str, SkipSet]:
    """The static sets a lab model ships: {"searched set": the search's best, "trained draft path": the fixed path
    it was trained with (skip-robust models only)}."""
    name = model_name or model_name_of(model)
    out = {"searched set": skip_set_for(name, model.config.num_hidden_layers)[0]}
    out.update(trained_draft_path(name))
    return out


def strategy_methods(model, tokenizer, names: Sequence[str] = ("on-the-fly", "in-context", "knapsack"), *,
                     start: SkipSet | None = None, options: Mapping | None = None, cost_model=None,
                     importance=None) -> dict[str, Callable[[], object]]:
    """{label: factory of a fresh strategy}: a "static: <set>" row per shipped set, then each named strategy
    starting from ``start`` (default: the trained draft path when the model has one, else the searched set).
    The knapsack's inputs (cost model, block importance at ``start``) are measured once, here."""
    refs = reference_sets(model)
    start = start if start is not None else refs.get("trained draft path", refs["searched set"])
    options = options or {}
    if "knapsack" in names:
        cost_model = cost_model if cost_model is not None else strategy_cost_model(model)
        importance = importance if importance is not None else block_importance(model, tokenizer, anchor=start)
    methods = {f"static: {label}": (lambda s=skip: skip_strategy("static", model, skip=s))
               for label, skip in refs.items()}
    for name in names:
        methods[name] = (lambda n=name: skip_strategy(n, model, skip=start, cost_model=cost_model,
                                                      importance=importance, **dict(options.get(n, {}))))
    return methods


@dataclass
class Comparison:
    """What :func:`compare_strategies` measured: one row per (source, method), and every run's result."""

    frame: object                                     # pandas DataFrame
    results: dict = field(default_factory=dict)       # (source, method) -> [GenerationResult, ...] (prompt order)
    strategies: dict = field(default_factory=dict)    # (source, method) -> the strategy object, after the runs
    prompts: dict = field(default_factory=dict)       # source -> [prompt source names]
    sources: dict = field(default_factory=dict)       # source label -> source_info (package versions, ...)


def _strategy_columns(results: list) -> dict:
    """What a strategy's traces say beyond the harness's columns: how many sets it drafted with, the commonest."""
    used = Counter(str(s.skip) for r in results if r.trace is not None for s in r.trace.steps if s.skip is not None)
    return {"n_sets": len(used), "main_set": used.most_common(1)[0][0] if used else ""}


@dataclass(frozen=True)
class StrategyPlan:
    """How :func:`compare_strategies` runs: ``n_prompts`` benchmark prompts (``held_out=False``: the first prompts,
    the ones that choose configurations) of each of ``sources`` chosen by ``seed``, ``max_new_tokens`` each,
    interleaved ``repeats`` times, prompt lookup of ``lookup`` tokens first; ``policy``: factory of the default stop
    rule (None: a static threshold 0.5, the lab's fastest measured policy)."""

    sources: Sequence = ("stdlib", "packages")
    n_prompts: int = 4
    max_new_tokens: int = 64
    repeats: int = 1
    lookup: int = 0
    policy: Callable[[], object] | None = None
    seed: int = 0
    progress: bool = True
    held_out: bool = True


def compare_strategies(model, tokenizer, methods: Mapping[str, Callable[[], object]], plan: StrategyPlan | None = None,
                       *, draft_weights: Mapping[str, str] | None = None,
                       draft_heads: Mapping[str, DraftHead] | None = None,
                       policies: Mapping[str, Callable[[], object]] | None = None, **options) -> Comparison:
    """Plain loop and every method (``{label: factory of a fresh strategy}``) on the prompts ``plan`` (a
    :class:`StrategyPlan`, or its fields by name) chooses, interleaved; greedy. ``draft_weights``:
    {label: "int8"} for methods whose self-draft reads int8 weights (:mod:`labkit.core.draft_weights`).
    ``draft_heads``: {label: DraftHead} for methods that draft with a head on its own set, at its threshold.
    ``policies``: {label: policy factory} for methods with their own stop rule. A method's policy is made once
    per source and carried across its prompts and repeats (Draft & Verify's evaluation never resets an adaptive
    threshold between prompts). Each row has the speedup's min-max over the repeats."""
    plan = record_from("plan", plan, StrategyPlan, options)
    draft_weights, draft_heads, policies = dict(draft_weights or {}), dict(draft_heads or {}), dict(policies or {})
    for name, given in (("draft_weights", draft_weights), ("draft_heads", draft_heads), ("policies", policies)):
        unknown = sorted(set(given) - set(methods))
        if unknown:
            raise ValueError(f"{name} names methods that are not compared: {unknown}")
    policy, lookup, repeats = plan.policy or (lambda: StaticThreshold(0.5, 12)), plan.lookup, plan.repeats
    comparison = Comparison(frame=None)
    rows = []
    for source in plan.sources:
        label = source_label(source)
        chosen = (benchmark_prompts(plan.n_prompts, seed=plan.seed, source=source) if plan.held_out
                  else prompts(plan.n_prompts, seed=plan.seed, source=source))
        comparison.prompts[label], comparison.sources[label] = [p.source for p in chosen], source_info(source)
        ids = [tokenizer(p.text, return_tensors="pt", add_special_tokens=False)["input_ids"] for p in chosen]
        strategies = {m: make() for m, make in methods.items() if m not in draft_heads}
        decoders = [Decoder(Method("plain", PLAIN, family="baseline"),
                            lambda x, n: autoregressive_generate(model, x, n))]
        for m in methods:
            head = draft_heads.get(m)
            skip, drafts_with = ((head.skip, StaticThreshold(head.threshold, 12)) if head
                                 else (strategies[m], policies.get(m, policy)()))
            decoders.append(Decoder(Method("strategy", m, weights=draft_weights.get(m) or "", lookup=lookup),
                                    lambda x, n, s=skip, p=drafts_with, m=m, h=head: speculative_generate(
                                        model, x, skip=s, policy=p, max_new_tokens=n, lookup=lookup,
                                        draft_weights=draft_weights.get(m), draft_head=h)))
        autoregressive_generate(model, ids[0], 4)            # warm-up of the plain loop only: strategies learn
        runs = run_interleaved(decoders, ids, max_new_tokens=plan.max_new_tokens, repeats=repeats, warmup_tokens=0,
                               desc=f"{label} prompts", progress=plan.progress)
        for d, row in zip(decoders, summarise(runs)):
            m, results = d.method.label, runs.results(d.method)
            select_s = sum(r.select_s for rep in runs.records[d.method] for r in rep) / repeats
            rows.append({"source": label, **row, **_strategy_columns(results),
                         "select_ms_per_token": 1e3 * select_s / max(1, row["new_tokens"])})
            comparison.results[(label, m)] = results
            if m in strategies:
                comparison.strategies[(label, m)] = strategies[m]
    import pandas as pd

    comparison.frame = pd.DataFrame(rows)
    return comparison


def compare_configs(model, tokenizer, configs: Mapping[str, DraftConfig], **options) -> Comparison:
    """:func:`compare_strategies` of whole draft configurations ({label: DraftConfig}): each drafts with its set,
    its weights and its own stop rule (made once per source, carried across prompts). ``options`` as there."""
    for label, config in configs.items():
        if not isinstance(config, DraftConfig):
            raise TypeError(f"configs[{label!r}] must be a DraftConfig, got {type(config).__name__}")
    return compare_strategies(
        model, tokenizer, {label: (lambda c=c: c.skip) for label, c in configs.items()},
        draft_weights={label: c.draft_weights for label, c in configs.items() if c.draft_weights},
        policies={label: c.make_policy for label, c in configs.items()}, **options)


def set_timeline(result, n_layers: int) -> tuple[list[int], list[list[int]]]:
    """(step indices, 2L x steps matrix: 1 where that step's draft skipped the block, 0 kept, -1 no self-draft)
    for the picture of how a strategy's set changes as it decodes. Rows: attention 0..L-1, then MLP 0..L-1."""
    steps = result.trace.steps
    matrix = [[-1] * len(steps) for _ in range(2 * n_layers)]
    for j, step in enumerate(steps):
        if isinstance(step.skip, SkipSet) and step.n_drafted:
            for b, skipped in enumerate(step.skip.to_mask(n_layers)):
                matrix[b][j] = int(skipped)
    return list(range(len(steps))), matrix


def agreement_by_source(model, tokenizer, sets: Mapping[str, SkipSet], *, sources: Sequence = ("stdlib", "packages"),
                        n_prompts: int = 4, n_tokens: int = 32, seed: int = 0):
    """Teacher-forced agreement of each set with the full model on each source's benchmark prompts: a DataFrame
    (source, set, agreement, n_positions). The skipped model's top-1 against the full model's greedy tokens."""
    import pandas as pd

    rows = []
    for source in sources:
        texts = [p.text for p in benchmark_prompts(n_prompts, seed=seed, source=source)]
        probe = AgreementProbe.from_prompts(model, tokenizer, texts, n_tokens)
        for label, skip in sets.items():
            rows.append({"source": source_label(source), "set": label, "agreement": probe.agreement(skip),
                         "n_positions": probe.n_positions, "n_skipped": skip.n_skipped})
    return pd.DataFrame(rows)
