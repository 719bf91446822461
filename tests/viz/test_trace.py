"""labkit.viz.trace: notebook 03's one-pass check, confidence and threshold figures, on traces of tiny random models
(tests/tiny_traces.py)."""
from labkit import AdaptiveThreshold, FixedK, SkipSet, StaticThreshold, autoregressive_generate, speculative_generate
from labkit.measure import agreement as agr
from labkit.viz import timeline as tlv
from labkit.viz import trace as trv

from tiny_traces import TOK, VOCAB, StubTokenizer, greedy, model, prompt  # noqa: F401 (fixtures)


def test_one_pass_check_reproduces_greedy_output(model, prompt):
    plain = autoregressive_generate(model, prompt, 20)
    check = agr.one_pass_check(model, plain.sequences, plain.prompt_length, tokenizer=TOK)
    assert check["all_match"] and check["n_checked"] == 20 and check["n_match"] == 20
    assert check["table"]["position"].tolist() == list(range(5, 25))
    corrupted = plain.sequences.clone()
    corrupted[0, 10] = (corrupted[0, 10] + 1) % VOCAB
    bad = agr.one_pass_check(model, corrupted, plain.prompt_length)
    assert not bad["all_match"] and not bad["table"].set_index("position").loc[9, "match"]
    fig = trv.one_pass_figure(check, plain_ms_per_token=plain.ms_per_token)
    assert "20/20" in fig.layout.title.text


def test_confidence_figure_marks_where_the_threshold_stopped_drafting(model, prompt):
    result = speculative_generate(model, prompt, skip=SkipSet(mlp=[3]), policy=StaticThreshold(0.3, 6),
                                  max_new_tokens=30)
    steps = result.trace.steps
    fig = trv.confidence_figure(result, TOK)
    by_name = {t.name: t for t in fig.data}
    stops = [t for t in fig.data if t.name and t.name.startswith("stop")]
    expected = sum(1 for s in steps if s.drafted and s.confidence[-1] < s.threshold)
    assert (len(stops[0].x) if stops else 0) == expected
    thr = [y for y in by_name["threshold in force (stop below it)"].y if y is not None]
    assert set(thr) == {0.3}
    markers = sum(len(t.x) for t in fig.data if t.meta and t.meta.get("kind") in tlv.DRAFT_KINDS)
    assert markers == result.trace.n_drafted
    assert fig.layout.yaxis.title.text == "draft top-1 probability"

def test_threshold_trajectory_reads_the_policy_state(model, prompt):
    policy = AdaptiveThreshold(initial_threshold=0.3)
    result = speculative_generate(model, prompt, skip=SkipSet(mlp=[3]), policy=policy, max_new_tokens=60)
    fig = trv.threshold_trajectory_figure(result, target=policy.target)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["threshold in force"].y) == [s.threshold for s in result.trace.steps]
    assert list(by_name["AR: smoothed accepted / drafted (what the policy sees)"].y) == \
        [s.policy_state["acceptance_rate"] for s in result.trace.steps]
    fixed = speculative_generate(model, prompt, skip=SkipSet(mlp=[3]), policy=FixedK(2), max_new_tokens=10)
    fig = trv.threshold_trajectory_figure(fixed)                 # no adaptive state: cumulative rate, no threshold
    names = {t.name for t in fig.data}
    assert "accepted / drafted so far (cumulative)" in names and "threshold in force" not in names

def test_threshold_carry_figure_lines_up_the_prompts(model, prompt):
    policy = AdaptiveThreshold(initial_threshold=0.3)
    carried = [speculative_generate(model, prompt, skip=SkipSet(mlp=[3]), policy=policy, max_new_tokens=20)
               for _ in range(2)]
    fig = trv.threshold_carry_figure({"carried": carried}, target=policy.target)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["threshold, carried"].y) == [s.threshold for r in carried for s in r.trace.steps]
    assert carried[1].trace.steps[0].threshold == carried[0].trace.steps[-1].policy_state["threshold"]
    assert not fig.layout.shapes or all(s.type == "line" for s in fig.layout.shapes)     # prompt boundaries only
