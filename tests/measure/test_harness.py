"""labkit.measure.harness: the one timing harness, on a tiny random model (tests/tiny_models.py)."""
import math

import pytest
import torch

from labkit import FixedK, SkipSet, autoregressive_generate, speculative_generate
from labkit.core.decoding import GenerationResult
from labkit.core.expectation import speedup_limit
from labkit.measure import harness as h

from tiny_models import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4, vocab_size=97)


PROMPTS = [torch.tensor([[1, 2, 3, 4]]), torch.tensor([[9, 8, 7]])]


def plain(model):
    return h.Decoder(h.Method("plain", "plain", family="baseline"),
                     lambda ids, n: autoregressive_generate(model, ids, n))


def spec(model, name="spec"):
    return h.Decoder(h.Method("self-spec", name, policy="fixed 3", skip="mlp 2"),
                     lambda ids, n: speculative_generate(model, ids, skip=SkipSet(mlp=[2]), policy=FixedK(3),
                                                         max_new_tokens=n))


def test_identity_check_catches_a_decoder_that_emits_other_tokens(model):
    def wrong(ids, n):
        out = autoregressive_generate(model, ids, n)
        return GenerationResult(out.sequences.flip(1), None, out.prompt_length, out.elapsed_s)
    runs = h.run_interleaved([plain(model), spec(model), h.Decoder(h.Method("other", "wrong"), wrong)], PROMPTS,
                             max_new_tokens=8, repeats=2, progress=False)
    rows = {r["method"]: r for r in h.summarise(runs)}
    assert rows["plain"]["identical"] is True and rows["spec"]["identical"] is True
    assert rows["wrong"]["identical"] is False


def test_does_not_apply_is_nan_everywhere(model):
    sampled = h.Decoder(h.Method("sampling", "sampled", greedy=False),
                        lambda ids, n: autoregressive_generate(model, ids, n, do_sample=True,
                                                               generator=torch.Generator().manual_seed(0)))
    runs = h.run_interleaved([plain(model), sampled], PROMPTS, max_new_tokens=6, repeats=1, progress=False)
    rows = h.summarise(runs)
    for row in rows:                                    # no drafts, no steps: every trace column is NaN, not None
        for column in ("acceptance", "tokens_per_step", "c", "c_v", "limit", "measured_over_limit", "select_share"):
            assert math.isnan(row[column]), column
    assert math.isnan(rows[1]["identical"])             # a sampled decoder is not checked token for token
    assert not any(v is None for row in rows for k, v in row.items() if k in h.ROW_COLUMNS)
    alone = runs.methods[1]                             # without a plain reference: no speedup, no identity
    no_reference = h.summarise(h.Runs([alone], {alone: runs.records[alone]}))
    assert math.isnan(no_reference[0]["speedup"]) and math.isnan(no_reference[0]["identical"])


def test_order_alternates_every_repetition(model):
    runs = h.run_interleaved([plain(model), spec(model, "a"), spec(model, "b")], PROMPTS, max_new_tokens=4, repeats=3,
                             warmup_tokens=0, progress=False)
    labels = [(rep, p, m.label) for rep, p, m in runs.order]
    assert labels[:3] == [(0, 0, "plain"), (0, 0, "a"), (0, 0, "b")]
    assert labels[6:9] == [(1, 0, "b"), (1, 0, "a"), (1, 0, "plain")]          # reversed on odd repetitions
    assert labels[12:15] == [(2, 0, "plain"), (2, 0, "a"), (2, 0, "b")]
    assert len(labels) == 3 * 2 * 3 and all(len(reps) == 3 and all(len(r) == 2 for r in reps)
                                            for reps in runs.records.values())


def test_spread_and_limit_come_from_the_records():
    seq = torch.tensor([[1, 2, 3]])
    base, fast = h.Method("plain", "plain"), h.Method("self-spec", "fast")
    rec = lambda s, **kw: h.RunRecord(s, 10, seq, **kw)                  # noqa: E731
    records = {base: [[rec(0.10)], [rec(0.20)], [rec(0.30)]],
               fast: [[rec(0.05, drafted=8, accepted=6, steps=4, emitted=10, draft_s=0.01, verify_s=0.03)],
                      [rec(0.05, drafted=8, accepted=6, steps=4, emitted=10, draft_s=0.01, verify_s=0.03)],
                      [rec(0.20, drafted=8, accepted=6, steps=4, emitted=10, draft_s=0.01, verify_s=0.03)]]}
    rows = {r["method"]: r for r in h.summarise(h.Runs([base, fast], records))}
    assert rows["plain"]["ms_per_token"] == pytest.approx(20.0)               # median of 10, 20, 30 ms
    assert (rows["plain"]["ms_min"], rows["plain"]["ms_max"]) == pytest.approx((10.0, 30.0))
    r = rows["fast"]
    assert r["ms_per_token"] == pytest.approx(5.0) and r["speedup"] == pytest.approx(4.0)
    assert (r["speedup_min"], r["speedup_max"]) == pytest.approx((1.5, 4.0))  # per repetition: 10/5, 20/5, 30/20
    assert r["acceptance"] == pytest.approx(0.75) and r["tokens_per_step"] == pytest.approx(2.5)
    c, c_v = 1e3 * 0.03 / 24 / 20.0, 1e3 * 0.09 / 12 / 20.0                  # pooled over repetitions / 20 ms
    assert (r["c"], r["c_v"]) == pytest.approx((c, c_v))
    assert r["limit"] == pytest.approx(speedup_limit(1.5, 2.0, c, c_v)) == pytest.approx(2.5 / (2 * c + c_v))
    assert r["measured_over_limit"] == pytest.approx(4.0 / r["limit"])


def test_methods_are_data_and_arguments_are_checked(model):
    m = h.Method("self-spec", model="default", policy="adaptive", lookup=6)
    assert m.label == "default: self-spec, policy adaptive, lookup 6" and m.columns()["lookup"] == 6
    assert h.Method("plain", "x") == h.Method("plain", "x") and len({m, h.Method("self-spec", model="default")}) == 2
    with pytest.raises(ValueError, match="repeats"):
        h.run_interleaved([plain(model)], PROMPTS, max_new_tokens=4, repeats=0)
    with pytest.raises(ValueError, match="distinct"):
        h.run_interleaved([plain(model), plain(model)], PROMPTS, max_new_tokens=4)
    with pytest.raises(ValueError, match="prompt"):
        h.run_interleaved([plain(model)], [], max_new_tokens=4)


def test_jacobi_record_reads_iterations_as_steps():
    import torch

    from labkit import jacobi_generate
    from labkit.measure.harness import record_of

    model = tiny_model("llama", n_layers=2, vocab_size=97)
    result = jacobi_generate(model, torch.tensor([[1, 2, 3]]), 15, block_size=5, init="repeat")
    rec = record_of(result, 0.5, 3)
    its = result.trace.iterations
    assert rec.steps == len(its) and rec.n_new == 15
    assert rec.accepted + rec.steps == 15                       # each iteration: confirmed guesses + 1 token
    assert rec.drafted == sum(it.width - 1 for it in its)


def test_json_safe_writes_nan_as_null_everywhere():
    import json
    import math

    from labkit.measure.harness import json_safe
    value = {"a": math.nan, "b": [1.0, math.nan, {"c": (math.nan, 2)}], "d": "x"}
    assert json.dumps(json_safe(value), allow_nan=False) == '{"a": null, "b": [1.0, null, {"c": [null, 2]}], "d": "x"}'
