"""The reference command's runner: units written at once, a rerun resumes, --force measures again, a readable .md."""
import json

import pytest
import torch

from labkit.measure.harness import Decoder, Method
from labkit.measure.reference import run as rr
from labkit.measure.reference.groups import GROUPS, Group, Unit
from labkit.measure.reference.loader import PLAIN, load_reference


def _fake(label, kind="plain"):
    return Decoder(Method(kind, label), lambda ids, n: torch.cat([ids, torch.ones(1, n, dtype=ids.dtype)], dim=1))


def _group(calls):
    def make(source):
        def build():
            calls.append(source)
            return [_fake(PLAIN), _fake("copy", "self-spec")]
        return build
    return Group("toy", "a toy group", lambda ctx: [Unit(s, s, make(s), expected=2) for s in ("stdlib", "packages")])


@pytest.fixture
def ctx(tmp_path):
    config = rr.ReferenceConfig.fast(out_dir=str(tmp_path))
    context = rr.Context(config)
    for source in ("stdlib", "packages"):
        context._cache[f"prompts:{source}:2"] = [torch.tensor([[5, 6, 7]]), torch.tensor([[8]])]   # a 1-token prompt
    return context


def test_a_group_is_written_unit_by_unit_and_resumes(ctx, tmp_path):
    calls = []
    path = rr.run_group(ctx, _group(calls), progress=False)
    data = json.loads(path.read_text())
    assert data["units"] == ["stdlib", "packages"] and len(data["rows"]) == 4 and calls == ["stdlib", "packages"]
    assert data["machine"]["threads"] == 1 and len(data["machine"]["load_before"]) == 3
    assert {"torch", "transformers", "python"} <= set(data["machine"]["versions"])
    ref = load_reference(path)
    row = ref.row("copy", "packages")
    assert row.identical is True and row.repetitions == 5 and row.prompts == 2 and row.tokens == 32
    assert row.speedup.low <= row.speedup.high and row.baseline == PLAIN
    md = path.with_suffix(".md").read_text()
    assert "## packages" in md and "| copy |" in md and "5 interleaved repetitions" in md
    rr.run_group(ctx, _group(calls), progress=False)                 # resumes: nothing left to run
    assert calls == ["stdlib", "packages"]
    data["units"], data["rows"] = ["stdlib"], data["rows"][:2]         # as if stopped after the first unit
    path.write_text(json.dumps(data))
    rr.run_group(ctx, _group(calls), progress=False)
    assert calls[-1] == "packages" and len(calls) == 3 and len(json.loads(path.read_text())["rows"]) == 4
    ctx.config.force = True
    rr.run_group(ctx, _group(calls), progress=False)
    assert len(calls) == 5
    ctx.config.force, ctx.config.max_new_tokens = False, 16          # another plan: measured again, never mixed
    ctx.config.__post_init__()
    rr.run_group(ctx, _group(calls), progress=False)
    assert len(calls) == 7 and {r["tokens"] for r in json.loads(path.read_text())["rows"]} == {32}


def test_config_and_group_names_are_checked():
    with pytest.raises(ValueError, match="repeats"):
        rr.ReferenceConfig(repeats=3)
    with pytest.raises(ValueError, match="unknown reference group"):
        rr.run_reference(rr.ReferenceConfig.fast(), ("nope",))
    assert {"summary", "02", "06", "07", "09", "10", "11", "12", "13"} == set(GROUPS)


def test_the_default_plan_is_estimated_near_seventeen_minutes():
    config = rr.ReferenceConfig()
    ctx = rr.Context(config)
    total = sum(rr.estimate_seconds(config, g, ctx) for g in GROUPS.values())
    assert 10 * 60 <= total <= 18 * 60, total
    assert rr.estimate_seconds(config, GROUPS["13"], ctx) < 4 * 60            # the batch group: within 4 minutes
    assert rr.estimate_seconds(rr.ReferenceConfig.fast(), GROUPS["summary"], ctx) < total / 4


def test_machine_record_reads_contention_from_the_load():
    quiet = rr.machine_record(1, (0.1, 0.1, 0.1), (1.0, 0.5, 0.2))
    busy = rr.machine_record(1, (3.0, 2.0, 1.0), (4.0, 3.0, 2.0))
    assert not quiet["contended"] and busy["contended"] and quiet["cpu_model"]
    after_own_group = rr.machine_record(1, (1.0, 1.0, 1.7), (1.0, 1.0, 1.7))     # the run's own thread, nothing else
    beside_a_job = rr.machine_record(1, (1.9, 1.2, 1.0), (1.0, 1.0, 1.0))
    assert not after_own_group["contended"] and beside_a_job["contended"]
