"""Training end to end on a tiny config and a tiny corpus: fast, seeded, resumable."""
import json

import torch

from labkit import load_model
from labkit.train import TrainConfig, train

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
    first = train(tiny_config(tmp_path, budget=3 * 4 * 32))               # 3 steps
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
