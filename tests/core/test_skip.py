"""labkit.core.skip: SkipSet checks its indices and converts losslessly; ``skipping`` removes exactly the named
blocks and always puts the model back; ``batched_skipping`` scores several sets in one forward."""
from dataclasses import FrozenInstanceError

import pytest
import torch

from labkit import SkipSet, skipping, speculative_generate
from labkit.core.cache import layer_lengths, new_cache
from labkit.core.forward import forward_tokens
from labkit.core.skip import batched_skipping, decoder_layers, format_skip_set, parse_skip_set, pre_mlp_norm

from tiny_models import ARCHITECTURES, tiny_model

L = N_LAYERS = 4
VOCAB = 97
IDS = torch.tensor([[5, 6, 7]])


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param, n_layers=L, vocab_size=VOCAB)


def test_skip_set_errors():
    with pytest.raises(ValueError, match="more than once"):
        SkipSet(attention=[1, 1])
    with pytest.raises(ValueError, match="negative"):
        SkipSet(mlp=[-1])
    with pytest.raises(TypeError, match="integer"):
        SkipSet(attention=["a"])
    with pytest.raises(ValueError, match="even"):
        SkipSet.from_mask([True, False, True])


def test_skip_set_round_trip_and_hashing():
    s = SkipSet(attention=[3, 0], mlp=[2])
    assert s.attention == (0, 3) and SkipSet.from_mask(s.to_mask(4)) == s
    assert {s: 1}[SkipSet(attention=(0, 3), mlp=(2,))] == 1
    assert s.ratio(4) == 3 / 8 and "attention=[0, 3]" in str(s)
    assert SkipSet.from_dict(s.to_dict()) == s
    with pytest.raises(FrozenInstanceError):
        s.attention = (1,)


def test_errors_leave_the_model_untouched(model):
    before = [(n, id(m)) for n, m in model.named_modules()]
    with pytest.raises(ValueError):
        speculative_generate(model, IDS, skip=SkipSet(attention=[0, 7]), max_new_tokens=3)
    from labkit import skipping
    with pytest.raises(RuntimeError):
        with skipping(model, SkipSet(attention=[1], mlp=[2, 3])):
            raise RuntimeError("boom inside the draft")
    assert [(n, id(m)) for n, m in model.named_modules()] == before


def test_model_is_unchanged_after_skipping():
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)
    modules_before = [(n, id(m)) for n, m in model.named_modules()]
    ids = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(0))
    before = model(ids).logits
    speculative_generate(model, ids, skip=SkipSet(attention=[0, 2], mlp=[1, 2, 3]), max_new_tokens=10)
    assert [(n, id(m)) for n, m in model.named_modules()] == modules_before
    assert torch.equal(model(ids).logits, before)


def test_batched_rows_equal_skipping_each_set(model):
    ids = torch.randint(0, VOCAB, (1, 7), generator=torch.Generator().manual_seed(3))
    sets = [SkipSet(), SkipSet(attention=[1]), SkipSet(attention=[0, 2], mlp=[2, 3]), SkipSet.all(L)]
    masks = torch.tensor([s.to_mask(L) for s in sets])
    with torch.inference_mode():
        with batched_skipping(model, masks):
            batched = model(input_ids=ids.expand(len(sets), -1)).logits                 # (4, 7, V)
        for row, skip in enumerate(sets):
            with skipping(model, skip):
                assert torch.allclose(batched[row], model(input_ids=ids).logits[0], atol=1e-5), skip


# -- added with the mirrored layout --------------------------------------------------------------------------
def test_mask_layout_attention_first_and_validation_names_the_block():
    s = SkipSet(attention=[1], mlp=[0, 3])
    assert s.to_mask(4) == [False, True, False, False, True, False, False, True]
    assert SkipSet.from_mask(torch.tensor(s.to_mask(4))) == s
    assert SkipSet.all(3) == SkipSet(attention=[0, 1, 2], mlp=[0, 1, 2]) and SkipSet.all(3).n_skipped == 6
    assert not SkipSet() and SkipSet(mlp=[0]) and str(SkipSet()) == "SkipSet(nothing skipped)"
    with pytest.raises(ValueError, match="SkipSet.mlp holds layer index 4"):
        SkipSet(mlp=[4]).to_mask(4)
    with pytest.raises(TypeError, match="sequence of layer indices"):
        SkipSet(attention="12")
    with pytest.raises(TypeError, match="integer"):
        SkipSet(mlp=[True])
    with pytest.raises(ValueError, match="non-zero"):
        SkipSet.from_mask([])


def test_text_form_round_trips_and_rejects_other_keys():
    for s in (SkipSet(), SkipSet(attention=[1, 4]), SkipSet(attention=[1, 4], mlp=[3, 5]), SkipSet(mlp=[0])):
        assert parse_skip_set(format_skip_set(s)) == s
    assert parse_skip_set("attention=1,4;mlp=3,5") == SkipSet(attention=[1, 4], mlp=[3, 5])
    assert parse_skip_set("") == SkipSet() and parse_skip_set(" mlp=2 ; ") == SkipSet(mlp=[2])
    for bad in ("ffn=1", "attention:1", "attention=1;mlp"):
        with pytest.raises(ValueError, match="expected 'attention=i,j;mlp=k,l'"):
            parse_skip_set(bad)


def test_skipping_changes_the_output_and_nothing_skipped_is_the_model(model):
    ids = torch.randint(0, VOCAB, (1, 6), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        full = model(ids).logits
        with skipping(model, SkipSet()) as same:
            assert same is model and torch.equal(model(ids).logits, full)
        with skipping(model, SkipSet(mlp=[1])):
            assert not torch.allclose(model(ids).logits, full)
        with skipping(model, SkipSet.all(L)):                   # every block gone: the embedding alone
            bare = model(ids).logits
        assert torch.equal(model(ids).logits, full)
    # with every layer an identity, the logits only depend on the current token: equal tokens, equal rows
    twice = torch.tensor([[3, 9, 3]])
    with torch.inference_mode(), skipping(model, SkipSet.all(L)):
        rows = model(twice).logits[0]
    assert torch.allclose(rows[0], rows[2]) and bare.shape == full.shape


def test_skipped_attention_appends_nothing_to_its_cache_layer():
    model = tiny_model("llama", n_layers=L, vocab_size=VOCAB)
    cache = new_cache(model)
    with torch.inference_mode():
        forward_tokens(model, [1, 2, 3], 0, cache)
        with skipping(model, SkipSet(attention=[1, 3], mlp=[2])):
            forward_tokens(model, [4], 3, cache)
    assert layer_lengths(cache) == [4, 3, 4, 3]


def test_helpers_find_the_layers_and_the_norm_between_blocks(model):
    assert len(decoder_layers(model)) == L
    expected = "pre_feedforward_layernorm" if model.config.model_type == "gemma2" else "post_attention_layernorm"
    assert pre_mlp_norm(model) == expected and hasattr(decoder_layers(model)[0], expected)
    with pytest.raises(TypeError, match="no `.model.layers`"):
        decoder_layers(torch.nn.Linear(2, 2))


def test_batched_skipping_checks_the_mask_shape_and_restores_the_model(model):
    before = [(n, id(m)) for n, m in model.named_modules()]
    with pytest.raises(ValueError, match=rf"masks must have shape \(B, {2 * L}\)"):
        with batched_skipping(model, torch.zeros(2, 2 * L + 1, dtype=torch.bool)):
            pass
    with pytest.raises(RuntimeError):
        with batched_skipping(model, torch.ones(2, 2 * L, dtype=torch.bool)):
            raise RuntimeError("boom")
    assert [(n, id(m)) for n, m in model.named_modules()] == before
