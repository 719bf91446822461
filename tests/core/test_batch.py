"""The batch's cache: left padding, the mask of valid columns, rows leaving, compaction keeping every row's
logits, a sliding window that would drop columns refused."""
import pytest
import torch

from labkit.core.batch import (
    BatchConfig,
    attention_mask,
    batch_forward,
    check_batch_fits,
    check_rows,
    compact,
    keep_rows,
    new_batch,
    pad_prompts,
)
from labkit.core.cache import new_cache
from labkit.core.forward import forward_tokens
from labkit.core.sampling import Warp

from tiny_models import tiny_model


def test_pad_prompts_left_pads_with_positions():
    ids, valid, positions = pad_prompts([[4, 5, 6], [7], []])
    assert ids.tolist() == [[4, 5, 6], [0, 0, 7], [0, 0, 0]]
    assert valid.tolist() == [[True] * 3, [False, False, True], [False] * 3]
    assert positions[0].tolist() == [0, 1, 2] and positions[1, 2] == 0


def test_the_mask_hides_holes_and_the_future_but_never_a_query_s_own_column():
    cached = torch.tensor([[True, False]])
    new = torch.tensor([[True, False, True]])
    seen = attention_mask(cached, new, torch.float32)[0, 0] == 0
    assert seen.tolist() == [[True, False, True, False, False],
                             [True, False, True, True, False],          # a hole's query sees only itself
                             [True, False, True, False, True]]


def last_logits(model, prompt):
    cache = new_cache(model)
    return forward_tokens(model, prompt, 0, cache)[-1]


@pytest.mark.parametrize("arch", ["llama", "gemma2"])
def test_rows_leaving_and_compaction_keep_every_row_s_logits(arch):
    model = tiny_model(arch)
    prompts = [[3, 4, 5, 6, 7], [8, 9], [10, 11, 12]]
    state, _ = new_batch(model, prompts, Warp(), frozenset(), None)
    # a step that leaves holes: row 1 feeds a token that no later query may read
    new = torch.tensor([[True], [False], [True]])
    batch_forward(model, state.cache, state.valid, torch.tensor([[7], [9], [12]]),
                  torch.tensor([[4], [1], [2]]), new)
    state.valid = torch.cat([state.valid, new], dim=1)
    keep_rows(state, [1, 2])
    assert state.rows == [1, 2] and state.valid.shape == (2, 5)
    compact(state)
    assert state.valid.shape == (2, 3) and state.valid.sum(1).tolist() == [1, 3]
    with torch.inference_mode():
        out = batch_forward(model, state.cache, state.valid, torch.tensor([[9], [13]]), torch.tensor([[1], [3]]),
                            torch.ones(2, 1, dtype=torch.bool)).logits[:, -1]
    assert torch.allclose(out[0], last_logits(model, [8, 9]), atol=1e-4)
    assert torch.allclose(out[1], last_logits(model, [10, 11, 12, 13]), atol=1e-4)


def test_clear_errors():
    model = tiny_model("gemma2", max_positions=16)
    with pytest.raises(ValueError, match="sliding window"):
        check_batch_fits(model, 40)
    with pytest.raises(TypeError, match=r"input_ids\[0\]"):
        check_rows([["a"]])
    with pytest.raises(ValueError, match="empty batch"):
        check_rows([])
    with pytest.raises(ValueError, match="compact_below"):
        BatchConfig(compact_below=2.0)
