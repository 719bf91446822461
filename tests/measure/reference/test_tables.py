"""The speed table (README and docs/summary.md hold exactly what the committed reference file gives) and the
decision table."""
import json

import pytest

from labkit.artifacts.paths import REPO
from labkit.measure.reference.loader import load_reference
from labkit.measure.reference.tables import (
    BEGIN,
    DRAFTERS,
    END,
    SPEED_TABLE_FILES,
    best_rows,
    decision_table,
    format_decision_table,
    replace_block,
    speed_block,
    speed_table,
)

MACHINE = {"cpu_model": "Test CPU 9000", "threads": 1, "versions": {}, "load_before": [0.1, 0.1, 0.1],
           "load_after": [0.9, 0.5, 0.4], "date": "2026-11-28", "contended": False}


def _row(method, source="stdlib", speedup=(1.55, 1.50, 1.60)):
    return {"method": method, "kind": "self-spec", "source": source, "prompts": 6, "tokens": 128, "repetitions": 5,
            "ms_per_token": [2.2, 2.1, 2.3], "speedup": list(speedup), "identical": True, "baseline": "plain loop"}


def test_the_committed_speed_tables_are_the_committed_reference_file():
    block = speed_block(load_reference("summary"))
    for name in SPEED_TABLE_FILES:
        text = (REPO / name).read_text()
        assert block in text, f"{name}: the speed table is not what data/reference/summary.json gives; run " \
                              "python -m labkit reference (or labkit.measure.reference.tables.write_speed_tables)"


@pytest.fixture
def ref(tmp_path):
    rows = [_row("plain loop", speedup=(1, 1, 1)), _row("shipped configuration", speedup=(1.5, 1.4, 1.6)),
            _row("Medusa heads", speedup=(1.45, 1.3, 1.5)), _row("early exit", speedup=(0.8, 0.7, 0.9)),
            _row("shipped configuration", source="stubs", speedup=(1.3, 1.2, 1.4))]
    (tmp_path / "summary.json").write_text(json.dumps({"group": "summary", "machine": MACHINE, "rows": rows}))
    return load_reference("summary", folder=tmp_path)


def test_speed_table_rows_columns_and_plan_sentence(ref):
    table = speed_table(ref)
    assert table.splitlines()[0] == "| drafter | stdlib | stubs |"
    assert "| shipped configuration | 1.50 (1.40–1.60) | 1.30 (1.20–1.40) |" in table
    assert "| early exit | 0.80 (0.70–0.90) | – |" in table and "plain loop |" not in table
    block = speed_block(ref)
    assert block.startswith(BEGIN) and block.endswith(END) and "Test CPU 9000" in block
    assert "token-identical" in block


def test_replace_block_needs_the_markers():
    text = f"a\n{BEGIN}\nold\n{END}\nb"
    assert replace_block(text, f"{BEGIN}\nnew\n{END}") == f"a\n{BEGIN}\nnew\n{END}\nb"
    with pytest.raises(ValueError, match="no generated speed table"):
        replace_block("no markers here", "x")


def test_best_rows_are_those_within_the_noise_of_the_highest_median(ref):
    assert best_rows(ref, "stdlib") == ["shipped configuration", "Medusa heads"]
    assert best_rows(ref, "packages") == []


def test_decision_table_names_every_drafter_and_quotes_the_gpu_run(ref, tmp_path):
    rows = decision_table(ref, source="stdlib")
    assert [r["drafter"] for r in rows] == [name for name, _, _ in DRAFTERS] and len(rows[0]) <= 8
    shipped = rows[0]
    assert shipped["this CPU, small model"] == "1.50x (fastest, tied within the noise)"   # with Medusa heads
    assert "H200" in shipped["GPU, small model (launch-bound)"]                  # data/bench/device/nvidia-h200.json
    assert "blocks kept" in shipped["large model (memory-bound)"]
    assert next(r for r in rows if r["drafter"] == "early exit")["this CPU, small model"] == "0.80x"
    assert next(r for r in rows if r["drafter"] == "separate draft model")["this CPU, small model"] == "not measured"
    without = decision_table(ref, tmp_path / "missing.json", source="stdlib")
    assert without[0]["GPU, small model (launch-bound)"] == "not measured"
    text = format_decision_table(rows)
    assert text.count("\n") == len(rows) + 1 and text.startswith("| drafter |")
