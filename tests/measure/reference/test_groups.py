"""What each reference group measures: the reconciled table's rows on the shipped model, every group's units, and a
short run of one unit whose greedy rows are token-identical to the plain loop (prompts of one token included)."""
import pytest
import torch

from labkit.core.width import WidthPredictors
from labkit.measure.reference import run as rr
from labkit.measure.reference.groups import DEPTH_DRAFT, GROUPS, WIDTH_DRAFTS, summary_decoders
from labkit.measure.reference.loader import AA, PLAIN, SOURCES, SUMMARY_METHODS


@pytest.fixture(scope="module")
def ctx():
    return rr.Context(rr.ReferenceConfig.fast())


def test_the_summary_rows_are_the_reconciled_table(ctx):
    labels = [d.method.label for d in summary_decoders(ctx)]
    assert labels == list(SUMMARY_METHODS)                    # the shipped model has every drafter the table names
    units = GROUPS["summary"].units(ctx)
    greedy = [u for u in units if not u.sampling]
    assert [u.source for u in greedy] == list(SOURCES)
    sampled = [u for u in units if u.sampling]
    assert len(sampled) == 2 * len(SOURCES) and all(u.baseline.startswith("plain sampling, T=") for u in sampled)
    labels = [d.method.label for d in sampled[0].make()]
    assert labels == [sampled[0].baseline, sampled[0].baseline.replace("plain", "speculative")]


def test_every_group_has_units_with_a_baseline_among_their_decoders(ctx):
    for name in ("02", "06", "09", "11"):                      # 07 measures block importance, 10 builds cascades
        for unit in GROUPS[name].units(ctx):
            labels = [d.method.label for d in unit.make()]
            assert unit.baseline in labels and len(labels) == len(set(labels)) >= 2, (name, unit.key, labels)


def test_a_short_unit_runs_token_identical_to_the_plain_loop(ctx):
    group = GROUPS["11"]
    unit = group.units(ctx)[0]
    prompts = ctx.prompt_ids("stdlib", 1) + [torch.tensor([[ctx.tokenizer()("def")["input_ids"][0]]])]
    ctx._cache["prompts:stdlib:2"] = prompts
    rows = rr._unit_rows(ctx, group, unit)
    assert [r.method for r in rows][0] == PLAIN and all(r.identical for r in rows)
    assert all(r.repetitions == 5 and r.tokens == 32 for r in rows) and AA not in [r.method for r in rows]


def test_the_width_group_asks_the_command_line_for_its_predictors(ctx):
    """12: the plain loop, the depth draft and the width drafts per source; measure does not import training, so
    the predictors come from the fitter the command line gives (labkit.cli.reference_main), a clear error without."""
    units = GROUPS["12"].units(ctx)
    assert [u.source for u in units] == ["stdlib", "packages"]
    with pytest.raises(RuntimeError, match="fitter"):
        units[0].make()
    given = rr.Context(ctx.config, fit_width=lambda name, model, tokenizer: WidthPredictors.random(model, rank=4))
    given._cache.update(ctx._cache)                              # the model already loaded
    labels = [d.method.label for d in GROUPS["12"].units(given)[0].make()]
    assert labels == [PLAIN, DEPTH_DRAFT] + [label for label, *_ in WIDTH_DRAFTS]
    detail = GROUPS["12"].detail(given)
    assert set(detail) == set(labels[1:]) and "fp32 draft weights" in detail[DEPTH_DRAFT]


def test_the_batch_group_runs_every_batch_size_identical_to_the_batched_plain_loop(ctx):
    from labkit.core.batch_decoding import LoadPolicy
    from labkit.measure.comparisons.batches import BatchCalibration
    from labkit.measure.costs.batch_costs import BatchCosts
    from labkit.measure.reference.groups import BATCH_SIZES

    group = GROUPS["13"]
    units = group.units(ctx)
    assert [u.batch for u in units] == list(BATCH_SIZES) and all(u.prompts >= max(16, u.batch) for u in units)
    costs = BatchCosts([1, 2], [1, 2], 8, [1.0, 1.0], [0.5, 0.5], {1: [1.1, 1.1], 2: [1.2, 1.2]})
    ctx._cache["batch calibration"] = BatchCalibration(costs, 0.8, 0.7, LoadPolicy((1, 2), (2, 0)))
    unit = units[1]                                                     # batch 2
    tokenizer = ctx.tokenizer()
    ctx._cache["prompts:packages:16"] = [tokenizer(t, return_tensors="pt")["input_ids"]
                                         for t in ("def add(a, b):", "import os\n", "class A:", "x = [")]
    rows = rr._unit_rows(ctx, group, unit)
    assert [r.method for r in rows] == ["plain loop, batch 2", "always on, batch 2", "load policy, batch 2"]
    assert all(r.identical for r in rows) and rows[2].acceptance != rows[2].acceptance     # policy off at 2: NaN
    assert group.detail(ctx)["calibration"]["policy"]["max_draft"] == [2, 0]
