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


def test_draftless_methods_and_the_formula_sentence():
    import pandas as pd

    from labkit.lessons.lookahead import draftless_methods, formula_lines, formula_sentence

    model = tiny_model("llama", n_layers=2)
    methods = draftless_methods(model, "no such model folder")                # no Medusa heads there: four rows
    assert list(methods) == ["plain loop", "prompt lookup (6)", "lookahead", "token recycling"]
    plain = methods["plain loop"](PROMPT, 12).sequences
    assert all(run(PROMPT, 12).sequences.equal(plain) for run in methods.values())
    frame = pd.DataFrame({"tokens_per_step": [float("nan"), 1.5, 2.25], "c_v": [float("nan"), 1.1, 1.4],
                          "c": [float("nan"), 0.0, 0.01], "limit": [float("nan"), 1.36, 1.6],
                          "speedup": [1.0, 1.2, 1.3]}, index=["plain loop", "a", "b"])
    text = formula_sentence(frame)
    assert "b: 2.25 tokens per verify at c_v 1.40" in text and "measured 1.20×" in text
    assert "most tokens per verify: b. The cheapest verify on this machine: a." in text
    lines = formula_lines(frame)
    assert len(lines) == 3 and all("this machine" in line and len(line.split()) <= 50 for line in lines)
