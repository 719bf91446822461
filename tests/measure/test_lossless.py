"""labkit.measure.lossless: every drafter under every policy gives the plain loop's greedy tokens on a tiny model,
a wrong decoder is caught (its row counts no identical prompt), and first_divergence finds no divergence there."""
import torch

from labkit.measure import lossless
from labkit.measure.lossless import check_lossless, drafter_cases, first_divergence, policy_cases

from tiny_models import tiny_model

PROMPTS = [torch.tensor([[1, 5, 9, 2, 5, 9]]), torch.tensor([[3]])]       # a prompt of length 1 included


def test_every_case_is_lossless_on_a_tiny_model():
    model = tiny_model("llama", n_layers=4, vocab_size=97)
    cases = ["static set", "lookup", "static tree", "cascade"]
    rows = check_lossless(model, PROMPTS, max_new_tokens=10, cases=cases)
    assert len(rows) == len(cases) * len(policy_cases())
    assert all(r["identical"] == len(PROMPTS) and not r["error"] for r in rows), rows
    assert {name for name, _ in drafter_cases(model)} >= set(cases) | {"knapsack", "medusa heads", "draft head"}


def test_a_decoder_that_changes_one_token_is_caught(monkeypatch):
    model = tiny_model("llama", n_layers=2, vocab_size=97)
    real = lossless.speculative_generate

    def off_by_one(*args, **kwargs):
        out = real(*args, **kwargs)
        out.sequences[0, -1] = (out.sequences[0, -1] + 1) % 97
        return out

    monkeypatch.setattr(lossless, "speculative_generate", off_by_one)
    rows = check_lossless(model, PROMPTS[:1], max_new_tokens=6, cases=["static set"])
    assert rows and all(r["identical"] == 0 for r in rows)


def test_first_divergence_is_none_where_the_outputs_agree():
    model = tiny_model("qwen2", n_layers=4, vocab_size=97)
    row = first_divergence(model, PROMPTS[0], 10, skip=next(kw for _, kw in drafter_cases(model))["skip"])
    assert row["position"] is None and row["new_tokens"] == 10 and row["prompt_tokens"] == 6
