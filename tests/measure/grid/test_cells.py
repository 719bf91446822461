"""labkit.measure.grid.cells: one grid cell from hand-built running sums: its timing against the plain runs around
it (speedup = the plain loop's time for the same tokens / the speculative time), and its row over repetitions
(median timing, the speedup's min-max, the identity and repeat checks)."""
import math
from types import SimpleNamespace

import pytest

from labkit.measure.grid.cells import CellStats, cell_row, cell_timing
from labkit.measure.grid.results import Setting


def stats(seconds: float, identical: bool = True) -> CellStats:
    st = CellStats()
    st.seconds_by_prompt, st.tokens_by_prompt, st.plain_ms_by_prompt = [seconds, seconds], [10, 10], [20.0, 20.0]
    st.steps, st.drafted, st.accepted, st.emitted = 8, 16, 12, 20
    st.draft_s, st.verify_s = 0.016, 0.08
    st.identical = [identical, identical]
    return st


def test_timing_reads_the_plain_runs_around_the_cell():
    t = cell_timing(stats(0.1))
    assert math.isclose(t["ms_per_token"], 10.0) and math.isclose(t["plain_ms_per_token"], 20.0)
    assert math.isclose(t["speedup"], 2.0)
    assert math.isclose(t["c"], 1.0 / 20.0) and math.isclose(t["c_v"], 10.0 / 20.0)   # 1 ms a draft, 10 a verify
    assert math.isclose(t["analytic_speedup"], (1.5 + 1) / (2 * 0.05 + 0.5))
    assert math.isclose(cell_timing(stats(0.1), baseline_ms=[10.0, 10.0])["speedup"], 1.0)


def test_row_over_repetitions_keeps_the_median_and_the_range():
    setting = Setting(0.5, 0.4, 8, "static", "fp32")
    cost_model = SimpleNamespace(full_step_ms=20.0)
    rounds = [stats(0.1), stats(0.2), stats(0.05)]
    row = cell_row(setting, rounds, None, None)
    assert row["speedup"] == pytest.approx(2.0) and (row["speedup_min"], row["speedup_max"]) == (1.0, 4.0)
    assert row["identical_to_plain"] is True and row["repeats_agree"] is True
    assert row["tokens_per_step"] == 2.5 and row["acceptance_rate"] == 0.75 and math.isnan(row["c_v_forward"])
    assert cell_row(setting, [stats(0.1, identical=False)], 0.3, cost_model)["identical_to_plain"] is False
