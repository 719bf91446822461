"""Notebook 06's lookahead section on a tiny model: the run matches plain decoding, the sweep's counts add up, the
widest step's mask has the shape its trie and window say, and the sentences follow the numbers."""
import torch

from labkit.lessons.lookahead import lookahead_run, pool_sentence, sweep_sentence, widest_step, window_sweep

from tiny_models import tiny_model

PROMPT = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]])


def test_run_sweep_and_widest_step():
    model = tiny_model("llama", n_layers=2)
    result, drafter, identical = lookahead_run(model, PROMPT, 40, W=3, N=3, G=2)
    assert identical and len(drafter.history) == len(result.trace.steps)
    assert all(h["width"] >= 1 + drafter.W for h in drafter.history)
    step, parents, levels = widest_step(drafter, result)
    assert len(parents) == result.trace.steps[step].n_drafted and 1 <= levels <= drafter.N - 1
    rows = window_sweep(model, [PROMPT], 24, windows=(1, 3), ngram_sizes=(3,), G=2)
    assert [r["W"] for r in rows] == [1, 3] and all(r["identical"] and r["tokens_per_forward"] >= 1 for r in rows)
    assert rows[1]["width"] > rows[0]["width"]                      # a wider window reads more tokens per forward
    text = sweep_sentence(rows)
    best = max(rows, key=lambda r: r["tokens_per_forward"])
    assert f"{best['tokens_per_forward']:.2f}" in text and "token for token" in text


def test_pool_sentence_counts():
    history = [{"proposed": 0, "accepted": [], "pool": 3}, {"proposed": 2, "accepted": [7, 8], "pool": 5},
               {"proposed": 1, "accepted": [], "pool": 6}]
    text = pool_sentence(history)
    assert "held 6 n-grams" in text and "2 steps found" in text and "first at step 1" in text
    assert "1 of them kept" in text and "2 drafted tokens" in text and "1.67 tokens" in text
