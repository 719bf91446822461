"""Training end to end on a tiny config and a tiny corpus: fast, seeded, resumable."""
import json

import torch

from labkit import load_model
from labkit.training import TrainConfig, train

SOURCE = '''
def greet(name):
    """Say hello to someone."""
    return "hello " + name


class Counter:
    """Count things."""

    def __init__(self):
        self.n = 0

    def add(self, k=1):
        self.n += k
        return self.n
'''


def tiny_config(tmp_path, budget, recipe="skip_robust"):
    corpus = tmp_path / "corpus"
    if not corpus.exists():
        corpus.mkdir(parents=True)
        for i in range(30):
            (corpus / f"mod{i}.py").write_text(SOURCE.replace("greet", f"greet{i}"))
    return TrainConfig(name="tiny", recipe=recipe, n_layers=2, hidden_size=32, n_heads=2, intermediate_size=64,
                       vocab_size=300, context=32, batch_size=4, token_budget=budget, warmup_steps=2,
                       eval_every=3, checkpoint_every=3, eval_windows=2, threads=1,
                       out_dir=str(tmp_path / "model"), work_dir=str(tmp_path / "work"),
                       tokenizer_dir=str(tmp_path / "tok"), corpus_root=str(corpus))


def test_train_resume_and_export(tmp_path):
    train(tiny_config(tmp_path, budget=3 * 4 * 32))               # 3 steps
    state = torch.load(tmp_path / "work" / "checkpoint.pt", weights_only=False)
    assert state["step"] == 3
    out = train(tiny_config(tmp_path, budget=6 * 4 * 32))                 # resumes at step 3, runs to 6
    record = json.loads((out / "training.json").read_text())
    assert record["steps"] == 6 and [h["step"] for h in record["history"]] == [3, 6]
    assert (out / "model.safetensors").exists() and (out / "MODEL_CARD.md").exists()
    assert "Skip-robust" in (out / "MODEL_CARD.md").read_text()
    from safetensors import safe_open
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert all(f.get_tensor(k).dtype == torch.float16 for k in f.keys())
    model, tokenizer = load_model(out)
    assert tokenizer.decode(tokenizer(SOURCE)["input_ids"]) == SOURCE
    assert model.config.num_hidden_layers == 2


def test_training_is_seeded(tmp_path):
    a = train(tiny_config(tmp_path / "a", budget=2 * 4 * 32, recipe="plain"))
    b = train(tiny_config(tmp_path / "b", budget=2 * 4 * 32, recipe="plain"))
    la = json.loads((a / "training.json").read_text())["validation_loss"]
    lb = json.loads((b / "training.json").read_text())["validation_loss"]
    assert la == lb


def test_model_card_command_rebuilds_the_recorded_recipe(tmp_path, monkeypatch):
    """The retrain command printed in a model card parses back to exactly the recorded settings."""
    import shlex
    from dataclasses import asdict

    from labkit.training.config import SKIP_ROBUST_SETTINGS
    from labkit.training.loop import main
    from labkit.training.modelcard import train_command

    for recipe in ("skip_robust", "plain"):
        cfg = tiny_config(tmp_path / recipe, budget=4 * 32, recipe=recipe)
        cfg.skip_ratio_min = 0.2                          # not the default: printed only where it matters
        cfg.draft_skip, cfg.draft_skip_prob, cfg.greedy_tail = "attention=1;mlp=0", 0.5, 8
        cfg.top1_weight, cfg.fresh_optimizer_at = 0.5, 3
        command = train_command(asdict(cfg))
        assert command.startswith("python -m labkit train --name ")
        assert "--threads" not in command and "--out-dir" not in command
        if recipe == "plain":
            assert "skip-ratio" not in command and "distill" not in command and "draft" not in command
        else:
            assert "--skip-ratio-min 0.2" in command
        seen = {}
        monkeypatch.setattr("labkit.training.loop.train", lambda c: seen.update(cfg=c))
        main(shlex.split(command)[4:])                    # drop "python -m labkit train"
        rebuilt, recorded = asdict(seen["cfg"]), asdict(cfg)
        ignored = {"out_dir", "work_dir", "tokenizer_dir", "corpus_root", "eval_every", "checkpoint_every", "threads"}
        if recipe == "plain":
            ignored |= SKIP_ROBUST_SETTINGS
        assert {k: v for k, v in rebuilt.items() if k not in ignored} == \
            {k: v for k, v in recorded.items() if k not in ignored}


def test_draft_skip_parsing_and_choice(tmp_path):
    import pytest

    from labkit.core.skip import SkipSet, format_skip_set, parse_skip_set
    from labkit.training.objective import draft_skip_set

    skip = SkipSet(attention=[1, 4], mlp=[0, 3, 5])
    assert parse_skip_set(format_skip_set(skip)) == skip
    assert parse_skip_set("mlp=2") == SkipSet(mlp=[2]) and parse_skip_set("") == SkipSet()
    for bad in ("attn=1", "attention 1,2", "attention=1;mlp=x"):
        with pytest.raises(ValueError):
            parse_skip_set(bad)
    cfg = tiny_config(tmp_path, budget=4 * 32)                          # 2 layers
    cfg.draft_skip = "attention=1;mlp=0"
    g = torch.Generator().manual_seed(0)
    cfg.draft_skip_prob = 1.0
    assert all(draft_skip_set(2, cfg, g) == SkipSet(attention=[1], mlp=[0]) for _ in range(20))
    cfg.draft_skip_prob = 0.0
    assert all(0 not in draft_skip_set(2, cfg, g).attention for _ in range(20))  # random sets, never layer-0 attention
    cfg.draft_skip_prob = 0.5
    picks = [draft_skip_set(2, cfg, g) == SkipSet(attention=[1], mlp=[0]) for _ in range(400)]
    assert 0.3 < sum(picks) / len(picks) < 0.9          # the fixed set, plus random draws that happen to equal it
    cfg.draft_skip = "attention=2"                                      # layer 2 of a 2-layer model
    with pytest.raises(ValueError, match="layer index 2"):
        train(cfg)
    cfg.draft_skip, cfg.draft_skip_prob = "", 1.5
    with pytest.raises(ValueError, match="draft_skip_prob"):
        train(cfg)


def test_greedy_continuation_matches_a_full_forward():
    """The on-policy tail: cached greedy tokens and their logits equal one uncached forward over prefix + tail."""
    from labkit.training.objective import greedy_continuation

    from tiny_models import tiny_model

    model = tiny_model("llama", n_layers=2, vocab_size=97, seed=0)
    model.train()
    prefix = torch.randint(0, 97, (3, 10), generator=torch.Generator().manual_seed(0))
    tail, tail_logits = greedy_continuation(model, prefix, 6)
    assert tail.shape == (3, 6) and tail_logits.shape == (3, 6, 97) and model.training
    with torch.no_grad():
        full = model(input_ids=torch.cat([prefix, tail], 1), use_cache=False).logits     # (3, 16, V)
    assert torch.equal(full[:, 9].argmax(-1), tail[:, 0])                  # first new token: from the prefix
    assert torch.equal(full[:, 10:-1].argmax(-1), tail[:, 1:])            # each next one: greedy
    torch.testing.assert_close(tail_logits, full[:, 10:], atol=1e-4, rtol=1e-4)


def test_greedy_tail_training_runs_and_is_checked(tmp_path):
    import pytest

    cfg = tiny_config(tmp_path, budget=2 * 4 * 32)
    cfg.greedy_tail, cfg.draft_skip, cfg.draft_skip_prob = 8, "attention=1;mlp=1", 1.0
    out = train(cfg)
    assert json.loads((out / "training.json").read_text())["recipe"]["greedy_tail"] == 8
    from labkit.artifacts.results import trained_draft_path
    from labkit.core.skip import SkipSet
    assert trained_draft_path(out) == {"trained draft path": SkipSet(attention=[1], mlp=[1])}   # robustness tries it
    assert trained_draft_path(tmp_path) == {}                                                # no training.json
    assert trained_draft_path("plain") == {}                                                 # shipped, no draft path
    cfg.greedy_tail = 32                                                   # the whole 32-token window
    with pytest.raises(ValueError, match="greedy_tail"):
        train(cfg)


def test_top1_term_adds_the_drafts_cross_entropy_against_the_full_models_argmax(tmp_path):
    import torch.nn.functional as F

    from labkit.core.skip import parse_skip_set, skipping
    from labkit.training.objective import training_loss

    from tiny_models import tiny_model

    model = tiny_model("llama", n_layers=2, vocab_size=97, seed=0)
    batch = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(1))
    cfg = tiny_config(tmp_path, budget=4 * 32)
    cfg.draft_skip, cfg.draft_skip_prob = "attention=1;mlp=0", 1.0
    without, _ = training_loss(model, batch, cfg, torch.Generator().manual_seed(0))
    cfg.top1_weight = 0.5
    with_top1, _ = training_loss(model, batch, cfg, torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = model(input_ids=batch[:, :-1], use_cache=False).logits                 # (B, T, V)
        with skipping(model, parse_skip_set(cfg.draft_skip)):
            draft = model(input_ids=batch[:, :-1], use_cache=False).logits
    expected = F.cross_entropy(draft.flatten(0, 1), full.argmax(-1).flatten())
    torch.testing.assert_close(with_top1 - without, 0.5 * expected, atol=1e-5, rtol=1e-4)
    assert expected > 0.1                                                  # a real term, not a no-op


def test_fresh_optimizer_at_keeps_the_weights_and_drops_the_moments_once(tmp_path, monkeypatch):
    train(tiny_config(tmp_path, budget=3 * 4 * 32))
    ckpt = tmp_path / "work" / "checkpoint.pt"
    state = torch.load(ckpt, weights_only=False)
    state["model"]["model.norm.weight"].fill_(7.0)                   # a mark that a restart from scratch would not have
    torch.save(state, ckpt)
    loaded = []
    original = torch.optim.AdamW.load_state_dict
    monkeypatch.setattr(torch.optim.AdamW, "load_state_dict", lambda self, sd: loaded.append(1) or original(self, sd))
    cfg = tiny_config(tmp_path, budget=4 * 4 * 32)
    cfg.fresh_optimizer_at = 3
    train(cfg)                                                       # resumes the step-3 weights, fresh moments
    after = torch.load(ckpt, weights_only=False)
    assert loaded == [] and after["step"] == 4
    assert torch.allclose(after["model"]["model.norm.weight"], torch.tensor(7.0), atol=0.05)   # one small step from 7
    cfg.token_budget = 5 * 4 * 32
    train(cfg)                                                       # a rerun of the same stage resumes its moments
    assert loaded == [1]



def test_corpus_packages_add_training_text_and_init_from_starts_from_a_model(tmp_path):
    from safetensors.torch import load_file

    from labkit.training.data import encode_split, load_or_train_tokenizer

    first = train(tiny_config(tmp_path / "a", budget=2 * 4 * 32, recipe="plain"))
    cfg = tiny_config(tmp_path / "a", budget=1 * 4 * 32, recipe="plain")
    cfg.out_dir, cfg.work_dir = str(tmp_path / "b_model"), str(tmp_path / "b_work")
    cfg.corpus_packages, cfg.package_bytes, cfg.init_from, cfg.lr = "jinja2", 30_000, str(first), 1e-30
    out = train(cfg)                          # one step at lr 1e-30 (lr must be > 0): below fp32 ulp, weights stay
    a, b = load_file(str(first / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    record = json.loads((out / "training.json").read_text())
    assert list(record["corpus_packages"]) == ["jinja2"] and record["corpus_packages"]["jinja2"] != "?"
    assert "validation_loss_packages" in record
    tokenizer = load_or_train_tokenizer(cfg, cfg.corpus_root)
    stdlib_only = encode_split(tokenizer, "train", cfg.corpus_root)
    streams = torch.load(tmp_path / "b_work" / "tokens.pt")
    assert torch.equal(streams["train"][:len(stdlib_only)], stdlib_only)          # the stdlib first, then jinja2
    assert 30_000 / 6 < len(streams["train"]) - len(stdlib_only) < 30_000        # capped by package_bytes
    assert torch.equal(streams["validation"], encode_split(tokenizer, "validation", cfg.corpus_root))


def test_corpus_packages_are_checked_before_any_work(tmp_path):
    import pytest

    cfg = tiny_config(tmp_path, budget=4 * 32)
    for packages, error, match in (("optuna", ValueError, "outside-prompt package"),
                                   ("numpy", ValueError, "outside-prompt package"),
                                   ("no_such_package_xyz", ModuleNotFoundError, "no_such_package_xyz")):
        cfg.corpus_packages = packages
        with pytest.raises(error, match=match):
            train(cfg)
    cfg.corpus_packages, cfg.init_from = "", str(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="init_from"):
        train(cfg)
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())
