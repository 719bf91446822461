"""Fitting Medusa heads on a tiny model: features and labels line up with the greedy text, a few steps lower the
loss and raise agreement, the command line's checks; and the heads shipped with `default`."""
import pytest
import torch

import labkit.training.medusa as fitting
from labkit import autoregressive_generate, load_model
from labkit.artifacts.models import load_medusa_heads
from labkit.core.medusa import MedusaHeads, model_signature
from labkit.training.medusa import MedusaConfig, fit_heads, head_agreement, hidden_and_labels

from tiny_models import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=2)


@pytest.fixture(scope="module")
def sequences(model):
    prompts = torch.randint(1, 97, (6, 8), generator=torch.Generator().manual_seed(0))
    return torch.cat([autoregressive_generate(model, p[None], 12).sequences for p in prompts])      # (6, 20)


def test_features_and_labels_line_up_with_the_greedy_text(model, sequences):
    hidden, labels = hidden_and_labels(model, sequences, 7, n_heads=3)
    per_row = 20 - 3 - 1 - 7                                     # t = 7 .. 15: x_{t+4} is still in the sequence
    assert hidden.shape == (6 * per_row, 32) and labels.shape == (6 * per_row, 3)
    assert labels[0].tolist() == sequences[0, 9:12].tolist()     # h at t = 7: x_9, x_10, x_11
    assert labels[per_row - 1].tolist() == sequences[0, 17:20].tolist()
    new = MedusaHeads(32, 3)                                     # every untrained head is the LM head: x_{t+1}
    logits = model(sequences[:1]).logits[0, 7:7 + per_row]
    assert torch.allclose(new.logits(model, hidden[:per_row])[:, 0], logits, atol=1e-4)
    with pytest.raises(ValueError, match="no position"):
        hidden_and_labels(model, sequences, 16, n_heads=3)


def test_a_few_steps_lower_the_loss_and_raise_agreement(model, sequences):
    hidden, labels = hidden_and_labels(model, sequences, 7, n_heads=3)
    heads = MedusaHeads(32, 3)
    before = head_agreement(model, heads, hidden, labels)
    losses = fit_heads(model, heads, hidden, labels, MedusaConfig(steps=40, batch_positions=32, lr=1e-2))
    assert sum(losses[-5:]) < sum(losses[:5])
    assert sum(head_agreement(model, heads, hidden, labels)) > sum(before)
    assert not any(p.grad is not None for p in model.parameters())               # the model is only read
    again = MedusaHeads(32, 3)
    assert fit_heads(model, again, hidden, labels, MedusaConfig(steps=40, batch_positions=32, lr=1e-2)) == losses


def test_the_command_line_checks_its_numbers():
    with pytest.raises(SystemExit):
        fitting._parse(["--steps", "0"])
    with pytest.raises(SystemExit):
        fitting._parse(["--new-tokens", "3", "--n-heads", "4"])
    assert fitting._parse(["--n-heads", "3"]).n_heads == 3


def test_the_heads_shipped_with_default_fit_it():
    model, _ = load_model("default")
    heads = load_medusa_heads("default", model)
    assert heads.signature == model_signature(model) and 3 <= heads.n_heads <= 4
    record = heads.info["held_out_agreement"]
    assert record["fitted"][0] > record["untrained"][0]                        # head 1 learnt something
    assert heads.info["loss_first_last"][1] < heads.info["loss_first_last"][0]
