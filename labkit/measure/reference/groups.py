"""What each reference group measures: named decoders, built with :mod:`labkit.measure.bench.methods`' builders.

A group answers the questions of one place in the lab (``summary``: the reconciled speedup table of the README,
``docs/summary.md`` and notebook 09; ``02``, ``06``, ``07``, ``09``, ``10``, ``11``, ``12``, ``13``: the
comparisons those notebooks state in words). It is a list of :class:`Unit`: one interleaved run
(:func:`labkit.measure.harness.run_interleaved`) of fresh decoders on one prompt source, each decoder under a fixed
label (the row's ``method``), the speedups against the unit's ``baseline`` (the plain loop, or plain *sampling* at
the same temperature). A unit is what :mod:`labkit.measure.reference.run` writes at once, so a stopped run resumes
at the next unit.

Stop rules are made once per unit and carried across its prompts and repetitions, as Draft & Verify's evaluation
carries its adaptive threshold.

A *batch* unit (``batch`` > 0, group ``13``) times batched calls: its prompts reach each decoder in blocks of
``batch`` rows (:func:`labkit.measure.comparisons.batches.pack_rows`), every unit of the group on the same
``prompts`` outside prompts, so a row's ms per token is the inverse of the batch's throughput.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ...artifacts.results import trained_draft_path
from ...core.decoding import speculative_generate
from ...core.draft_config import DraftConfig
from ...core.gate import TargetConfidenceGate
from ...core.policies import AdaptiveThreshold, StaticThreshold
from ...core.skip import SkipSet
from ...core.width import WidthSet, width_drafter
from ..bench.methods import (
    BenchConfig,
    cascade_methods,
    draft_head_methods,
    early_exit_and_gate_methods,
    heads_methods,
    jacobi_methods,
    plain_method,
    pooled_methods,
    sampling_methods,
    shipped_draft,
    tree_methods,
)
from ..comparisons.adaptive import strategy_methods
from ..comparisons.batches import (
    batch_calibration,
    batch_label,
    plain_batch_decoder,
    policy_batch_decoder,
    speculative_batch_decoder,
)
from ..comparisons.cascades import aggressive_level, cascade_decoders, cascade_makers
from ..harness import Decoder, Method
from .loader import AA, PLAIN, SOURCES

__all__ = ["Unit", "Group", "GROUPS", "group_names", "BEST_TREE", "BEST_CASCADE", "GATE", "DEPTH_DRAFT",
           "WIDTH_DRAFTS", "depth_draft", "width_decoders", "BATCH_SIZES"]

#: the tree and cascade the reconciled table shows (the benchmark's first tree and the cascade that keeps lookup's
#: gain on the lab's own sources, docs/notes/cascade_bench.py)
BEST_TREE = ("confidence", (("below", 0.6), ("siblings", 2)))
BEST_CASCADE = "lookup > shipped"
#: 12's rows: the depth draft (the shipped skip set, fp32 draft weights), and the width drafts (label, with the
#: shipped skip set too, kind, kept fraction of every layer's MLP neurons) at the settings that drafted fastest in
#: docs/notes/depth_vs_width.py: dynamic at a quarter of the neurons, pruned at half, the skip set with each at half
DEPTH_DRAFT = "depth draft"
WIDTH_DRAFTS = (("width dynamic 0.25", False, "dynamic", 0.25), ("width pruned 0.5", False, "pruned", 0.5),
                ("depth + dynamic 0.5", True, "dynamic", 0.5), ("depth + pruned 0.5", True, "pruned", 0.5))
#: the target-confidence gate's minimum confidence in the gate rows (the benchmark's)
GATE = 0.4
#: group 13's batch sizes (every one on max(16, B) outside prompts)
BATCH_SIZES = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class Unit:
    """One interleaved run: ``make()`` gives fresh decoders, each already carrying its row label; ``baseline`` is
    the label the speedups are against; ``detail`` {label: what the row runs, in words}."""

    key: str                                  # unique within the group, e.g. 'stdlib' or 'stdlib, T=0.7'
    source: str
    make: Callable[[], list[Decoder]]
    baseline: str = PLAIN
    sampling: bool = False                    # the group's sampling_prompts instead of n_prompts
    model: str = ""                           # the model the unit runs ('' the reference's)
    expected: int = 10                        # decoders it should have: the time estimate's (make() loads models)
    batch: int = 0                            # rows per call (0: one prompt per call, the harness's usual unit)
    prompts: int = 0                          # prompts of the unit (0: the plan's per-group count)


@dataclass(frozen=True)
class Group:
    name: str
    title: str                                # what the group answers, for its .md and `--list`
    units: Callable[[object], list[Unit]]     # units(context): the group's runs (context: reference_run.Context)
    detail: Callable[[object], dict] = lambda ctx: {}


def _named(decoder: Decoder, label: str) -> Decoder:
    """``decoder`` under the row label ``label`` (its Method's name)."""
    return Decoder(replace(decoder.method, name=label), decoder.run)


def _config_decoder(model, config: DraftConfig, label: str, *, lookup: int = 0, gate: float | None = None) -> Decoder:
    """A self-draft configuration as one row, its stop rule made once (carried across prompts)."""
    policy = config.make_policy()
    if gate is not None:
        policy = TargetConfidenceGate(policy, gate)
    method = Method("self-spec", label, policy=config.policy, skip=str(config.skip),
                    weights=config.draft_weights or "", lookup=lookup, gate=gate)
    return Decoder(method, lambda ids, n: speculative_generate(model, ids, skip=config.skip, policy=policy,
                                                               draft_weights=config.draft_weights,
                                                               max_new_tokens=n, lookup=lookup))


def _first(decoders: list[Decoder], label: str, *must: str) -> list[Decoder]:
    """The first decoder whose label holds every string of ``must``, named ``label``; [] when none (a model
    without a draft head, Medusa heads or a draft model)."""
    found = [d for d in decoders if all(m in d.method.label for m in must)]
    return [_named(found[0], label)] if found else []


def _plain_pair(ctx) -> list[Decoder]:
    model = ctx.model()
    return [_named(plain_method(ctx.name, model), PLAIN), _named(plain_method(ctx.name, model), AA)]


def _separate_model(ctx) -> list[Decoder]:
    draft = ctx.draft_model()
    if draft is None:
        return []
    model, policy = ctx.model(), AdaptiveThreshold()
    method = Method("separate model", "separate draft model", policy="adaptive threshold")
    return [Decoder(method, lambda ids, n: speculative_generate(model, ids, draft_model=draft, policy=policy,
                                                                max_new_tokens=n))]


def summary_decoders(ctx) -> list[Decoder]:
    """The reconciled table's greedy rows (:data:`labkit.measure.reference.loader.SUMMARY_METHODS`)."""
    model, name, shipped = ctx.model(), ctx.name, ctx.shipped()
    bench = BenchConfig(models=(name,), draft_weights=("int8",), heads=(("chain", 0.3),), trees=(BEST_TREE,),
                        cascades=(BEST_CASCADE,))
    out = _plain_pair(ctx) + [
        _config_decoder(model, replace(shipped, policy="adaptive"), "paper's recipe"),
        _config_decoder(model, shipped, "shipped configuration"),
        _config_decoder(model, shipped, "shipped + prompt lookup", lookup=bench.lookup_tokens)]
    out += _first(draft_head_methods(bench, name, model), "draft head", "int8 draft")
    out += _first([d for d in heads_methods(bench, name, model)], "Medusa heads", "stop q")
    pooled = pooled_methods(bench, name, model)
    out += _first(pooled, "lookahead", "lookahead (W") + _first(pooled, "token recycling", "token recycling (k")
    out += _first(tree_methods(bench, name, model), "best tree", "tree")
    out += _first(cascade_methods(bench, name, model), "best cascade", "cascade")
    out += _separate_model(ctx)
    out += _first(early_exit_and_gate_methods(bench, {name: (model, None)}, {}), "early exit", "early exit",
                  "adaptive")
    return out


def _summary_units(ctx) -> list[Unit]:
    units = [Unit(source, source, lambda: summary_decoders(ctx), expected=13) for source in ctx.sources(SOURCES)]
    for t in ctx.config.temperatures:
        cfg = BenchConfig(models=(ctx.name,), temperature=t)
        for source in ctx.sources(SOURCES):
            units.append(Unit(f"{source}, T={t:g}", source, sampling=True, baseline=f"plain sampling, T={t:g}",
                              expected=2,
                              make=lambda cfg=cfg, t=t: [_named(d, label) for d, label in zip(
                                  sampling_methods(cfg, {ctx.name: (ctx.model(), None)}),
                                  (f"plain sampling, T={t:g}", f"speculative sampling, T={t:g}"))]))
    return units


def _summary_detail(ctx) -> dict:
    shipped = ctx.shipped()
    n = ctx.model().config.num_hidden_layers
    return {"paper's recipe": "the shipped set and weights, Draft & Verify's adaptive threshold",
            "shipped configuration": shipped.describe(n), "shipped + prompt lookup": "the same, prompt lookup (6) "
            "in front", "draft head": "the trained draft path with its draft head, int8 draft weights",
            "Medusa heads": "top-1 chain of the heads, stop at q < 0.3",
            "lookahead": "lookahead decoding alone (W 3, N 4, G 2: Fu et al. 2024)",
            "token recycling": "token recycling alone (k 3, a 12-node template: Luo et al. 2024)",
            "best tree": f"the shipped draft, "
            f"{BEST_TREE[0]} tree {dict(BEST_TREE[1])}", "best cascade": f"{BEST_CASCADE} (shipped draft's stop rule)",
            "separate draft model": "data/models/draft, adaptive threshold",
            "early exit": f"exit after layer {max(1, n // 2)}, adaptive threshold",
            "speculative sampling": "the searched set, adaptive threshold, against plain sampling at the same T"}


def _per_source(sources: tuple[str, ...], make: Callable[[object], list[Decoder]],
                expected: int) -> Callable[[object], list[Unit]]:
    return lambda ctx: [Unit(s, s, lambda ctx=ctx: make(ctx), expected=expected) for s in ctx.sources(sources)]


def _search_decoders(ctx) -> list[Decoder]:
    """02: what the priced search shipped beside the hand-made trained path (int8, static 0.5)."""
    model, shipped = ctx.model(), ctx.shipped()
    out = [_named(plain_method(ctx.name, model), PLAIN), _config_decoder(model, shipped, "shipped configuration")]
    for skip in trained_draft_path(ctx.name).values():
        out.append(_config_decoder(model, DraftConfig(skip, "int8", "static", 0.5, 12), "hand-made trained path"))
    return out


def _plain_model_decoders(ctx) -> list[Decoder]:
    """02: the model with no trained path, where the search has to find a set."""
    model = ctx.model("plain")
    return [_named(plain_method("plain", model), "plain: plain loop"),
            _config_decoder(model, shipped_draft("plain", model), "plain: shipped configuration")]


def _search_units(ctx) -> list[Unit]:
    return (_per_source(("stdlib", "packages"), _search_decoders, 3)(ctx)
            + [Unit(f"{s}, plain model", s, lambda: _plain_model_decoders(ctx), model="plain", expected=2,
                    baseline="plain: plain loop")
               for s in ctx.sources(("stdlib", "packages"))])


def _parallel_decoders(ctx) -> list[Decoder]:
    model = ctx.model()
    rows = jacobi_methods(BenchConfig(models=(ctx.name,)), {ctx.name: (model, None)})
    return ([_named(plain_method(ctx.name, model), PLAIN), _config_decoder(model, ctx.shipped(),
                                                                            "shipped configuration")]
            + [_named(d, d.method.label.split(": ", 1)[-1]) for d in rows])


def _strategy_decoders(ctx) -> list[Decoder]:
    """07: the static sets and every skip strategy, static threshold 0.5 (the benchmark's), fresh per source."""
    model = ctx.model()
    out = [_named(plain_method(ctx.name, model), PLAIN)]
    for label, make in ctx.cached("strategies", lambda: strategy_methods(model, ctx.tokenizer())).items():
        strategy, policy = make(), StaticThreshold(0.5, 12)
        method = Method("strategy", label, skip=label, policy="static threshold 0.5")
        out.append(Decoder(method, lambda ids, n, s=strategy, p=policy: speculative_generate(
            model, ids, skip=s, policy=p, max_new_tokens=n)))
    return out + [_config_decoder(model, ctx.shipped(), "shipped configuration")]


def _drafter_decoders(ctx) -> list[Decoder]:
    """09: the gate around the shipped draft, beside it (the other drafters: the summary group)."""
    model, shipped = ctx.model(), ctx.shipped()
    return [_named(plain_method(ctx.name, model), PLAIN), _config_decoder(model, shipped, "shipped configuration"),
            _config_decoder(model, shipped, f"shipped + gate {GATE:g}", gate=GATE)]


def _tree_decoders(ctx) -> list[Decoder]:
    """10: the chain, each benchmark tree and each cascade of
    :func:`labkit.measure.comparisons.cascades.cascade_makers`."""
    model, shipped = ctx.model(), ctx.shipped()
    makers = cascade_makers(shipped, aggressive_level(shipped, model.config.num_hidden_layers))
    cascades = cascade_decoders(model, shipped, makers)        # plain loop, chain, cascades
    trees = tree_methods(BenchConfig(models=(ctx.name,)), ctx.name, model)[1:]
    return cascades + [_named(d, d.method.label.split(": ", 1)[-1]) for d in trees]


def _cost_decoders(ctx) -> list[Decoder]:
    """11: the shipped draft with int8 and with fp32 draft weights: c and c_v of each."""
    model, shipped = ctx.model(), ctx.shipped()
    other = replace(shipped, draft_weights=None if shipped.draft_weights else "int8")
    return [_named(plain_method(ctx.name, model), PLAIN), _config_decoder(model, shipped, "shipped configuration"),
            _config_decoder(model, other, f"shipped set, {other.weights_label} draft weights")]


def _width_decoder(model, config: DraftConfig, predictors, label: str) -> Decoder:
    """A width draft (``config.width``, with ``config.skip``) as one row, its stop rule made once."""
    policy, drafter = config.make_policy(), width_drafter(model, predictors, config.width, config.skip)
    method = Method("self-spec", label, policy=config.policy, skip=str(config.skip), weights=str(config.width))
    return Decoder(method, lambda ids, n: speculative_generate(model, ids, drafter=drafter, policy=policy,
                                                               max_new_tokens=n))


def depth_draft(shipped: DraftConfig) -> DraftConfig:
    """12's depth draft: the shipped skip set and stop rule with the model's own (fp32) weights."""
    return replace(shipped, draft_weights=None, width=None)


def width_decoders(name: str, model, depth: DraftConfig, predictors, labels=None) -> list[Decoder]:
    """12's rows: the plain loop, the depth draft and the width drafts of :data:`WIDTH_DRAFTS` (those in
    ``labels``; None: all), every draft under the depth draft's stop rule, each made once (carried across
    prompts). Notebook 12's live check runs the same rows."""
    n = model.config.num_hidden_layers
    out = [_named(plain_method(name, model), PLAIN), _config_decoder(model, depth, DEPTH_DRAFT)]
    for label, with_skip, kind, kept in WIDTH_DRAFTS:
        if labels is None or label in labels:
            config = replace(depth, skip=depth.skip if with_skip else SkipSet(),
                             width=WidthSet.uniform(n, kept, kind))
            out.append(_width_decoder(model, config, predictors, label))
    return out


def _width_decoders(ctx) -> list[Decoder]:
    return width_decoders(ctx.name, ctx.model(), depth_draft(ctx.shipped()), ctx.width_predictors())


def _width_detail(ctx) -> dict:
    depth, n = depth_draft(ctx.shipped()), ctx.model().config.num_hidden_layers
    out = {DEPTH_DRAFT: depth.describe(n)}
    for label, with_skip, kind, kept in WIDTH_DRAFTS:
        what = (f"{kind}: {'per token, the rank-32 predictor' if kind == 'dynamic' else 'once, by importance'} "
                f"keeps {kept:g} of every layer's MLP neurons")
        out[label] = what + (", and the depth draft's skip set" if with_skip else ", no block skipped")
    return out


def _batch_calibration(ctx):
    """13: c(B), c_v(B, γ), α and the load policy of the shipped draft on the group's prompts (measured once)."""
    def make():
        prompts = [ids[0].tolist() for ids in ctx.prompt_ids("packages", max(16, max(BATCH_SIZES)))]
        return batch_calibration(ctx.model(), ctx.shipped(), prompts, batch_sizes=BATCH_SIZES,
                                 tokens=ctx.config.group_tokens, repeats=ctx.config.repeats)
    return ctx.cached("batch calibration", make)


def _batch_decoders(ctx, batch: int) -> list[Decoder]:
    """13: the batched plain loop, the shipped draft always on, and the load policy, at one batch size."""
    model, shipped = ctx.model(), ctx.shipped()
    return [plain_batch_decoder(model, batch_label(PLAIN, batch)),
            speculative_batch_decoder(model, shipped, batch_label("always on", batch)),
            policy_batch_decoder(model, shipped, _batch_calibration(ctx).policy, batch_label("load policy", batch))]


def _batch_units(ctx) -> list[Unit]:
    return [Unit(f"packages, batch {b}", "packages", lambda b=b: _batch_decoders(ctx, b),
                 baseline=batch_label(PLAIN, b), expected=3, batch=b, prompts=max(16, b))
            for b in BATCH_SIZES if ctx.sources(("packages",))]


def _batch_detail(ctx) -> dict:
    """13: what the rows run, and the calibration the load policy came from (its prediction beside the rows)."""
    n = ctx.model().config.num_hidden_layers
    return {"plain loop": "the batched plain loop: one forward of every unfinished row per step",
            "always on": f"the shipped draft ({ctx.shipped().describe(n)}) in every row, masked holes, the batch "
                         "drafting while half its rows do", "load policy": "the same draft with γ capped by batch "
            "size from c(B), c_v(B, γ) and α (0: the batch decodes plainly)",
            "calibration": _batch_calibration(ctx).to_dict()}


GROUPS: dict[str, Group] = {g.name: g for g in (
    Group("summary", "the reconciled speedup table: every drafter on every prompt kind", _summary_units,
          _summary_detail),
    Group("02", "the priced search's pick beside the hand-made trained path; the plain model's search",
          _search_units),
    Group("06", "parallel decoding (Jacobi, Gauss-Seidel) beside the plain loop and the shipped draft",
          _per_source(("stdlib",), _parallel_decoders, 8)),
    Group("07", "static sets and skip strategies", _per_source(("stdlib", "packages"), _strategy_decoders, 7)),
    Group("09", "the target-confidence gate around the shipped draft", _per_source(("stdlib", "packages"),
                                                                                   _drafter_decoders, 3)),
    Group("10", "draft trees and cascades beside the chain", _per_source(("stdlib", "packages"), _tree_decoders, 7)),
    Group("11", "c and c_v of the shipped draft with int8 and fp32 draft weights",
          _per_source(("stdlib",), _cost_decoders, 3)),
    Group("12", "width drafts (dynamic, pruned) and depth + width beside the depth draft, fp32",
          _per_source(("stdlib", "packages"), _width_decoders, 6), _width_detail),
    Group("13", "batched plain and self-speculative decoding and the load policy at batch sizes 1 to 32",
          _batch_units, _batch_detail),
)}


def group_names() -> tuple[str, ...]:
    return tuple(GROUPS)
