import torch

from labkit import SkipSet
from labkit.measure.agreement import AgreementProbe

from tiny_models import ToyTokenizer, tiny_model


def test_full_model_agrees_with_itself_and_skipping_lowers_agreement():
    model = tiny_model("llama", n_layers=4, vocab_size=97)
    probe = AgreementProbe.from_prompts(model, ToyTokenizer(), ["def f(x):", "a longer prompt here", "z"], n_tokens=12)
    assert probe.n_positions == 3 * 12
    assert probe.agreement(SkipSet()) == 1.0
    assert probe.agreement(SkipSet.all(4)) < 1.0
    single = probe.single_block_agreement()
    assert len(single["attention"]) == 4 and all(0 <= a <= 1 for a in single["mlp"])


def test_agreement_matches_a_per_prompt_unbatched_forward():
    model = tiny_model("qwen2", n_layers=3, vocab_size=97)
    probe = AgreementProbe.from_prompts(model, ToyTokenizer(), ["abc", "defghijkl"], n_tokens=8)
    skip = SkipSet(attention=[1], mlp=[0, 2])
    hits, total = 0, 0
    from labkit import skipping
    for row in range(2):
        cols = probe.scored[row].nonzero().flatten()
        end = int(cols.max()) + 1
        with torch.no_grad(), skipping(model, skip):
            logits = model(probe.input_ids[row: row + 1, :end]).logits[0]
        hits += int((logits.argmax(-1)[cols] == probe.targets[row, cols]).sum())
        total += len(cols)
    assert abs(probe.agreement(skip) - hits / total) < 1e-9
