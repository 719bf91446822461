import math

import torch

from labkit import FixedK, SkipSet, speculative_generate

from tiny_models import tiny_model


def test_trace_records_every_step_consistently():
    model = tiny_model("llama", n_layers=4, vocab_size=97)
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    out = speculative_generate(model, ids, skip=SkipSet(attention=[2], mlp=[1, 3]), policy=FixedK(3), max_new_tokens=30)
    trace = out.trace
    assert trace.n_emitted == 30 == out.sequences.shape[1] - 5
    position = 5
    for step in trace.steps:
        assert step.position == position
        assert 0 <= step.n_accepted <= step.n_drafted <= 3
        assert len(step.q) == len(step.p) == len(step.confidence) == step.n_drafted
        assert all(0 <= v <= 1 for v in step.q + step.p + step.confidence)
        assert all(q <= c + 1e-9 for q, c in zip(step.q, step.confidence))   # greedy: q of the argmax = top-1
        emitted = out.sequences[0, position: position + step.n_emitted].tolist()
        assert emitted[: step.n_accepted] == step.drafted[: step.n_accepted]
        assert emitted[-1] == step.next_token
        assert step.draft_s >= 0 and step.verify_s > 0
        position += step.n_emitted
    s = trace.summary()
    assert s["steps"] == len(trace.steps)
    assert s["tokens_per_step"] == 30 / len(trace.steps)
    assert math.isclose(s["acceptance_rate"], trace.n_accepted / trace.n_drafted)
    frame = trace.to_frame()
    counts = frame["kind"].value_counts().to_dict()
    assert counts.get("accepted", 0) == trace.n_accepted
    assert counts.get("rejected", 0) + counts.get("discarded", 0) == trace.n_drafted - trace.n_accepted
    assert counts.get("replacement", 0) + counts.get("bonus", 0) == len(trace.steps)


def test_record_trace_off_gives_the_same_tokens():
    model = tiny_model("mistral", n_layers=4, vocab_size=97)
    ids = torch.tensor([[9, 8, 7]])
    a = speculative_generate(model, ids, skip=SkipSet(mlp=[0, 1]), max_new_tokens=16)
    b = speculative_generate(model, ids, skip=SkipSet(mlp=[0, 1]), max_new_tokens=16, record_trace=False)
    assert torch.equal(a.sequences, b.sequences) and b.trace is None
