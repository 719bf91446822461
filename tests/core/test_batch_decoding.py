"""Batched decoding: every row token-identical to transformers' generate of that row alone and to the batched plain
loop (four families, random batch sizes 1-8, prompt lengths 1-40, EOS in some rows, every drafter a batch supports,
every ragged mode); sampling exact per row (chi-square), a wrong acceptance rule caught; clear errors."""
import itertools
import random

import pytest
import torch

from labkit import AdaptiveThreshold, FixedK, SkipSet, StaticThreshold, autoregressive_generate, speculative_generate
from labkit.core import batch_decoding
from labkit.core.batch import RAGGED_MODES, BatchConfig
from labkit.core.batch_decoding import BatchResult, LoadPolicy
from labkit.core.medusa import HeadsDrafter
from labkit.core.sampling import sample
from labkit.core.tree_shapes import draft_tree
from labkit.core.verify import Verdict
from labkit.measure.lossless import random_draft_head, random_heads

from exact_sampling import N_SAMPLES, PROMPT, WARPS, chi_square_p_value, exact_two_token_distribution, sharp_tiny_model
from exact_sampling import VOCAB as VOCAB_SMALL
from tiny_models import ARCHITECTURES, tiny_model

N_LAYERS, VOCAB = 4, 97


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param, n_layers=N_LAYERS, vocab_size=VOCAB)


def alone(model, prompt, max_new, eos=None):
    """transformers' greedy generate of one row by itself (an explicit mask: token 0 is also the pad id)."""
    ids = torch.tensor([prompt])
    return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new, do_sample=False,
                          eos_token_id=eos, pad_token_id=0)[0].tolist()


def random_drafter_kwargs(model, rng: random.Random) -> dict:
    mask = [rng.random() < 0.5 for _ in range(2 * N_LAYERS)]
    skip = rng.choice([SkipSet.from_mask(mask), SkipSet(), SkipSet.all(N_LAYERS), SkipSet(attention=[0])])
    kind = rng.choice(["skip", "int8", "head", "lookup", "medusa", "lookup+medusa"])
    if kind == "int8":
        return {"skip": skip, "draft_weights": "int8"}
    if kind == "head":
        return {"skip": skip, "draft_head": random_draft_head(model, skip, seed=rng.randrange(9))}
    if kind == "lookup":
        return {"skip": skip, "lookup": rng.randint(1, 5)}
    if "medusa" in kind:
        heads = HeadsDrafter(model, random_heads(model, rng.randint(1, 4), seed=rng.randrange(9)))
        return {"drafter": heads} if kind == "medusa" else {"drafter": batch_decoding.LookupDrafter(3, heads)}
    return {"skip": skip}


def random_policy(rng: random.Random):
    return rng.choice([FixedK(rng.randint(1, 6)), StaticThreshold(rng.choice([0.0, 0.3, 0.9]), rng.randint(1, 8)),
                       AdaptiveThreshold(max_draft=rng.randint(1, 12), initial_threshold=rng.choice([0.1, 0.6]))])


@pytest.mark.parametrize("seed", range(4))
def test_every_row_is_its_own_greedy_decoding(model, seed):
    rng = random.Random(seed)
    size, max_new = rng.randint(1, 8), rng.choice([1, 6, 20])
    prompts = [[rng.randrange(VOCAB) for _ in range(rng.randint(1, 40))] for _ in range(size)]
    free = [alone(model, p, max_new) for p in prompts]
    eos = free[0][len(prompts[0]) + max_new // 2] if rng.random() < 0.7 else None     # ends row 0 (and maybe more)
    expected = [alone(model, p, max_new, eos) for p in prompts] if eos is not None else free
    plain = autoregressive_generate(model, prompts, max_new, eos_token_id=eos)
    assert [s[0].tolist() for s in plain.sequences] == expected
    for _ in range(3):
        kwargs, policy = random_drafter_kwargs(model, rng), random_policy(rng)
        config = BatchConfig(rng.choice(RAGGED_MODES), draft_while=rng.choice([0.0, 0.5, 1.0]))
        out = speculative_generate(model, prompts, policy=policy, max_new_tokens=max_new, eos_token_id=eos,
                                   batch=config, **kwargs)
        assert isinstance(out, BatchResult)
        assert [s[0].tolist() for s in out.sequences] == expected, (kwargs, policy, config)


def test_a_padded_tensor_with_its_mask_is_the_list_of_its_rows(model):
    prompts = [[5, 6, 7, 8, 9], [3], [11, 12, 13]]
    ids = torch.zeros(3, 5, dtype=torch.long)
    mask = torch.zeros(3, 5, dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, 5 - len(p):], mask[b, 5 - len(p):] = torch.tensor(p), 1
    listed = speculative_generate(model, prompts, skip=SkipSet(mlp=[1]), max_new_tokens=9)
    padded = speculative_generate(model, ids, attention_mask=mask, skip=SkipSet(mlp=[1]), max_new_tokens=9)
    assert [s.tolist() for s in listed.sequences] == [s.tolist() for s in padded.sequences]
    assert listed.new_tokens[1] == alone(model, [3], 9)[1:]


def test_a_batch_of_one_takes_the_one_sequence_path(model, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a batch of one went through the batched loop")

    monkeypatch.setattr("labkit.core.decoding.batched_speculative", refuse)
    monkeypatch.setattr("labkit.core.decoding.batched_autoregressive", refuse)
    out = speculative_generate(model, [[4, 5, 6]], skip=SkipSet(mlp=[2]), max_new_tokens=8)
    assert isinstance(out, BatchResult) and out.sequences[0][0].tolist() == alone(model, [4, 5, 6], 8)
    assert autoregressive_generate(model, [[4, 5, 6]], 8).new_tokens == out.new_tokens


def test_finished_rows_stop_costing_and_the_load_policy_caps_gamma():
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)
    prompts = [[1, 2, 3], [4, 5, 6, 7]]
    short = autoregressive_generate(model, prompts, 12)
    eos = short.new_tokens[0][1]
    out = autoregressive_generate(model, prompts, 12, eos_token_id=eos)
    assert out.forwards == max(len(t) for t in out.new_tokens)          # one forward per step of the longest row
    plain = speculative_generate(model, prompts, skip=SkipSet(mlp=[1]), policy=FixedK(4), max_new_tokens=12,
                                 load=LoadPolicy((1, 2), (4, 0)))
    assert plain.drafted == [0, 0] and plain.new_tokens == short.new_tokens       # two rows: γ capped at 0
    assert LoadPolicy((1, 4, 16), (6, 3, 0)).cap(8) == 3


@pytest.mark.parametrize(("drafter", "warp"), [("skip", WARPS[1]), ("medusa", WARPS[0])],
                         ids=["skip-t0.7-topk-topp", "medusa-t1"])
def test_sampling_is_exact_per_row(drafter, warp):
    target = sharp_tiny_model(n_layers=2, seed=3)
    dist = exact_two_token_distribution(target, warp, n_tokens=3)
    other = [5, 1, 3, 2, 2, 4, 0]
    kwargs = ({"skip": SkipSet(attention=[1], mlp=[0])} if drafter == "skip"
              else {"drafter": HeadsDrafter(target, random_heads(target, 3, scale=1.0, seed=5))})

    def run(g):                   # rows 0 and 2 (the prompt) beside row 1 (another prompt): two samples a call
        out = speculative_generate(target, [PROMPT[0].tolist(), other, PROMPT[0].tolist()], policy=FixedK(3),
                                   max_new_tokens=3, do_sample=True, generator=g, temperature=warp.temperature,
                                   top_k=warp.top_k, top_p=warp.top_p, **kwargs).new_tokens
        return out[0], out[2]

    counts = two_per_call(run)
    assert chi_square_p_value(counts, dist) > 1e-3


def two_per_call(run) -> dict:
    """Counts of N_SAMPLES three-token continuations, two rows of each batched call (independent draws)."""
    g = torch.Generator().manual_seed(1234)
    counts = dict.fromkeys(itertools.product(range(VOCAB_SMALL), repeat=3), 0)
    for _ in range(N_SAMPLES // 2):
        for row in run(g):
            counts[tuple(row)] += 1
    return counts


def test_a_wrong_acceptance_rule_is_caught(monkeypatch):
    """Accepting every drafted token (never rejecting) must fail the same chi-square test."""
    target = sharp_tiny_model(n_layers=2, seed=3)
    warp = WARPS[0]
    dist = exact_two_token_distribution(target, warp, n_tokens=3)

    def accept_all(state, logits, draft, *, hidden_states=None):
        p = state.warp.probs(logits)
        return Verdict(len(draft), sample(p[len(draft)], state.generator), p, 1.0, None, state.position)

    monkeypatch.setattr(batch_decoding, "verify", accept_all)
    counts = two_per_call(lambda g: speculative_generate(
        target, [PROMPT[0].tolist(), [5, 1], PROMPT[0].tolist()], skip=SkipSet.all(2), policy=FixedK(3),
        max_new_tokens=3, do_sample=True, generator=g).new_tokens[::2])
    assert chi_square_p_value(counts, dist) < 1e-3


def test_clear_errors(model):
    with pytest.raises(ValueError, match="trees, cascades"):
        speculative_generate(model, [[1, 2], [3]], skip=SkipSet(mlp=[1]), tree=draft_tree("static"),
                             max_new_tokens=4)
    with pytest.raises(ValueError, match="input_ids\\[1\\]"):
        speculative_generate(model, [[1, 2], []], max_new_tokens=4)
    with pytest.raises(ValueError, match="attention_mask"):
        autoregressive_generate(model, torch.ones(2, 3, dtype=torch.long), 4, attention_mask=torch.ones(2, 2))
    with pytest.raises(ValueError, match="vocabulary"):
        autoregressive_generate(model, [[1, 2], [VOCAB]], 4)
    with pytest.raises(ValueError, match="ragged"):
        BatchConfig("sometimes")
    with pytest.raises(ValueError, match="increasing"):
        LoadPolicy((4, 1), (2, 0))
