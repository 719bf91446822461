import pytest
import torch

from labkit import SkipSet, skipping
from labkit.core.policies import FixedK
from labkit.measure import agreement as agr
from labkit.measure.agreement import AgreementProbe

from tiny_models import ToyTokenizer, tiny_model
from tiny_probes import tiny  # noqa: F401 (fixture)


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


def test_token_comparison_without_skipping_agrees_everywhere(tiny):
    c = agr.token_comparison(tiny, ToyTokenizer(), "def f(x):", SkipSet(), n_tokens=10)
    assert len(c.full) == len(c.draft_forced) == len(c.draft_free) == 10
    assert c.draft_forced == c.full and c.draft_free == c.full
    assert c.agreement == 1.0 and c.first_divergence is None and c.verify_steps == 1
    assert c.accepted_runs() == [10]


def test_token_comparison_with_skipping(tiny):
    skip = SkipSet(attention=[1, 2], mlp=[0, 3])
    tok = ToyTokenizer()
    c = agr.token_comparison(tiny, tok, "a longer prompt", skip, n_tokens=12)
    assert c.draft_forced[0] == c.draft_free[0]              # same prefix at the first position
    ids = tok("a longer prompt")["input_ids"][0].tolist()
    with torch.no_grad(), skipping(tiny, skip):               # teacher forcing, position by position
        for i in (0, 5, 11):
            logits = tiny(input_ids=torch.tensor([ids + c.full[:i]])).logits[0, -1]
            assert int(logits.argmax()) == c.draft_forced[i]
    assert 0.0 <= c.agreement <= 1.0 and sum(c.accepted_runs()) == sum(c.agree)
    if c.first_divergence is not None:
        assert c.draft_free[: c.first_divergence] == c.full[: c.first_divergence]
    # greedy speculative decoding with an unlimited draft needs exactly verify_steps steps
    from labkit import speculative_generate

    out = speculative_generate(tiny, torch.tensor([ids]), skip=skip, policy=FixedK(12), max_new_tokens=12,
                               eos_token_id=[])
    assert out.new_tokens == c.full and len(out.trace.steps) == c.verify_steps
    with pytest.raises(TypeError):
        agr.token_comparison(tiny, tok, "x", {"attention": [1]})
    with pytest.raises(ValueError):
        agr.token_comparison(tiny, tok, "", skip)
