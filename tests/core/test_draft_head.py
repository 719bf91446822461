"""Draft heads: a new head is the identity, the hook always goes away, a head changes the draft but never the
output (greedy: 0 mismatches with the plain loop on every architecture; sampling: tests/core/test_sampling.py),
it refuses sets it was not fitted for, and it saves and loads whole."""
import random

import pytest
import torch

from labkit import FixedK, SkipSet, StaticThreshold, autoregressive_generate, load_draft_head, speculative_generate
from labkit.core.draft_head import DraftHead, final_norm
from labkit.core.drafters import SelfDrafter
from labkit.core.strategies import OnTheFlyStrategy

from tiny_models import ARCHITECTURES, random_draft_head, tiny_model

N_LAYERS, VOCAB = 4, 97
SKIP = SkipSet(attention=[1, 3], mlp=[2])


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param, n_layers=N_LAYERS, vocab_size=VOCAB)


def _draft_logits(model, head):
    ids = torch.randint(0, VOCAB, (1, 7), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        if head is None:
            return model(ids).logits
        with head.applied(model):
            return model(ids).logits


def test_a_new_head_is_the_identity_and_a_fitted_one_changes_the_draft(model):
    plain = _draft_logits(model, None)
    assert torch.equal(_draft_logits(model, DraftHead(model.config.hidden_size, SKIP)), plain)
    assert not torch.allclose(_draft_logits(model, random_draft_head(model, SKIP)), plain)


def test_the_hook_is_removed_also_on_errors(model):
    head, norm, plain = random_draft_head(model, SKIP), final_norm(model), _draft_logits(model, None)
    hooks = dict(norm._forward_hooks)
    with pytest.raises(KeyError):
        with head.applied(model):
            assert len(norm._forward_hooks) == len(hooks) + 1
            raise KeyError("inside a draft")
    assert dict(norm._forward_hooks) == hooks
    assert torch.equal(_draft_logits(model, None), plain)


@pytest.mark.parametrize("seed", range(3))
def test_greedy_with_a_draft_head_matches_plain_decoding(model, seed):
    """A head far from the identity, alone, with int8 draft weights, with prompt lookup: 0 mismatches."""
    rng = random.Random(seed)
    head = random_draft_head(model, SKIP, seed=seed)
    for call in range(3):
        generator = torch.Generator().manual_seed(seed * 7 + call)
        ids = torch.randint(0, VOCAB, (1, rng.choice([1, 4, 11])), generator=generator)
        max_new = rng.choice([3, 9, 24])
        expected = autoregressive_generate(model, ids, max_new).sequences
        policy = rng.choice([FixedK(rng.randint(1, 6)), StaticThreshold(rng.choice([0.0, 0.3]), 8)])
        out = speculative_generate(model, ids, skip=SKIP, policy=policy, max_new_tokens=max_new, draft_head=head,
                                   lookup=rng.choice([0, 3]), draft_weights=rng.choice([None, "int8"]))
        assert torch.equal(out.sequences, expected), (policy, call)


def test_a_head_drafts_only_with_its_own_set(model):
    ids, head = torch.tensor([[1, 2, 3]]), random_draft_head(model, SKIP)
    with pytest.raises(ValueError, match="draft_head was fitted for"):
        speculative_generate(model, ids, skip=SkipSet(mlp=[1]), draft_head=head, max_new_tokens=3)
    with pytest.raises(ValueError, match="draft_head was fitted for"):
        speculative_generate(model, ids, skip=OnTheFlyStrategy(SKIP), draft_head=head, max_new_tokens=3)
    with pytest.raises(ValueError, match="draft_head"):
        speculative_generate(model, ids, draft_model=model, draft_head=head, max_new_tokens=3)
    with pytest.raises(ValueError, match="draft_head"):
        speculative_generate(model, ids, drafter=SelfDrafter(model, SKIP), draft_head=head, max_new_tokens=3)
    with pytest.raises(TypeError, match="draft_head"):
        speculative_generate(model, ids, skip=SKIP, draft_head="default", max_new_tokens=3)
    with pytest.raises(ValueError, match="hidden size"):
        speculative_generate(model, ids, skip=SKIP, draft_head=DraftHead(model.config.hidden_size + 8, SKIP),
                             max_new_tokens=3)


def test_bad_head_arguments_name_themselves():
    with pytest.raises(TypeError, match="skip"):
        DraftHead(32, "attention=1")
    with pytest.raises(ValueError, match="threshold"):
        DraftHead(32, SKIP, threshold=1.5)


def test_save_and_load_keep_everything(tmp_path):
    head = random_draft_head(tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB), SKIP)
    head.threshold, head.info = 0.35, {"positions": 12}
    loaded = DraftHead.load(head.save(tmp_path / "head"))
    assert loaded.skip == SKIP and loaded.threshold == 0.35 and loaded.info == {"positions": 12}
    assert all(torch.equal(a, b) for a, b in zip(head.state_dict().values(), loaded.state_dict().values()))
    assert not any(p.requires_grad for p in loaded.parameters())
    with pytest.raises(FileNotFoundError, match="no draft head"):
        DraftHead.load(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="train-draft-head"):
        load_draft_head(tmp_path / "nothing")
