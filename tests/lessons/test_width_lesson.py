"""labkit.lessons.width (notebook 12): the measurements on a tiny model (sparsity shares ordered, recall and agreement
in range, every draft timed and read), sentences from reference data that turn with it (reaches the depth draft,
within the noise, slower, and the reason named from the measured columns), live sentences that say "this machine"
and deterministic ones that do not, and the kept-fraction explorer redrawing its figure from the rows."""
import math

import pytest
import torch

from labkit.core.skip import SkipSet
from labkit.core.width import WidthPredictors, WidthSet
from labkit.lessons import width as lw
from labkit.lessons.reference_claims import live_beside_reference
from labkit.measure.agreement import AgreementProbe
from labkit.measure.reference.groups import DEPTH_DRAFT
from labkit.measure.reference.loader import PLAIN, Machine, Reference, ReferenceRow, Spread
from tests.tiny_models import tiny_model

MACHINE = Machine("Test CPU", 1, {}, (0.1, 0.1, 0.1), (0.1, 0.1, 0.1), "2026-11-28", False)


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4)


@pytest.fixture(scope="module")
def predictors(model):
    return WidthPredictors.random(model, rank=4)


def windows(n=3, length=12, seed=0):
    return torch.randint(1, 97, (n, length), generator=torch.Generator().manual_seed(seed))


def test_sparsity_rows_are_ordered_by_share_and_worded(model):
    rows = lw.contribution_sparsity(model, windows())
    assert len(rows) == 4 * 2 and all(0 < r["p10"] <= r["median"] <= r["p90"] <= 1 for r in rows)
    for layer in range(4):
        half, most = (next(r for r in rows if r["layer"] == layer and r["share"] == s) for s in (0.5, 0.9))
        assert half["median"] <= most["median"]
    text = lw.sparsity_sentence(rows)
    assert "90%" in text and "36 held-out tokens" in text and "this machine" not in text and len(text.split()) <= 50


def test_recall_rows_and_sentence(model, predictors):
    rows = lw.recall_rows(model, predictors, windows(), kept=(0.25, 0.5))
    assert len(rows) == 8 and all(0 <= r["predictor"] <= 1 and 0 <= r["static"] <= 1 for r in rows)
    text = lw.recall_sentence(rows, 0.3)                                    # the nearest measured fraction
    assert text.startswith("Keeping 0.25 of the neurons") and "this machine" not in text
    with pytest.raises(ValueError, match="rows"):
        lw.recall_sentence([])


def test_parameters_read_count_blocks_and_neurons(model):
    assert lw.parameters_read(model, None, None) == pytest.approx(1.0)
    half = lw.parameters_read(model, None, WidthSet.uniform(4, 0.5))
    skipped = lw.parameters_read(model, SkipSet(mlp=frozenset({0, 1})), WidthSet.uniform(4, 0.5))
    assert 0 < skipped < half < 1


def probe_of(model, ids):
    with torch.inference_mode():
        targets = model(input_ids=ids).logits.argmax(-1)
    return AgreementProbe(model, ids, targets, torch.ones_like(ids, dtype=torch.bool))


def test_draft_grid_times_and_scores_every_draft(model, predictors):
    skip = SkipSet(attention=frozenset({1}), mlp=frozenset({2}))
    rows = lw.draft_grid(model, predictors, skip, probe_of(model, windows(2, 10)), (0.25, 0.5), context=8,
                         repeats=2)
    assert len(rows) == 1 + 2 * 4 and rows[0]["draft"] == "depth"
    assert all(0 <= r["alpha"] <= 1 and r["c"] > 0 and r["c_min"] <= r["c_max"] for r in rows)
    text = lw.grid_sentence(rows, 0.5)
    assert "this machine" not in text and "the dynamic draft agrees" in text and len(text.split()) <= 50
    assert lw.cost_sentence(rows, 0.5).startswith("On this machine")
    explorer = lw.WidthExplorer(rows, kept=0.5)
    explorer.slider.value = 0.25
    pruned = next(r for r in rows if r["draft"] == "pruned" and r["kept"] == 0.25)
    assert explorer.figure.data[0].y[2] == pytest.approx(pruned["alpha"])
    assert "0.25" in explorer.figure.layout.title.text
    assert explorer.figure.data[1].error_y.array is None and "over the rounds" in explorer.readout.value
    assert "this machine" in explorer.readout.value and explorer.last_update_ms >= 0
    with pytest.raises(ValueError, match="kept must be one of"):
        lw.WidthExplorer(rows, kept=0.1)


def test_mlp_costs_put_time_beside_bytes(model, predictors):
    rows = lw.mlp_costs(model, predictors, (0.25,), repeats=2, inner=1)
    assert [r["kernel"] for r in rows] == ["pruned", "gathered (with predictor)", "predictor alone"]
    assert rows[0]["bytes"] == pytest.approx(round(0.25 * model.config.intermediate_size)
                                             / model.config.intermediate_size)
    assert all(r["ratio"] > 0 for r in rows) and lw.mlp_cost_sentence(rows).startswith("On this machine")


def ref_row(method, speedup, source="packages", c=0.6, acceptance=0.85, tokens=3.5, c_v=1.2):
    return ReferenceRow(group="12", method=method, kind="self-spec", source=source, prompts=4, tokens=64,
                        repetitions=5, ms_per_token=Spread(4.0, 3.9, 4.1), speedup=Spread(*speedup), c=c,
                        acceptance=acceptance, tokens_per_step=tokens, c_v=c_v)


def reference(depth, best, **best_columns):
    rows = [ref_row(PLAIN, (1, 1, 1)), ref_row(DEPTH_DRAFT, depth), ref_row("width pruned 0.5", (0.8, 0.75, 0.85)),
            ref_row("depth + pruned 0.5", best, **best_columns)]
    return Reference(rows, {"12": MACHINE})


def test_the_verdict_turns_with_the_reference():
    reached = lw.width_verdict(reference((1.10, 1.05, 1.15), (1.20, 1.16, 1.25)))
    assert len(reached) == 1 and "depth + pruned 0.5, reached 1.20×" in reached[0]
    assert reached[0].endswith("reaches the depth draft's speedup (faster beyond the noise).")
    level = lw.width_verdict(reference((1.10, 1.05, 1.25), (1.12, 1.0, 1.2)))
    assert level[0].endswith("reaches the depth draft's speedup (within the noise of it).")
    tied = lw.width_verdict(reference((1.20, 1.10, 1.30), (1.15, 1.05, 1.25), c=0.7))
    assert tied[0].endswith("within the noise of it.") and "dearer drafted token (c 0.70 against 0.60)" in tied[1]
    slower = lw.width_verdict(reference((1.30, 1.25, 1.35), (1.00, 0.95, 1.05), acceptance=0.7, tokens=2.9))
    assert "slower, beyond the noise" in slower[0] and "lower accepted / drafted (0.70 against 0.85)" in slower[1]
    assert "fewer tokens per step (2.90 against 3.50)" in slower[1] and "dearer drafted" not in slower[1]
    assert all(len(s.split()) <= 50 and "this machine" not in s for s in tied + slower + reached)
    assert lw.width_verdict(None) == [lw.NO_REFERENCE]
    assert "no depth draft on stdlib" in lw.width_verdict(reference((1, 1, 1), (1, 1, 1)), "stdlib")[0]


def test_speed_rows_read_the_group_without_the_plain_loop():
    rows = lw.speed_rows(reference((1.1, 1.0, 1.2), (1.0, 0.9, 1.1)))
    assert [r["method"] for r in rows] == [DEPTH_DRAFT, "width pruned 0.5", "depth + pruned 0.5"]
    assert rows[0]["low"] == 1.0 and not math.isnan(rows[0]["c"]) and lw.speed_rows(None) == []


def test_live_rows_beside_the_reference_say_this_machine():
    ref = reference((1.1, 1.0, 1.2), (1.0, 0.9, 1.1))
    inside = live_beside_reference({DEPTH_DRAFT: Spread(1.12, 1.05, 1.2)}, ref, "12", "packages")
    outside = live_beside_reference({DEPTH_DRAFT: Spread(0.8, 0.75, 0.85)}, ref, "12", "packages")
    assert "this machine agrees within the noise" in inside[0]
    assert "this machine gains less than the reference" in outside[0]
