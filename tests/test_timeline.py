"""Notebook 03's figure builders and replayer, on traces of tiny random models (no shipped models needed)."""
from pathlib import Path

import pytest
import torch

import labkit
from labkit import (AdaptiveThreshold, FixedK, SkipSet, StaticThreshold, autoregressive_generate,
                    speculative_generate)
from labkit import timeline as tl
from tiny_models import tiny_model

VOCAB = 97
REPO = Path(__file__).resolve().parent.parent


class StubTokenizer:
    """decode([id]) with the awkward cases: spaces, newlines, HTML-special characters."""

    SPECIAL = {0: " x", 1: "\n", 2: "<b>", 3: "a&b", 4: "    ", 5: ""}

    def decode(self, ids):
        return "".join(self.SPECIAL.get(int(i), f"t{int(i)}") for i in ids)


TOK = StubTokenizer()


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4, vocab_size=VOCAB)


@pytest.fixture(scope="module")
def prompt():
    return torch.randint(0, VOCAB, (1, 6), generator=torch.Generator().manual_seed(3))


@pytest.fixture(scope="module")
def greedy(model, prompt):
    # a heavy skip set and a fixed k: rejections *and* discarded tokens appear
    return speculative_generate(model, prompt, skip=SkipSet(attention=[1, 2, 3], mlp=[2, 3]), policy=FixedK(4),
                                max_new_tokens=40)


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
    fig = tl.timeline_figure(result, TOK)
    counts = result.trace.to_frame().kind.value_counts().to_dict()
    bars = bars_by_kind(fig)
    for kind in ("accepted", "rejected", "discarded", "replacement", "bonus"):
        n = len(bars[kind].x) if kind in bars else 0
        assert n == counts.get(kind, 0), kind
    assert len(bars["prefill"].x) == 1
    # draft kinds in the draft lane (y=1), the target's tokens in the verify lane (y=0)
    assert all(y == 1 for k in tl.DRAFT_KINDS if k in bars for y in bars[k].y)
    assert all(y == 0 for k in tl.TARGET_KINDS if k in bars for y in bars[k].y)
    assert fig.layout.title.text and fig.layout.xaxis.title.text.endswith("(ms)")


def test_lanes_are_end_to_end_measured_durations(greedy):
    trace = greedy.trace
    fig = tl.timeline_figure(greedy, TOK)
    bars = bars_by_kind(fig)
    draft = {}      # step -> [(start, width)]
    verify = {}
    for kind, bar in bars.items():
        for base, width, step in zip(bar.base, bar.x, bar.customdata):
            if kind == "prefill":
                assert base == 0 and width == pytest.approx(1e3 * trace.prefill_s)
            elif kind in tl.DRAFT_KINDS:
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
    times = tl.step_times(trace)
    starts = times[["draft_start_ms", "draft_end_ms", "verify_end_ms"]].to_numpy().ravel()
    assert all(b >= a for a, b in zip(starts, starts[1:]))               # monotone
    assert times.verify_end_ms.iloc[-1] == pytest.approx(1e3 * (trace.prefill_s + sum(s.draft_s + s.verify_s
                                                                                          for s in trace.steps)))


def test_sampling_hover_shows_the_acceptance_probability(sampled, greedy):
    frame = sampled.trace.to_frame()
    bars = bars_by_kind(tl.timeline_figure(sampled, TOK))
    hovers = [h for k in tl.DRAFT_KINDS if k in bars for h in bars[k].hovertext]
    drafted = frame[frame.kind.isin(tl.DRAFT_KINDS)]
    assert len(hovers) == len(drafted) > 0
    for row in drafted.itertuples():
        expected = f"min(1, p/q) = {min(1.0, row.p / row.q):.3f}"
        assert any(expected in h and f"q = {row.q:.3f}" in h and f"p = {row.p:.3f}" in h for h in hovers), expected
    greedy_hovers = [h for b in bars_by_kind(tl.timeline_figure(greedy, TOK)).values() for h in b.hovertext]
    assert not any("min(1, p/q)" in h for h in greedy_hovers)


def test_token_text_is_visible_and_escaped():
    assert tl.visible(" a\n\tb") == "␣a⏎⇥b"
    assert tl.visible("\n" + " " * 7) == "⏎␣×7"
    assert tl.visible("") == "∅"
    trace = labkit.Trace(prompt_length=2, sampling=False, prefill_s=0.001, steps=[labkit.StepRecord(
        position=2, drafted=[2, 3, 1], q=[0.9, 0.8, 0.7], confidence=[0.9, 0.8, 0.7], p=[0.9, 0.1, 0.5], n_accepted=1,
        next_token=0, next_kind="replacement", threshold=0.5, draft_s=0.3, verify_s=0.1)])
    fig = tl.timeline_figure(trace, TOK, width=1200)
    bars = bars_by_kind(fig)
    assert bars["accepted"].text == ("&lt;b&gt;",)            # fits, escaped
    assert bars["rejected"].text == ("a&amp;b",)
    assert bars["discarded"].text == ("<s>⏎</s>",)            # struck through
    assert "␣x" in bars["replacement"].text[0]
    html = tl.step_html(trace, TOK, 0, prompt_ids=[2, 4])
    body = html.split('white-space:pre-wrap', 1)[1]
    assert "<b>" not in body and "&lt;b&gt;" in body and "a&amp;b" in body


def test_a_step_ending_on_an_accepted_eos_has_a_plain_verify_bar():
    eos = 7
    trace = labkit.Trace(prompt_length=1, sampling=False, prefill_s=0.001, steps=[labkit.StepRecord(
        position=1, drafted=[4, eos], q=[0.9, 0.8], confidence=[0.9, 0.8], p=[0.9, 0.9], n_accepted=2, next_token=-1,
        next_kind="none", threshold=None, draft_s=0.002, verify_s=0.001, n_emitted=2)])
    bars = bars_by_kind(tl.timeline_figure(trace, TOK))
    assert len(bars["accepted"].x) == 2 and len(bars["verify"].x) == 1
    assert not set(bars) & set(tl.TARGET_KINDS)
    assert "end-of-text" in tl.step_html(trace, TOK, 0)


def test_replayer_follows_the_slider(greedy):
    replayer = tl.TraceReplayer(greedy, TOK, window_steps=3)
    times = tl.step_times(greedy.trace)
    assert replayer.step == 0 and "<b>Step 0</b>" in replayer.html.value
    first_html = replayer.html.value
    assert replayer.highlighted() == pytest.approx((times.draft_start_ms[0], times.verify_end_ms[0]))
    replayer.prev_button.click()                              # ◀ at 0 stays at 0
    assert replayer.step == 0 and replayer.html.value == first_html
    target = len(greedy.trace.steps) - 2
    replayer.slider.value = target
    assert "<b>Step %d</b>" % target in replayer.html.value and replayer.html.value != first_html
    assert replayer.highlighted() == pytest.approx((times.draft_start_ms[target], times.verify_end_ms[target]))
    lo, hi = replayer.figure.layout.xaxis.range                # the view followed the step
    assert lo <= times.draft_start_ms[target] and times.verify_end_ms[target] <= hi
    replayer.next_button.click()
    replayer.next_button.click()                              # ▶ at the last step stays there
    assert replayer.step == len(greedy.trace.steps) - 1
    # the text after step i is the prompt plus everything emitted by steps 0..i-1, then step i's events
    emitted = sum(s.n_emitted for s in greedy.trace.steps[:replayer.step + 1])
    assert f"{emitted} new tokens so far" in replayer.html.value


def test_one_pass_check_reproduces_greedy_output(model, prompt):
    plain = autoregressive_generate(model, prompt, 20)
    check = tl.one_pass_check(model, plain.sequences, plain.prompt_length, tokenizer=TOK)
    assert check["all_match"] and check["n_checked"] == 20 and check["n_match"] == 20
    assert check["table"]["position"].tolist() == list(range(5, 25))
    corrupted = plain.sequences.clone()
    corrupted[0, 10] = (corrupted[0, 10] + 1) % VOCAB
    bad = tl.one_pass_check(model, corrupted, plain.prompt_length)
    assert not bad["all_match"] and not bad["table"].set_index("position").loc[9, "match"]
    fig = tl.one_pass_figure(check, plain_ms_per_token=plain.ms_per_token)
    assert "20/20" in fig.layout.title.text


def test_confidence_figure_marks_where_the_threshold_stopped_drafting(model, prompt):
    result = speculative_generate(model, prompt, skip=SkipSet(mlp=[3]), policy=StaticThreshold(0.3, 6),
                                  max_new_tokens=30)
    steps = result.trace.steps
    fig = tl.confidence_figure(result, TOK)
    by_name = {t.name: t for t in fig.data}
    stops = [t for t in fig.data if t.name and t.name.startswith("stop")]
    expected = sum(1 for s in steps if s.drafted and s.confidence[-1] < s.threshold)
    assert (len(stops[0].x) if stops else 0) == expected
    thr = [y for y in by_name["threshold in force (stop below it)"].y if y is not None]
    assert set(thr) == {0.3}
    markers = sum(len(t.x) for t in fig.data if t.meta and t.meta.get("kind") in tl.DRAFT_KINDS)
    assert markers == result.trace.n_drafted
    assert fig.layout.yaxis.title.text == "draft top-1 probability"


def test_threshold_trajectory_reads_the_policy_state(model, prompt):
    policy = AdaptiveThreshold(initial_threshold=0.3)
    result = speculative_generate(model, prompt, skip=SkipSet(mlp=[3]), policy=policy, max_new_tokens=60)
    fig = tl.threshold_trajectory_figure(result, target=policy.target)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["threshold in force"].y) == [s.threshold for s in result.trace.steps]
    assert list(by_name["smoothed acceptance rate (what the policy sees)"].y) == \
        [s.policy_state["acceptance_rate"] for s in result.trace.steps]
    fixed = speculative_generate(model, prompt, skip=SkipSet(mlp=[3]), policy=FixedK(2), max_new_tokens=10)
    fig = tl.threshold_trajectory_figure(fixed)                 # no adaptive state: cumulative rate, no threshold
    names = {t.name for t in fig.data}
    assert "acceptance rate so far (cumulative)" in names and "threshold in force" not in names


def test_separate_draft_model_path(model, prompt, tmp_path):
    draft = tiny_model("llama", n_layers=2, vocab_size=VOCAB, seed=1)
    runs = tl.compare_drafters(model, prompt, skip=SkipSet(mlp=[3]), draft_model=draft, max_new_tokens=16)
    assert len(runs) == 2
    seqs = [r.sequences for r in runs.values()]
    assert torch.equal(seqs[0], seqs[1])                      # greedy: both lossless
    labels = list(runs)
    fig = tl.comparison_figure(runs, TOK, draft_labels={labels[1]: "2-layer draft model"})
    assert sum(len(t.x) for t in fig.data if t.meta["kind"] == "accepted") == sum(r.trace.n_accepted
                                                                                 for r in runs.values())
    assert "2-layer draft model" in fig.layout.yaxis2.ticktext[1]
    assert tl.summary_frame(runs).shape[0] == 2
    assert tl.load_draft_model(str(tmp_path / "missing"), verbose=False) is None


def test_load_draft_model_from_a_folder(tmp_path):
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(REPO / "data" / "tokenizer"))
    draft = tiny_model("llama", n_layers=2, vocab_size=len(tokenizer))
    draft.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, tok = tl.load_draft_model(str(tmp_path), verbose=False)
    assert loaded.config.num_hidden_layers == 2 and tok.decode([tokenizer.eos_token_id])


def test_demo_skip_set(monkeypatch):
    import labkit.search

    class Cfg:
        num_hidden_layers = 12

    class M:
        config = Cfg()

    def missing(model, **_):
        raise FileNotFoundError("no search yet")

    monkeypatch.setattr(labkit.search, "best_skip_set", missing)
    skip = tl.demo_skip_set(M(), verbose=False)
    assert skip == SkipSet(attention=[6, 8, 10, 11], mlp=[5, 7, 9, 10, 11])
    for n in (2, 4, 6, 24):
        Cfg.num_hidden_layers = n
        s = tl.demo_skip_set(M(), verbose=False).validate(n)
        assert 0 not in s.attention and 0.3 <= s.ratio(n) <= 0.5
    Cfg.num_hidden_layers = 12
    monkeypatch.setattr(labkit.search, "best_skip_set", lambda model, **_: SkipSet(mlp=[7]))
    assert tl.demo_skip_set(M(), verbose=False) == SkipSet(mlp=[7])


def test_pick_prompt_leaves_room_for_the_new_tokens(model):
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(REPO / "data" / "tokenizer"))
    prompt, ids, n_new = tl.pick_prompt(tokenizer, model, 100, seed=0)      # model context: 256
    assert ids.shape[0] == 1 and ids.shape[1] + n_new <= model.config.max_position_embeddings
    assert n_new == 100 and prompt.text
    _, ids, n_new = tl.pick_prompt(tokenizer, model, 10_000, seed=0)
    assert ids.shape[1] + n_new == model.config.max_position_embeddings
