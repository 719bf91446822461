"""Tree shapes grow what their papers describe: Medusa's fixed ranks, SWIFT's siblings where the draft is unsure,
EAGLE-2's best nodes by cumulative q (always a tree: a kept node's parent is kept)."""
import pytest
import torch

from labkit import FixedK, SkipSet, draft_tree, speculative_generate
from labkit.core.tree_shapes import ConfidenceTree, DynamicTree, StaticTree

from tiny_models import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4)


def first_tree(model, tree, policy=None, **kw):
    out = speculative_generate(model, torch.tensor([[3, 5, 8, 13]]), skip=SkipSet(mlp=[1, 2]), tree=tree,
                               policy=policy or FixedK(4), max_new_tokens=6, **kw)
    step = out.trace.steps[0]
    return step.drafted, step.parents, step.confidence


def test_static_tree_has_the_choices_shape(model):
    choices = ((0,), (1,), (0, 0), (0, 1), (0, 0, 0))
    tokens, parents, _ = first_tree(model, StaticTree(choices))
    assert parents == [-1, -1, 0, 0, 2]
    assert tokens[0] != tokens[1] and tokens[2] != tokens[3]              # greedy: distinct ranks are distinct tokens
    with pytest.raises(ValueError, match="prefixes"):
        StaticTree(((0, 1),))


def test_confidence_tree_adds_siblings_only_where_the_draft_is_unsure(model):
    tokens, parents, confidence = first_tree(model, ConfidenceTree(below=1.0, siblings=2))    # always unsure
    assert parents[:3] == [-1, -1, -1] and len(tokens) % 3 == 0
    tokens, parents, _ = first_tree(model, ConfidenceTree(below=0.0, siblings=2))             # never unsure
    assert parents == list(range(-1, len(tokens) - 1))                                         # a chain


def test_dynamic_tree_keeps_the_best_nodes_and_stays_a_tree(model):
    tokens, parents, _ = first_tree(model, DynamicTree(top_k=3, nodes=7))
    assert len(tokens) == 7 and parents[:3] == [-1, -1, -1]
    assert all(p < i for i, p in enumerate(parents))
    assert max(depth_of(parents)) >= 2                                     # it went deeper than one level


def depth_of(parents):
    out = []
    for p in parents:
        out.append(1 if p < 0 else out[p] + 1)
    return out


def test_draft_tree_names_and_errors():
    assert draft_tree("chain") is None
    assert isinstance(draft_tree("dynamic", top_k=2), DynamicTree)
    with pytest.raises(ValueError, match="tree must be one of"):
        draft_tree("bush")
    with pytest.raises(ValueError, match="chain takes no options"):
        draft_tree("chain", nodes=3)
    with pytest.raises(TypeError, match="top_k must be an integer"):
        draft_tree("dynamic", top_k=1.5)
