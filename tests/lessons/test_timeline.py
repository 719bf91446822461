"""labkit.lessons.timeline: notebook 03's replayer and glue, on traces of tiny random models (tests/tiny_traces.py;
no shipped models needed)."""
from pathlib import Path

import pytest
import torch

from labkit import SkipSet
from labkit.artifacts import models as amod
from labkit.artifacts import prompts as aprm
from labkit.lessons import timeline as tll
from labkit.measure.comparisons import speed as spd
from labkit.viz import timeline as tlv

from tiny_models import tiny_model
from tiny_traces import TOK, VOCAB, StubTokenizer, greedy, model, prompt  # noqa: F401 (fixtures)

REPO = Path(__file__).resolve().parents[2]


def test_replayer_follows_the_slider(greedy):
    replayer = tll.TraceReplayer(greedy, TOK, window_steps=3)
    times = tlv.step_times(greedy.trace)
    assert replayer.step == 0 and "<b>Step 0</b>" in replayer.html.value
    first_html = replayer.html.value
    assert replayer.highlighted() == pytest.approx((times.draft_start_ms[0], times.verify_end_ms[0]))
    replayer.prev_button.click()                              # ◀ at 0 stays at 0
    assert replayer.step == 0 and replayer.html.value == first_html
    target = len(greedy.trace.steps) - 2
    replayer.slider.value = target
    assert f"<b>Step {target}</b>" in replayer.html.value and replayer.html.value != first_html
    assert replayer.highlighted() == pytest.approx((times.draft_start_ms[target], times.verify_end_ms[target]))
    lo, hi = replayer.figure.layout.xaxis.range                # the view followed the step
    assert lo <= times.draft_start_ms[target] and times.verify_end_ms[target] <= hi
    replayer.next_button.click()
    replayer.next_button.click()                              # ▶ at the last step stays there
    assert replayer.step == len(greedy.trace.steps) - 1
    # the text after step i is the prompt plus everything emitted by steps 0..i-1, then step i's events
    emitted = sum(s.n_emitted for s in greedy.trace.steps[:replayer.step + 1])
    assert f"{emitted} new tokens so far" in replayer.html.value


def test_separate_draft_model_path(model, prompt, tmp_path):
    draft = tiny_model("llama", n_layers=2, vocab_size=VOCAB, seed=1)
    runs = tll.compare_drafters(model, prompt, skip=SkipSet(mlp=[3]), draft_model=draft, max_new_tokens=16)
    assert len(runs) == 2
    seqs = [r.sequences for r in runs.values()]
    assert torch.equal(seqs[0], seqs[1])                      # greedy: both lossless
    labels = list(runs)
    fig = tlv.comparison_figure(runs, TOK, draft_labels={labels[1]: "2-layer draft model"})
    assert sum(len(t.x) for t in fig.data if t.meta["kind"] == "accepted") == sum(r.trace.n_accepted
                                                                                 for r in runs.values())
    assert "2-layer draft model" in fig.layout.yaxis2.ticktext[1]
    assert spd.summary_frame(runs).shape[0] == 2
    assert amod.load_draft_model(str(tmp_path / "missing"), verbose=False) is None


def test_load_draft_model_from_a_folder(tmp_path):
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(REPO / "data" / "tokenizer"))
    draft = tiny_model("llama", n_layers=2, vocab_size=len(tokenizer))
    draft.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, tok = amod.load_draft_model(str(tmp_path), verbose=False)
    assert loaded.config.num_hidden_layers == 2 and tok.decode([tokenizer.eos_token_id])


def test_demo_skip_set_says_where_its_set_came_from(capsys):
    class Cfg:
        num_hidden_layers = 8

    class M:
        config = Cfg()

    skip = tll.demo_skip_set(M(), name="default")
    said = capsys.readouterr().out
    assert skip.validate(8) and "skip set for 'default': the trained draft path" in said


def test_pick_prompt_leaves_room_for_the_new_tokens(model):
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(REPO / "data" / "tokenizer"))
    prompt, ids, n_new = aprm.pick_prompt(tokenizer, model, 100, seed=0)      # model context: 256
    assert ids.shape[0] == 1 and ids.shape[1] + n_new <= model.config.max_position_embeddings
    assert n_new == 100 and prompt.text
    _, ids, n_new = aprm.pick_prompt(tokenizer, model, 10_000, seed=0)
    assert ids.shape[1] + n_new == model.config.max_position_embeddings
