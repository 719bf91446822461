"""Fitting a draft head on a tiny model and corpus: windows, continuations that survive an interruption, features,
a fit that raises the draft's agreement, the command line's checks; and the head shipped with `default`."""
import pytest
import torch

import labkit.training.draft_head as fitting
from labkit import SkipSet, autoregressive_generate, load_draft_head, load_model, speculative_generate
from labkit.artifacts.models import draft_head_folder
from labkit.artifacts.prompts import benchmark_prompts
from labkit.artifacts.results import trained_draft_path
from labkit.core.draft_head import DraftHead
from labkit.training.draft_head import (
    HeadConfig,
    agreement,
    continuations,
    fit_draft_head,
    hidden_pairs,
    training_windows,
)

from tiny_models import ToyTokenizer, tiny_model

SKIP = SkipSet(attention=[1], mlp=[2])
SOURCE = "def f{i}(x):\n    '''Add one to x.'''\n    return x + {i}\n" * 12


@pytest.fixture()
def cfg(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(20):
        (corpus / f"mod{i}.py").write_text(SOURCE.replace("{i}", str(i)))
    return HeadConfig(prompt_tokens=16, new_tokens=8, stride=40, batch=4, epochs=4, lr=1e-2, corpus_root=str(corpus))


def test_windows_are_deterministic_and_the_right_shape(cfg):
    a, b = training_windows(ToyTokenizer(), cfg), training_windows(ToyTokenizer(), cfg)
    assert torch.equal(a, b) and a.shape[1] == cfg.prompt_tokens and len(a) > 20
    cfg.max_windows = 5
    assert len(training_windows(ToyTokenizer(), cfg)) == 5


def test_continuations_are_greedy_and_survive_an_interruption(cfg, tmp_path, monkeypatch):
    model = tiny_model("llama", n_layers=3)
    windows = training_windows(ToyTokenizer(), cfg)[:6]
    work = tmp_path / "work" / "continuations.pt"
    calls = []
    real = fitting.greedy_continuation

    def interrupted(model, prefix, n_new):
        if len(calls) == 1:
            raise KeyboardInterrupt
        calls.append(1)
        return real(model, prefix, n_new)

    monkeypatch.setattr(fitting, "greedy_continuation", interrupted)
    with pytest.raises(KeyboardInterrupt):
        continuations(model, windows, cfg, work)
    monkeypatch.setattr(fitting, "greedy_continuation", real)
    sequences = continuations(model, windows, cfg, work)                # the first batch comes from the file
    assert sequences.shape == (6, cfg.prompt_tokens + cfg.new_tokens)
    expected = autoregressive_generate(model, windows[:1], cfg.new_tokens).sequences
    assert torch.equal(sequences[:1], expected)


def test_a_fit_raises_the_draft_s_agreement_where_it_fitted(cfg):
    model = tiny_model("llama", n_layers=3)
    sequences = continuations(model, training_windows(ToyTokenizer(), cfg), cfg)
    h_draft, h_full = hidden_pairs(model, SKIP, sequences[4:], cfg.prompt_tokens - 1)
    held_draft, held_full = hidden_pairs(model, SKIP, sequences[:4], cfg.prompt_tokens - 1)
    assert h_draft.shape == h_full.shape == ((len(sequences) - 4) * (cfg.new_tokens + 1), model.config.hidden_size)
    head = DraftHead(model.config.hidden_size, SKIP)
    before = agreement(model, None, held_draft, held_full)
    assert agreement(model, head, held_draft, held_full) == before                 # a new head is the identity
    losses = fit_draft_head(model, head, h_draft, h_full, cfg)
    assert losses[-1] < losses[0]
    assert agreement(model, head, h_draft, h_full) > agreement(model, None, h_draft, h_full)
    assert not any(p.grad is not None for p in model.parameters())                # the model is only read


def test_the_command_line_checks_its_arguments(tmp_path, capsys):
    for bad in (["--epochs", "0"], ["--holdout", "1.5"]):
        with pytest.raises(SystemExit):
            fitting.main(bad)
        assert bad[0] in capsys.readouterr().err
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SystemExit) as exit_:                        # a model trained without a fixed draft path
        fitting.main(["--model", str(tmp_path), "--max-windows", "1"])
    assert exit_.value.code == 2 and "--skip is needed" in capsys.readouterr().err


def test_the_shipped_head_fits_default_and_keeps_its_output():
    head = load_draft_head("default")
    model, tokenizer = load_model("default")
    assert head.skip == trained_draft_path("default")["trained draft path"] and 0.0 < head.threshold < 1.0
    held = head.info["held_out_agreement"]
    assert 0.85 < held["without_head"] < held["with_head"] < 1.0
    card = (draft_head_folder("default").parent / "MODEL_CARD.md").read_text()       # the card says what was done
    assert "## Draft head" in card and f"{held['with_head']:.3f}" in card and head.info["command"] in card
    ids = tokenizer(benchmark_prompts(1)[0].text, return_tensors="pt")["input_ids"]
    expected = autoregressive_generate(model, ids, 48).sequences
    out = speculative_generate(model, ids, skip=head.skip, draft_head=head, draft_weights="int8", max_new_tokens=48)
    assert torch.equal(out.sequences, expected)
