"""A Draft is a chain or, with ``tree``, a tree whose nodes name their parents."""
from labkit.core.draft import Draft


def test_a_chain_and_a_tree_know_their_parents_and_depth():
    chain = Draft(tokens=[4, 5, 6])
    assert chain.parents == [-1, 0, 1] and chain.depth == 3 and chain.tree is None
    tree = Draft(tokens=[4, 5, 6, 7], tree=[-1, -1, 0, 2])
    assert tree.parents == [-1, -1, 0, 2] and tree.depth == 3
    assert Draft().parents == [] and Draft().depth == 0 and Draft(tree=[]).depth == 0
