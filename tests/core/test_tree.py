"""Tree drafts verified in one forward: the mask, the positions, the cache kept along the accepted path, and the
verdicts (greedy: token-identical to plain decoding; sampling: SpecInfer's rule draws exactly from p)."""
import random

import pytest
import torch

import labkit.core.tree as tree_module
from labkit import FixedK, SkipSet, autoregressive_generate, draft_tree, speculative_generate
from labkit.core.cache import layer_lengths, new_cache
from labkit.core.decoding import prefill
from labkit.core.forward import forward_tokens
from labkit.core.tree import (
    ancestry,
    children,
    depths,
    keep_path,
    tree_forward,
    verify_tree_greedy,
    verify_tree_sampling,
)

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
from tiny_models import ARCHITECTURES, tiny_model

TREE = [-1, -1, 0, 0, 2, 1]            # two children of the root, node 0 has two, node 2 one, node 1 one


def test_depths_ancestry_and_children():
    assert depths(TREE) == [1, 1, 2, 2, 3, 2]
    seen = ancestry(TREE)
    assert seen[5].tolist() == [True, True, False, True, False, True, False]        # node 4: root, 0, 2, itself
    assert seen.diagonal().all() and seen[:, 0].all()                                # all see themselves and t_0
    assert children(TREE) == [[0, 1], [2, 3], [5], [4], [], [], []]
    with pytest.raises(ValueError, match="node 1's parent"):
        depths([-1, 1])


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_a_tree_forward_gives_each_node_the_logits_of_its_own_chain(arch):
    model = tiny_model(arch, n_layers=3)
    ids = torch.tensor([[5, 9, 14, 20, 7]])
    tokens = [11, 12, 13, 14, 15, 16]
    with torch.no_grad():
        cache = new_cache(model)
        prefill(model, ids[:, :-1], cache)
        start = ids.shape[1] - 1
        logits = tree_forward(model, cache, [7] + tokens, [start] + [start + d for d in depths(TREE)],
                              ancestry(TREE), start)                                   # (7, V)
        for node in range(len(TREE)):
            chain, n = [], node
            while n >= 0:
                chain.insert(0, tokens[n])
                n = TREE[n]
            plain = model(torch.cat([ids, torch.tensor([chain])], dim=1)).logits[0, -1]
            torch.testing.assert_close(logits[node + 1], plain, rtol=1e-4, atol=1e-4)


def test_keep_path_keeps_the_prefix_the_root_and_the_path_in_order():
    model = tiny_model("llama", n_layers=2)
    ids = torch.tensor([[5, 9, 14]])
    tokens = [11, 12, 13, 14, 15, 16]
    with torch.no_grad():
        cache = new_cache(model)
        prefill(model, ids[:, :-1], cache)
        tree_forward(model, cache, [14] + tokens, [2] + [2 + d for d in depths(TREE)], ancestry(TREE), 2)
        keep_path(cache, 2, [0, 2, 4])
        assert layer_lengths(cache) == [6, 6]
        expected = new_cache(model)
        forward_tokens(model, [5, 9, 14, 11, 13, 15], 0, expected)
        for kept, plain in zip(cache.layers, expected.layers):
            torch.testing.assert_close(kept.keys, plain.keys, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(kept.values, plain.values, rtol=1e-4, atol=1e-4)


def test_greedy_verdict_follows_the_argmax_through_the_tree():
    logits = torch.full((7, 20), -5.0)
    for row, best in enumerate([12, 13, 7, 15, 3, 4, 9]):
        logits[row, best] = 5.0
    tokens = [11, 12, 13, 14, 15, 16]              # the root's argmax is 12: node 1; at node 1 (row 2) it is 7,
    assert verify_tree_greedy(logits, tokens, TREE) == ([1], 7)        # which node 1's only child (16) is not
    logits[0] = -5.0
    logits[0, 11] = 5.0                            # root -> node 0 (11), node 0's argmax 13 -> node 2, then 15 -> 4
    assert verify_tree_greedy(logits, tokens, TREE) == ([0, 2, 4], 4)


def test_sampling_verdict_tries_the_siblings_against_what_is_left_of_p():
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    q = torch.tensor([0.0, 0.0, 1.0])              # both children drew token 2, which p gives no mass at the root
    path, token = verify_tree_sampling(p, [2, 2], [-1, -1], [q, q], torch.Generator().manual_seed(0))
    assert path == [] and token in (0, 1)          # every child rejected; the residual of p - q is p itself here


def random_tree_setup(rng: random.Random):
    name = rng.choice(["static", "confidence", "dynamic"])
    options = {"dynamic": {"top_k": rng.randint(1, 3), "nodes": rng.randint(1, 12)},
               "confidence": {"below": rng.random(), "siblings": rng.randint(0, 3)},
               "static": {}}[name]
    skip = SkipSet(attention=rng.sample(range(4), rng.randint(0, 2)), mlp=rng.sample(range(4), rng.randint(0, 3)))
    return draft_tree(name, **options), skip, FixedK(rng.randint(1, 6))


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("seed", range(3))
def test_every_tree_shape_is_token_identical_to_plain_greedy(arch, seed):
    rng = random.Random(seed)
    model = tiny_model(arch, n_layers=4, seed=seed)
    for _ in range(3):
        prompt = torch.tensor([[rng.randrange(97) for _ in range(rng.randint(1, 12))]])
        n_new = rng.randint(1, 30)
        eos = [rng.randrange(97)] if rng.random() < 0.5 else []
        tree, skip, policy = random_tree_setup(rng)
        out = speculative_generate(model, prompt, skip=skip, tree=tree, policy=policy, max_new_tokens=n_new,
                                   eos_token_id=eos)
        plain = autoregressive_generate(model, prompt, n_new, eos_token_id=eos)
        assert out.sequences.equal(plain.sequences), (tree, skip)
        assert all(s.parents is not None and len(s.parents) == s.n_drafted for s in out.trace.steps if s.drafted)


@pytest.fixture(scope="module")
def target():
    return sharp_tiny_model(n_layers=2, seed=3)


@pytest.mark.parametrize("name", ["static", "confidence", "dynamic"])
def test_tree_sampling_draws_exactly_from_p(target, name):
    warp = WARPS[0]
    dist = exact_two_token_distribution(target, warp, n_tokens=3)
    tree = draft_tree(name, **({"below": 1.0, "siblings": 2} if name == "confidence" else {}))
    counts = empirical(lambda g: speculative_generate(target, PROMPT, skip=SkipSet(mlp=[1], attention=[0]),
                                                      tree=tree, policy=FixedK(3), max_new_tokens=3, do_sample=True,
                                                      generator=g).new_tokens, 3)
    assert chi_square_p_value(counts, dist) > 1e-3
    assert total_variation(counts, dist) < tv_bound(dist)


def test_a_wrong_sibling_rule_fails_the_same_test(target, monkeypatch):
    """Trying a second child against p itself (not what the first rejection left of it) over-samples: caught."""
    monkeypatch.setattr(tree_module, "residual_distribution", lambda p, q: p)
    dist = exact_two_token_distribution(target, WARPS[0])
    counts = empirical(lambda g: speculative_generate(target, PROMPT, skip=SkipSet.all(2), tree=draft_tree("static"),
                                                      policy=FixedK(2), max_new_tokens=2, do_sample=True,
                                                      generator=g).new_tokens)
    assert chi_square_p_value(counts, dist) < 1e-3


def test_trees_refuse_what_they_cannot_verify():
    model = tiny_model("gemma2", n_layers=2, max_positions=16)        # a sliding window of 16 positions
    with pytest.raises(ValueError, match="sliding window"):
        speculative_generate(model, torch.tensor([[1] * 12]), skip=SkipSet(mlp=[1]), tree=draft_tree("dynamic"),
                             max_new_tokens=3)
    with pytest.raises(TypeError, match="tree must be a tree shape"):
        speculative_generate(model, torch.tensor([[1, 2]]), tree="dynamic", max_new_tokens=3)
