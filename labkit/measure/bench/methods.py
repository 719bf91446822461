"""The benchmark's methods (:mod:`labkit.measure.bench.run`): what each row runs, as
:class:`~labkit.measure.harness.Decoder` objects whose :class:`~labkit.measure.harness.Method` says what it is.

Every row gets its own policy (and strategy) object, made once: an adaptive one carries its state across the
prompts, as Draft & Verify's evaluation does. Kinds: 'generate' (transformers' ``generate``, with or without a
built-in assistant), 'plain' (labkit's plain loop), 'self-spec', 'early exit', 'separate model', 'jacobi',
'strategy', and in the strategy section the shipped draft's 'tree', 'cascade' and 'medusa' rows beside its chain
(:func:`tree_methods`, :func:`cascade_methods`, :func:`heads_methods`), and the drafters that need no draft forward
of their own, 'lookahead' and 'recycling' (:func:`pooled_methods`).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from ...artifacts.models import load_draft_head, load_medusa_heads, model_folder
from ...artifacts.paths import BENCH_DIR
from ...artifacts.results import best_config, skip_set_for
from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.draft_config import DraftConfig
from ...core.drafters import LookupDrafter
from ...core.early_exit import EarlyExitDrafter
from ...core.gate import TargetConfidenceGate
from ...core.jacobi import INITS, METHODS, jacobi_generate
from ...core.lookahead import lookahead
from ...core.medusa import HeadsDrafter
from ...core.policies import AdaptiveThreshold, FixedK, StaticThreshold
from ...core.recycling import rank_template, token_recycling
from ...core.request import make_drafter
from ...core.tree_shapes import MEDUSA_CHOICES, draft_tree
from ..comparisons.adaptive import reference_sets, strategy_methods
from ..comparisons.cascades import CHAIN, aggressive_level, cascade_decoders, cascade_makers
from ..harness import Decoder, Method, timed

__all__ = ["BenchConfig", "build_methods", "early_exit_and_gate_methods", "jacobi_methods", "sampling_methods",
           "skip_strategy_methods", "draft_head_methods", "tree_methods", "cascade_methods", "heads_methods",
           "pooled_methods",
           "shipped_draft", "hf_method", "plain_method"]


@dataclass
class BenchConfig:
    models: tuple[str, ...] = ("default", "plain")
    device: str = "cpu"                 # where every model runs: "cpu", "cuda", "cuda:N", "mps" or "auto"
    dtype: str = "fp32"                 # their precision: "fp32", "bf16" or "fp16" (identity: against the plain
                                        # loop in the same precision)
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
    trees: tuple = (("confidence", (("below", 0.6), ("siblings", 2))), ("dynamic", (("top_k", 2), ("nodes", 8))))
                                        # the shipped draft growing these trees (labkit.draft_tree), beside its chain
    cascades: tuple[str, ...] = ("lookup > shipped", "lookup > aggressive > shipped, dynamic")
                                        # the shipped draft atop these cascades (labels of measure.comparisons.cascades'
                                        # cascade_makers: the fastest of docs/notes/cascade_bench.py)
    heads: tuple = (("chain", 0.0), ("chain", 0.3), ("tree", 0.0))
                                        # the first model's Medusa heads, when it has them: (shape, stop q): the
                                        # top-1 chain of every head (0) or up to the first q below it; Medusa's tree
    lookahead: tuple = ((3, 4, 2),)     # lookahead decoding (W, N, G) alone, and in front of the shipped draft
    recycling: tuple = ((3, 12),)       # token recycling (k, template nodes) alone, and behind prompt lookup
    out_dir: str = str(BENCH_DIR)       # committed: the README quotes it

    @classmethod
    def quick(cls, **overrides) -> BenchConfig:
        base = dict(models=("default",), n_prompts=2, max_new_tokens=48, repeats=2, hf_builtins=True, jacobi=False)
        base.update(overrides)
        return cls(**base)


def hf_method(label: str, model_name: str, model, **generate_kwargs) -> Decoder:
    """A row of transformers' greedy ``model.generate`` (with ``generate_kwargs``: one of its built-in drafters); its
    ids fed on the model's device and returned on the prompt's, as labkit's decoders return theirs."""
    def run(ids, max_new):
        return model.generate(ids.to(model.device), max_new_tokens=max_new, do_sample=False,
                              pad_token_id=model.generation_config.pad_token_id, **generate_kwargs).to(ids.device)
    return Decoder(Method("generate", f"{model_name}: {label}", model_name,
                          "transformers" if generate_kwargs else "baseline"), run)


def plain_method(model_name: str, model) -> Decoder:
    """labkit's plain greedy loop: every row of its model is compared with it."""
    return Decoder(Method("plain", f"{model_name}: labkit plain loop", model_name, "baseline"),
                   lambda ids, n: autoregressive_generate(model, ids, n))


def _spec(kind: str, label: str, model_name: str, run, **fields) -> Decoder:
    return Decoder(Method(kind, f"{model_name}: {label}", model_name, **fields), run)


def _best_early_exit_layer(model, ids, max_new: int) -> int:
    n = model.config.num_hidden_layers
    best = None
    for layer in sorted({max(1, n // 4), n // 2, max(1, 3 * n // 4)}):
        times = []
        for _ in range(2):
            _, sec = timed(lambda: model.generate(ids.to(model.device), max_new_tokens=max_new, do_sample=False,
                                                   assistant_early_exit=layer,
                                                   pad_token_id=model.generation_config.pad_token_id))
            times.append(sec)
        if best is None or min(times) < best[1]:
            best = (layer, min(times))
    return best[0]


def build_methods(cfg: BenchConfig, loaded: dict, calib_ids: torch.Tensor) -> tuple[list[Decoder], dict]:
    """Per model: generate, the plain loop, self-speculation with each policy and with prompt lookup; on the first
    model also transformers' built-in drafters and the separate draft model (when there is one)."""
    methods, notes = [], {}
    draft = loaded.get(cfg.draft_model)
    for name in cfg.models:
        model, _ = loaded[name]
        skip, source = skip_set_for(name, model.config.num_hidden_layers)
        notes[name] = {"skip_set": str(skip), "skip_ratio": skip.ratio(model.config.num_hidden_layers),
                       "skip_source": source}
        methods += [hf_method("HF generate", name, model), plain_method(name, model)]
        policies = {"fixed K": lambda: FixedK(cfg.fixed_k),
                    "static threshold": lambda: StaticThreshold(cfg.static_threshold, 12),
                    "adaptive threshold": lambda: AdaptiveThreshold()}
        for pname, make_policy in policies.items():
            policy = make_policy()          # one object per row: adaptive state carries across prompts
            methods.append(_spec(
                "self-spec", f"self-spec, {pname}", name, policy=pname, skip=str(skip),
                run=lambda ids, n, m=model, s=skip, p=policy: speculative_generate(m, ids, skip=s, policy=p,
                                                                                   max_new_tokens=n)))
        policy = AdaptiveThreshold()
        methods.append(_spec(
            "self-spec", "self-spec adaptive + prompt lookup", name, policy="adaptive threshold", skip=str(skip),
            lookup=cfg.lookup_tokens,
            run=lambda ids, n, m=model, s=skip, p=policy: speculative_generate(m, ids, skip=s, policy=p,
                                                                               max_new_tokens=n,
                                                                               lookup=cfg.lookup_tokens)))
        if name != cfg.models[0] or not cfg.hf_builtins:
            continue
        exit_layer = _best_early_exit_layer(model, calib_ids, 32)
        notes[name]["early_exit_layer"] = exit_layer
        methods.append(hf_method(f"HF early exit (layer {exit_layer})", name, model, assistant_early_exit=exit_layer))
        methods.append(hf_method("HF prompt lookup", name, model, prompt_lookup_num_tokens=3))
        if draft is not None:
            draft_model = draft[0]
            methods.append(hf_method("HF assistant model (draft)", name, model, assistant_model=draft_model))
            policy = AdaptiveThreshold()
            methods.append(_spec(
                "separate model", "labkit, separate draft model", name, policy="adaptive threshold",
                run=lambda ids, n, m=model, d=draft_model, p=policy: speculative_generate(m, ids, draft_model=d,
                                                                                          policy=p, max_new_tokens=n)))
    return methods, notes


def early_exit_and_gate_methods(cfg: BenchConfig, loaded: dict, notes: dict) -> list[Decoder]:
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
            out.append(_spec(
                "early exit", f"labkit early exit (layer {exit_layer}), {label}", name, policy=label,
                exit_layer=exit_layer, run=lambda ids, k, m=model, e=exit_layer, p=policy: speculative_generate(
                    m, ids, drafter=EarlyExitDrafter(m, e), policy=p, max_new_tokens=k)))
        for label, make_policy in {"adaptive": AdaptiveThreshold, "fixed K": lambda: FixedK(cfg.fixed_k)}.items():
            policy = TargetConfidenceGate(make_policy(), g)
            out.append(_spec(
                "self-spec", f"self-spec {label} + gate {g:g}", name, policy=label, skip=str(skip), gate=g,
                run=lambda ids, k, m=model, s=skip, p=policy: speculative_generate(m, ids, skip=s, policy=p,
                                                                                   max_new_tokens=k)))
    return out


def jacobi_methods(cfg: BenchConfig, loaded: dict) -> list[Decoder]:
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
                return jacobi_generate(model, ids, n, block_size=cfg.jacobi_block, method=m, init=i, **kw)
            out.append(_spec("jacobi", f"{method}, {init} (block {cfg.jacobi_block})", name, policy=method,
                             skip=str(skip) if kw else "", run=run))
    return out


def sampling_methods(cfg: BenchConfig, loaded: dict) -> list[Decoder]:
    """The sampling section: the plain loop and adaptive self-speculation at ``cfg.temperature``, fixed seeds."""
    out = []
    name = cfg.models[0]
    model, _ = loaded[name]
    skip, _ = skip_set_for(name, model.config.num_hidden_layers)
    seeds = iter(range(10**9))
    out.append(_spec(
        "plain", f"labkit plain loop, T={cfg.temperature}", name, family="baseline", greedy=False,
        run=lambda ids, n: autoregressive_generate(model, ids, n, do_sample=True, temperature=cfg.temperature,
                                                   generator=torch.Generator().manual_seed(next(seeds)))))
    policy = AdaptiveThreshold()
    out.append(_spec(
        "self-spec", f"self-spec adaptive, T={cfg.temperature}", name, policy="adaptive threshold", skip=str(skip),
        greedy=False, run=lambda ids, n: speculative_generate(
            model, ids, skip=skip, policy=policy, max_new_tokens=n, do_sample=True, temperature=cfg.temperature,
            generator=torch.Generator().manual_seed(next(seeds)))))
    return out


def skip_strategy_methods(cfg: BenchConfig, loaded: dict) -> list[Decoder]:
    """Rows of the strategy section for the first model: its static sets and every strategy, each without and
    with prompt lookup; every row gets fresh strategy and policy objects (state carries across its prompts)."""
    name = cfg.models[0]
    model, tokenizer = loaded[name]
    methods = []
    for label, make in strategy_methods(model, tokenizer, cfg.strategy_names).items():
        weights = (None,) + (tuple(cfg.draft_weights) if label.startswith("static") else ())
        for w, lookup in itertools.product(weights, (0, cfg.lookup_tokens)):
            strategy, policy = make(), StaticThreshold(cfg.static_threshold, 12)
            methods.append(_spec(
                "strategy", label + (f", {w} draft" if w else "") + (" + prompt lookup" if lookup else ""), name,
                policy=f"static threshold {cfg.static_threshold}", skip=label, weights=w or "", lookup=lookup,
                run=lambda ids, n, m=model, s=strategy, p=policy, k=lookup, w=w: speculative_generate(
                    m, ids, skip=s, policy=p, max_new_tokens=n, lookup=k, draft_weights=w)))
    return (methods + draft_head_methods(cfg, name, model) + tree_methods(cfg, name, model)
            + cascade_methods(cfg, name, model) + heads_methods(cfg, name, model) + pooled_methods(cfg, name, model))


def shipped_draft(name: str, model) -> DraftConfig:
    """The model's shipped draft configuration (:func:`labkit.best_config`: set, weights, stop rule); a model without
    search results: its skip set (:func:`labkit.artifacts.results.skip_set_for`), fp32, static 0.5."""
    try:
        return best_config(name)
    except (FileNotFoundError, LookupError):
        return DraftConfig(skip=skip_set_for(name, model.config.num_hidden_layers)[0])


def tree_methods(cfg: BenchConfig, name: str, model) -> list[Decoder]:
    """The model's shipped draft (:func:`shipped_draft`) drafting one continuation (the chain: the baseline of the
    tree, cascade and heads rows) and growing each of ``cfg.trees`` (:func:`labkit.draft_tree`)."""
    config = shipped_draft(name, model)
    methods = []
    for shape, options in (("chain", ()),) + tuple(cfg.trees):
        policy, kwargs = config.make_policy(), dict(options)
        label = "shipped draft, " + (shape if shape == "chain" else
                                     f"{shape} tree ({', '.join(f'{k} {v:g}' for k, v in kwargs.items())})")
        methods.append(_spec(
            "tree" if shape != "chain" else "strategy", label, name, policy=f"{config.policy} {config.threshold:g}",
            skip="shipped draft", weights=config.draft_weights or "",
            run=lambda ids, n, m=model, p=policy, s=shape, o=kwargs: speculative_generate(
                m, ids, skip=config.skip, draft_weights=config.draft_weights, policy=p, max_new_tokens=n,
                tree=draft_tree(s, **o))))
    return methods


def cascade_methods(cfg: BenchConfig, name: str, model) -> list[Decoder]:
    """The shipped draft (:func:`shipped_draft`) as the top of each of ``cfg.cascades`` (CAS-Spec), built and run as
    :mod:`labkit.measure.comparisons.cascades` does (:func:`~labkit.measure.comparisons.cascades.cascade_makers`
    under the shipped draft, with :func:`~labkit.measure.comparisons.cascades.aggressive_level` as the cheaper model
    level; a fresh cascade per call, so each
    starts from the same estimates; the draft's own stop rule)."""
    if not cfg.cascades:
        return []
    config = shipped_draft(name, model)
    makers = cascade_makers(config, aggressive_level(config, model.config.num_hidden_layers))
    known = [label for label in makers if label != CHAIN]
    unknown = [label for label in cfg.cascades if label not in known]
    if unknown:
        raise ValueError(f"cascades {unknown} are not among labkit.measure.comparisons.cascades' cascades {known}")
    decoders = cascade_decoders(model, config, {label: makers[label] for label in cfg.cascades})
    return [_spec("cascade", f"cascade: {d.method.label}", name, policy=f"{config.policy} {config.threshold:g}",
                  skip="shipped draft", weights=config.draft_weights or "", run=d.run)
            for d in decoders if d.method.kind == "cascade"]


def heads_methods(cfg: BenchConfig, name: str, model) -> list[Decoder]:
    """The model's Medusa heads (:func:`labkit.artifacts.models.load_medusa_heads`; none when it has none) drafting
    as ``docs/notes/medusa_bench.py`` runs them, one row per ``cfg.heads`` entry (shape, stop q): "chain", the top-1
    of every head (FixedK(K), stop q 0) or up to the first head whose top-1 q is below the stop q
    (StaticThreshold); "tree", Medusa's choices (:data:`~labkit.core.tree_shapes.MEDUSA_CHOICES`, the paths the
    heads reach). No draft forward: h comes from the previous verify."""
    try:
        heads = load_medusa_heads(model_folder(name), model) if cfg.heads else None
    except FileNotFoundError:
        heads = None
    if heads is None:
        return []
    k, methods = heads.n_heads, []
    choices = tuple(c for c in MEDUSA_CHOICES if len(c) <= k)
    for shape, stop in cfg.heads:
        if shape not in ("chain", "tree"):
            raise ValueError(f"a Medusa heads row is 'chain' or 'tree', got {shape!r}")
        drafter = HeadsDrafter(model, heads, choices if shape == "tree" else None)   # checks the heads once
        if shape == "tree":
            label, policy_label = f"Medusa heads, tree ({len(choices)} nodes)", f"fixed K {k}"
        elif stop:
            label, policy_label = f"Medusa heads, chain, stop q < {stop:g}", f"static threshold {stop:g}"
        else:
            label, policy_label = f"Medusa heads, chain (K={k})", f"fixed K {k}"
        policy = StaticThreshold(stop, k) if shape == "chain" and stop else FixedK(k)
        methods.append(_spec(
            "medusa", label, name, policy=policy_label, skip="Medusa heads",
            run=lambda ids, n, d=drafter, p=policy: speculative_generate(model, ids, drafter=d, policy=p,
                                                                         max_new_tokens=n)))
    return methods


def draft_head_methods(cfg: BenchConfig, name: str, model) -> list[Decoder]:
    """Rows of the model's draft head (:func:`labkit.load_draft_head`) on the set it was fitted for, at the stop
    threshold recorded with it, each draft weight without and with prompt lookup; none when it has no head."""
    try:
        head = load_draft_head(model_folder(name)) if cfg.draft_head else None
    except FileNotFoundError:
        head = None
    if head is None:
        return []
    trained = reference_sets(model).get("trained draft path")
    label = "static: " + ("trained draft path" if head.skip == trained else "head's set") + " + draft head"
    methods = []
    for w, lookup in itertools.product((None,) + tuple(cfg.draft_weights), (0, cfg.lookup_tokens)):
        policy = StaticThreshold(head.threshold, 12)
        methods.append(_spec(
            "strategy", label + (f", {w} draft" if w else "") + (" + prompt lookup" if lookup else ""), name,
            policy=f"static threshold {head.threshold}", skip=label, weights=w or "", lookup=lookup,
            run=lambda ids, n, m=model, p=policy, k=lookup, w=w: speculative_generate(
                m, ids, skip=head.skip, policy=p, max_new_tokens=n, lookup=k, draft_weights=w, draft_head=head)))
    return methods




def _pooled_run(model, make_drafter_, make_policy):
    """A decoder's run: a fresh drafter and policy per call (the pool, the table start empty on every prompt)."""
    return lambda ids, n: speculative_generate(model, ids, drafter=make_drafter_(), policy=make_policy(),
                                               max_new_tokens=n)


def pooled_methods(cfg: BenchConfig, name: str, model) -> list[Decoder]:
    """Drafters without a draft forward of their own, as ``docs/notes/lookahead_bench.py`` runs them: lookahead
    decoding for each ``cfg.lookahead`` (W, N, G), alone (FixedK(N - 1): its n-grams' length) and in front of the
    shipped draft (:func:`shipped_draft`, its stop rule; the self-draft drafts when the pool has nothing for the
    pending token); token recycling for each ``cfg.recycling`` (k, nodes of
    :func:`~labkit.core.recycling.rank_template`), alone and behind prompt lookup (``cfg.lookup_tokens`` copied
    tokens when the context has a match)."""
    config, methods = shipped_draft(name, model), []
    stop = f"{config.policy} {config.threshold:g}"
    for W, N, G in cfg.lookahead:
        label = f"lookahead (W {W}, N {N}, G {G})"
        methods.append(_spec("lookahead", label, name, policy=f"fixed K {N - 1}", run=_pooled_run(
            model, lambda W=W, N=N, G=G: lookahead(W, N, G), lambda N=N: FixedK(N - 1))))
        def in_front(W=W, N=N, G=G):
            return lookahead(W, N, G, fallback=make_drafter(model, skip=config.skip,
                                                           draft_weights=config.draft_weights))
        methods.append(_spec("lookahead", f"shipped draft, {label} in front", name, policy=stop, skip="shipped draft",
                             weights=config.draft_weights or "", run=_pooled_run(model, in_front, config.make_policy)))
    for k, nodes in cfg.recycling:
        template = rank_template(nodes, k)
        depth, label = max(map(len, template)), f"token recycling (k {k}, {nodes} nodes)"
        methods.append(_spec("recycling", label, name, policy=f"fixed K {depth}", run=_pooled_run(
            model, lambda k=k, t=template: token_recycling(k, t), lambda d=depth: FixedK(d))))
        def behind(k=k, t=template):
            return LookupDrafter(cfg.lookup_tokens, token_recycling(k, t))
        longest = max(depth, cfg.lookup_tokens)
        methods.append(_spec("recycling", f"prompt lookup, then {label}", name, policy=f"fixed K {longest}",
                             lookup=cfg.lookup_tokens, run=_pooled_run(model, behind, lambda d=longest: FixedK(d))))
    return methods
