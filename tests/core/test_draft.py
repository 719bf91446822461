"""A Draft is a chain or, with ``tree``, a tree whose nodes name their parents."""
from labkit.core.draft import Draft


def test_a_chain_and_a_tree_know_their_parents_and_depth():
    chain = Draft(tokens=[4, 5, 6])
    assert chain.parents == [-1, 0, 1] and chain.depth == 3 and chain.tree is None
    tree = Draft(tokens=[4, 5, 6, 7], tree=[-1, -1, 0, 2])
    assert tree.parents == [-1, -1, 0, 2] and tree.depth == 3
    assert Draft().parents == [] and Draft().depth == 0 and Draft(tree=[]).depth == 0


def test_copied_tokens_are_point_masses_and_keep_their_distributions_only_when_sampling():
    greedy, sampled = Draft(), Draft()
    greedy.add_copied([3, 1], vocab_size=5, device="cpu", keep_dist=False)
    sampled.add_copied([3, 1], vocab_size=5, device="cpu", keep_dist=True)
    for d in (greedy, sampled):
        assert d.tokens == [3, 1] and d.q == [1.0, 1.0] and d.confidence == [1.0, 1.0]
    assert greedy.q_dists == [] and [q.tolist() for q in sampled.q_dists] == [[0, 0, 0, 1, 0], [0, 1, 0, 0, 0]]
