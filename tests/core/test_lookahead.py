"""Lookahead decoding: the window's mask gives each guess its trajectory's logits, greedy output is plain decoding's
on the four families (random W, N, G, prompts of one token, EOS inside a step), sampling is exact by the chi-square
test and a wrong candidate rule is caught; the pool and the trace say where every accepted n-gram came from."""
import random

import pytest
import torch

import labkit
import labkit.core.tree as tree_module
from labkit import FixedK, SkipSet, autoregressive_generate, speculative_generate
from labkit.core.cache import new_cache
from labkit.core.decoding import prefill
from labkit.core.lookahead import LookaheadDrafter, NGramPool, Origin, trie, window_mask
from labkit.core.request import make_drafter
from labkit.core.tree import tree_forward

from exact_sampling import (
    PROMPT,
    WARPS,
    chi_square_p_value,
    empirical,
    exact_two_token_distribution,
    sharp_tiny_model,
    total_variation,
    tv_bound,
)
from tiny_models import ARCHITECTURES, eos_met_part_way, tiny_model


def test_window_mask_shows_each_guess_its_trajectory():
    seen = window_mask(3, 2)                                  # rows (0,0) (0,1) (1,0) (1,1) (2,0) (2,1)
    assert seen[3].tolist() == [True, True, False, True, False, False]      # (1,1): level 0 to column 1, (1,1)
    assert seen[4].tolist() == [True, False, True, False, True, False]      # (2,0): (0,0), (1,0), itself
    assert seen.diagonal().all()


@pytest.mark.parametrize("arch", ["llama", "gemma2"])
def test_a_window_guess_gets_the_logits_of_its_trajectory(arch):
    model = tiny_model(arch, n_layers=2)
    ids, levels, W = [5, 9, 14, 20, 7], [[11, 12, 13], [21, 22, 23]], 3
    with torch.no_grad():
        cache = new_cache(model)
        prefill(model, torch.tensor([ids[:-1]]), cache)
        s = len(ids) - 1
        visible = torch.zeros(7, 7, dtype=torch.bool)
        visible[:, 0], visible[0, 0], visible[1:, 1:] = True, True, window_mask(2, W)
        positions = [s] + [s + 1 + lv + c for lv in range(2) for c in range(W)]
        logits = tree_forward(model, cache, [7] + levels[0] + levels[1], positions, visible, s)
        for lv in range(2):
            for c in range(W):
                path = levels[0][: c + 1] + [levels[1][c]] * lv
                plain = model(torch.tensor([ids + path])).logits[0, -1]
                torch.testing.assert_close(logits[1 + lv * W + c], plain, rtol=1e-4, atol=1e-4)


def test_pool_keeps_the_most_recent_G_per_key_and_trie_merges_prefixes():
    pool = NGramPool(G=2)
    for i, cont in enumerate([(1, 2), (1, 3), (4, 5), (1, 2)]):
        pool.add(7, cont, Origin(i, 0))
    assert [c for c, _ in pool.candidates(7)] == [(1, 2), (4, 5)] and len(pool) == 2
    assert pool.candidates(7)[0][1] == Origin(3, 0) and pool.candidates(8) == []
    assert trie([(1, 2), (1, 3), (4, 9, 9)], frozenset({9})) == ([1, 2, 3, 4, 9], [-1, 0, 0, -1, 3], [0, 0, 1, 2, 2])


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("seed", range(2))
def test_greedy_output_is_plain_decoding_s(arch, seed):
    rng = random.Random(seed)
    model = tiny_model(arch, n_layers=3, seed=seed)
    accepted = 0
    for _ in range(5):
        prompt = torch.tensor([[rng.randrange(97) for _ in range(rng.choice([1, rng.randint(2, 12)]))]])
        n_new = rng.randint(1, 40)
        eos = eos_met_part_way(rng, model, prompt, n_new)
        drafter = labkit.lookahead(W=rng.randint(1, 5), N=rng.randint(2, 5), G=rng.randint(1, 5))
        out = speculative_generate(model, prompt, drafter=drafter, policy=FixedK(rng.randint(1, 6)),
                                   max_new_tokens=n_new, eos_token_id=eos)
        plain = autoregressive_generate(model, prompt, n_new, eos_token_id=eos)
        assert out.sequences.equal(plain.sequences), (prompt, n_new, eos, drafter.W, drafter.N, drafter.G)
        accepted += sum(s.n_accepted for s in out.trace.steps)
    assert accepted > 0                                     # the pool's n-grams were right some of the time


def test_the_trace_and_the_history_say_where_each_n_gram_came_from():
    model = tiny_model("llama", n_layers=2)
    drafter = labkit.lookahead(W=3, N=3, G=3)
    out = speculative_generate(model, torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]]), drafter=drafter,
                               policy=FixedK(4), max_new_tokens=40)
    steps = [s for s in out.trace.steps if s.drafted]
    assert steps and all(s.draft_source == "lookahead" and len(s.origins) == s.n_drafted for s in steps)
    assert all(o.startswith("window step") for s in steps for o in s.origins)
    kept = [h for h in drafter.history if h["accepted"]]
    assert kept and all(h["from"].startswith("window step") for h in kept)
    assert len(drafter.history) == len(out.trace.steps) and len(drafter.pool) > 0


def test_in_front_of_a_self_draft_it_stays_lossless_and_uses_both():
    model = tiny_model("qwen2", n_layers=4, seed=2)
    prompt = torch.tensor([[7, 3, 9, 7, 3, 9, 12]])
    drafter = labkit.lookahead(W=3, N=3, G=2, fallback=make_drafter(model, skip=SkipSet(mlp=[1, 2])))
    out = speculative_generate(model, prompt, drafter=drafter, policy=FixedK(3), max_new_tokens=40)
    assert out.sequences.equal(autoregressive_generate(model, prompt, 40).sequences)
    assert {s.draft_source for s in out.trace.steps if s.drafted} == {"lookahead", "model"}


@pytest.fixture(scope="module")
def target():
    return sharp_tiny_model(n_layers=2, seed=3)


class SeededLookahead(LookaheadDrafter):
    """A pool holding G continuations of every token from the first step on: several candidates every step."""

    def prepare(self, state, prompt_ids):
        super().prepare(state, prompt_ids)
        for key in range(6):
            for a, b in [(key, 1), (2, 3), ((key + 1) % 6, 0), (5, key)]:
                self.pool.add(key, (a, b), Origin(-1, a))


def _sampled(target, warp, drafter):
    drafted = []

    def one(g):
        out = speculative_generate(target, PROMPT, drafter=drafter, policy=FixedK(2), max_new_tokens=3,
                                   do_sample=True, generator=g, temperature=warp.temperature, top_k=warp.top_k,
                                   top_p=warp.top_p)
        drafted.append(sum(s.n_drafted for s in out.trace.steps))
        return out.new_tokens
    return one, drafted


@pytest.mark.parametrize("seeded", [False, True], ids=["own-pool", "seeded-pool"])
def test_sampling_draws_exactly_from_p(target, seeded):
    warp = WARPS[1] if seeded else WARPS[0]
    dist = exact_two_token_distribution(target, warp, n_tokens=3)
    drafter = SeededLookahead(W=4, N=3, G=4) if seeded else LookaheadDrafter(W=4, N=2, G=3)
    one, drafted = _sampled(target, warp, drafter)
    counts = empirical(one, 3)
    assert sum(drafted) > (4 * len(drafted) if seeded else 0)     # candidates were verified (several: seeded)
    assert chi_square_p_value(counts, dist) > 1e-3
    assert total_variation(counts, dist) < tv_bound(dist)


def test_a_wrong_candidate_rule_fails_the_same_test(target, monkeypatch):
    """Trying the next candidate against p itself (not p with the rejected token removed): caught."""
    monkeypatch.setattr(tree_module, "residual_distribution", lambda p, q: p)
    dist = exact_two_token_distribution(target, WARPS[0], n_tokens=3)
    one, _ = _sampled(target, WARPS[0], SeededLookahead(W=4, N=3, G=4))
    assert chi_square_p_value(empirical(one, 3), dist) < 1e-3


def test_clear_errors():
    with pytest.raises(ValueError, match="W"):
        labkit.lookahead(W=0)
    with pytest.raises(ValueError, match="N"):
        labkit.lookahead(N=1)
    with pytest.raises(TypeError, match="fallback"):
        labkit.lookahead(fallback="self")
