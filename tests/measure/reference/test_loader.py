"""The reference loader, the live-vs-reference sentence (each verdict reached) and the A/A pair."""
import json
import math

import pytest
import torch

from labkit.measure.harness import Decoder, Method
from labkit.measure.reference.loader import (
    AAResult,
    Machine,
    ReferenceRow,
    Spread,
    aa_pair,
    aa_sentence,
    live_vs_reference,
    load_reference,
    row_from_summary,
    verdict,
)

MACHINE = {"cpu_model": "Test CPU 9000", "threads": 1, "versions": {"torch": "2.13.0"},
           "load_before": [0.1, 0.2, 0.3], "load_after": [0.9, 0.5, 0.4], "date": "2026-11-28", "contended": False}


def _row(method="shipped configuration", source="stdlib", speedup=(1.55, 1.50, 1.60)):
    return {"method": method, "kind": "self-spec", "source": source, "prompts": 6, "tokens": 128, "repetitions": 5,
            "ms_per_token": [2.2, 2.1, 2.3], "speedup": list(speedup), "acceptance": 0.81,
            "tokens_per_step": 3.1, "c": 0.45, "c_v": None, "identical": True, "baseline": "plain loop"}


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(
        {"group": "summary", "machine": MACHINE, "rows": [_row(), _row(source="stubs", speedup=(1.3, 1.2, 1.4))]}))
    (tmp_path / "07.json").write_text(json.dumps(
        {"group": "07", "machine": {**MACHINE, "contended": True}, "rows": [_row("static", speedup=(1.1, 1, 1.2))]}))
    return tmp_path


def test_loads_every_group_one_group_or_one_path(folder):
    ref = load_reference(folder=folder)
    assert {r.group for r in ref.rows} == {"summary", "07"} and len(ref.rows) == 3
    assert ref.speedup("shipped configuration", "stubs") == Spread(1.3, 1.2, 1.4)
    row = ref.row("shipped configuration")
    assert isinstance(row, ReferenceRow) and row.identical is True and math.isnan(row.c_v) and row.tokens == 128
    assert ref.machines["07"].contended and not ref.machines["summary"].contended
    one = load_reference("07", folder=folder)
    assert [r.method for r in one.rows] == ["static"] and "contended" in one.machine.describe()
    assert load_reference(folder / "summary.json").machine.cpu_model == "Test CPU 9000"


def test_missing_rows_and_files_say_what_exists(folder):
    ref = load_reference(folder=folder)
    with pytest.raises(LookupError, match="shipped configuration"):
        ref.row("no such method")
    with pytest.raises(FileNotFoundError, match="--only nope"):
        load_reference("nope", folder=folder)
    with pytest.raises(FileNotFoundError, match="python -m labkit reference"):
        load_reference(folder=folder / "empty")


def test_rows_round_trip_through_dicts():
    row = ReferenceRow.from_dict({**_row(), "group": "summary"})
    text = json.dumps(row.to_dict(), allow_nan=False)          # NaN written as null: strict JSON
    again = ReferenceRow.from_dict(json.loads(text))
    assert again.to_dict() == row.to_dict() and math.isnan(again.c_v) and again.speedup == row.speedup


@pytest.mark.parametrize(("live", "word"), [((1.31, 1.20, 1.52), "within the noise"),
                                             ((1.31, 1.20, 1.41), "slower"), ((1.70, 1.65, 1.80), "faster")])
def test_every_verdict_is_reachable(live, word):
    assert verdict(Spread(*live), Spread(1.55, 1.50, 1.60)) == word


def test_the_sentence_names_this_machine_both_spreads_and_the_reference_cpu(folder):
    ref = load_reference(folder=folder)
    row = ref.row("shipped configuration")
    assert ref.machine_for(row) is ref.machines["summary"]
    inside = live_vs_reference("the shipped configuration", Spread(1.52, 1.40, 1.58), row, ref.machine_for(row))
    assert inside == ("On this machine the shipped configuration measured 1.52x (1.40-1.58); the reference run "
                      "measured 1.55x (1.50-1.60) on Test CPU 9000 (1 torch thread, quiet): this machine agrees "
                      "within the noise.")
    slower = live_vs_reference("it", Spread(1.31, 1.20, 1.41), row, ref.machine)
    assert "this machine gains less than the reference, beyond the noise" in slower and "1.31x (1.20-1.41)" in slower
    faster = live_vs_reference("it", Spread(1.9, 1.8, 2.0), row)
    assert "this machine gains more" in faster
    ms = live_vs_reference("the plain loop", Spread(3.0, 2.9, 3.1), row, unit=" ms")
    assert "3.00 ms (2.90-3.10)" in ms and "2.20 ms" in ms and "this machine is slower" in ms
    for line in (inside, slower, faster, ms):
        assert "this machine" in line


def test_spread_parses_numbers_lists_and_rejects_the_rest():
    assert Spread.of(2) == Spread(2.0, 2.0, 2.0) and Spread.of([1, 0.5, None]).high != Spread.of([1, 0.5, None]).high
    with pytest.raises(ValueError, match="median, min, max"):
        Spread.of("fast")


def test_machine_description_reads_the_load_when_contended():
    m = Machine.from_dict({**MACHINE, "contended": True, "threads": 2})
    assert m.describe() == "Test CPU 9000 (2 torch threads, contended: load average 0.1 before, 0.9 after)"


class _Fake:
    """A decoder that returns its prompt plus n copies of token 1, instantly (GenerationResult-free: ids)."""

    def __call__(self, ids, n):
        return torch.cat([ids, torch.ones(1, n, dtype=ids.dtype)], dim=1)


def test_aa_pair_runs_one_configuration_twice_and_reads_its_noise():
    make = lambda: Decoder(Method("plain", "fake loop", "m"), _Fake())  # noqa: E731
    aa = aa_pair(make, [torch.tensor([[3, 4]])], max_new_tokens=5, repeats=3)
    assert isinstance(aa, AAResult) and aa.label == "fake loop" and aa.identical
    assert aa.ratio.low <= aa.ratio.median <= aa.ratio.high and aa.first.median > 0
    line = aa_sentence(aa)
    assert line.startswith("On this machine fake loop, timed twice") and "of itself" in line
    assert aa_sentence(Spread(1.0, 0.97, 1.04), "the plain loop", live=False).startswith("In the reference run")


def test_row_from_a_harness_summary_keeps_spreads_and_extra_columns():
    summary = {"method": "m: x", "kind": "tree", "ms_per_token": 2.0, "ms_min": 1.9, "ms_max": 2.2, "speedup": 1.5,
               "speedup_min": 1.4, "speedup_max": 1.6, "acceptance": 0.8, "tokens_per_step": 3.0, "c": 0.4,
               "c_v": 1.1, "identical": float("nan"), "limit": 1.7}
    row = row_from_summary(summary, group="10", source="stdlib", prompts=4, tokens=96, repetitions=5, label="tree",
                           extra=("limit",))
    assert row.method == "tree" and row.speedup == Spread(1.5, 1.4, 1.6) and row.identical is None
    assert row.extra == {"limit": 1.7}
