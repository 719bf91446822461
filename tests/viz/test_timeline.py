"""labkit.viz.timeline: notebook 03's draft/verify lanes, on traces of tiny random models (tests/tiny_traces.py;
no shipped models needed)."""
import pytest
import torch

import labkit
from labkit import FixedK, SkipSet, speculative_generate
from labkit.viz import timeline as tlv
from labkit.viz import trace as trv

from tiny_traces import TOK, VOCAB, StubTokenizer, greedy, model, prompt  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def sampled(model, prompt):
    return speculative_generate(model, prompt, skip=SkipSet(attention=[2, 3], mlp=[3]), policy=FixedK(3),
                                max_new_tokens=40, do_sample=True, temperature=0.7,
                                generator=torch.Generator().manual_seed(0))

def bars_by_kind(fig):
    out = {}
    for trace in fig.data:
        if trace.type == "bar" and trace.meta and "kind" in trace.meta:
            out[trace.meta["kind"]] = trace
    return out

def test_fixtures_cover_every_kind(greedy):
    kinds = set(greedy.trace.to_frame().kind)
    assert {"accepted", "rejected", "discarded", "replacement"} <= kinds

@pytest.mark.parametrize("run", ["greedy", "sampled"])
def test_chip_counts_per_kind_equal_the_trace(run, request):
    result = request.getfixturevalue(run)
    fig = tlv.timeline_figure(result, TOK)
    counts = result.trace.to_frame().kind.value_counts().to_dict()
    bars = bars_by_kind(fig)
    for kind in ("accepted", "rejected", "discarded", "replacement", "bonus"):
        n = len(bars[kind].x) if kind in bars else 0
        assert n == counts.get(kind, 0), kind
    assert len(bars["prefill"].x) == 1
    # draft kinds in the draft lane (y=1), the target's tokens in the verify lane (y=0)
    assert all(y == 1 for k in tlv.DRAFT_KINDS if k in bars for y in bars[k].y)
    assert all(y == 0 for k in tlv.TARGET_KINDS if k in bars for y in bars[k].y)
    assert fig.layout.title.text and fig.layout.xaxis.title.text.endswith("(ms)")

def test_lanes_are_end_to_end_measured_durations(greedy):
    trace = greedy.trace
    fig = tlv.timeline_figure(greedy, TOK)
    bars = bars_by_kind(fig)
    draft = {}      # step -> [(start, width)]
    verify = {}
    for kind, bar in bars.items():
        for base, width, step in zip(bar.base, bar.x, bar.customdata):
            if kind == "prefill":
                assert base == 0 and width == pytest.approx(1e3 * trace.prefill_s)
            elif kind in tlv.DRAFT_KINDS:
                draft.setdefault(step, []).append((base, width))
            else:
                verify[step] = (base, width)
    t = 1e3 * trace.prefill_s
    for i, s in enumerate(trace.steps):
        chips = sorted(draft.get(i, []))
        assert len(chips) == s.n_drafted
        if chips:
            assert chips[0][0] == pytest.approx(t)
            for (a, w), (b, _) in zip(chips, chips[1:]):       # chips laid end to end inside the draft phase
                assert b == pytest.approx(a + w)
            assert sum(w for _, w in chips) == pytest.approx(1e3 * s.draft_s)
        v0, vw = verify[i]
        assert v0 == pytest.approx(t + 1e3 * s.draft_s) and vw == pytest.approx(1e3 * s.verify_s)
        t = v0 + vw
    times = tlv.step_times(trace)
    starts = times[["draft_start_ms", "draft_end_ms", "verify_end_ms"]].to_numpy().ravel()
    assert all(b >= a for a, b in zip(starts, starts[1:]))               # monotone
    assert times.verify_end_ms.iloc[-1] == pytest.approx(1e3 * (trace.prefill_s + sum(s.draft_s + s.verify_s
                                                                                          for s in trace.steps)))

def test_sampling_hover_shows_the_acceptance_probability(sampled, greedy):
    frame = sampled.trace.to_frame()
    bars = bars_by_kind(tlv.timeline_figure(sampled, TOK))
    hovers = [h for k in tlv.DRAFT_KINDS if k in bars for h in bars[k].hovertext]
    drafted = frame[frame.kind.isin(tlv.DRAFT_KINDS)]
    assert len(hovers) == len(drafted) > 0
    for row in drafted.itertuples():
        expected = f"min(1, p/q) = {min(1.0, row.p / row.q):.3f}"
        assert any(expected in h and f"q = {row.q:.3f}" in h and f"p = {row.p:.3f}" in h for h in hovers), expected
    greedy_hovers = [h for b in bars_by_kind(tlv.timeline_figure(greedy, TOK)).values() for h in b.hovertext]
    assert not any("min(1, p/q)" in h for h in greedy_hovers)

def test_token_text_is_visible_and_escaped():
    assert trv.visible(" a\n\tb") == "␣a⏎⇥b"
    assert trv.visible("\n" + " " * 7) == "⏎␣×7"
    assert trv.visible("") == "∅"
    trace = labkit.Trace(prompt_length=2, sampling=False, prefill_s=0.001, steps=[labkit.StepRecord(
        position=2, drafted=[2, 3, 1], q=[0.9, 0.8, 0.7], confidence=[0.9, 0.8, 0.7], p=[0.9, 0.1, 0.5], n_accepted=1,
        next_token=0, next_kind="replacement", threshold=0.5, draft_s=0.3, verify_s=0.1)])
    fig = tlv.timeline_figure(trace, TOK, width=1200)
    bars = bars_by_kind(fig)
    assert bars["accepted"].text == ("&lt;b&gt;",)            # fits, escaped
    assert bars["rejected"].text == ("a&amp;b",)
    assert bars["discarded"].text == ("<s>⏎</s>",)            # struck through
    assert "␣x" in bars["replacement"].text[0]
    html = trv.step_html(trace, TOK, 0, prompt_ids=[2, 4])
    body = html.split('white-space:pre-wrap', 1)[1]
    assert "<b>" not in body and "&lt;b&gt;" in body and "a&amp;b" in body

def test_a_step_ending_on_an_accepted_eos_has_a_plain_verify_bar():
    eos = 7
    trace = labkit.Trace(prompt_length=1, sampling=False, prefill_s=0.001, steps=[labkit.StepRecord(
        position=1, drafted=[4, eos], q=[0.9, 0.8], confidence=[0.9, 0.8], p=[0.9, 0.9], n_accepted=2, next_token=-1,
        next_kind="none", threshold=None, draft_s=0.002, verify_s=0.001, n_emitted=2)])
    bars = bars_by_kind(tlv.timeline_figure(trace, TOK))
    assert len(bars["accepted"].x) == 2 and len(bars["verify"].x) == 1
    assert not set(bars) & set(tlv.TARGET_KINDS)
    assert "end-of-text" in trv.step_html(trace, TOK, 0)
