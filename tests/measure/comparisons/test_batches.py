"""Batches through the harness: blocks pack and unpack, a batched call reads as one harness run (every row in the
identity check, counts of drafted and accepted tokens), and the load policy's decoder caps γ, a cap of 0 decoding
plainly, a batch of one included."""
import pytest
import torch

from labkit.core.batch_decoding import LoadPolicy
from labkit.core.draft_config import DraftConfig
from labkit.core.skip import SkipSet
from labkit.measure.comparisons.batches import (
    PAD,
    BatchRun,
    batch_calibration,
    pack_rows,
    plain_batch_decoder,
    policy_batch_decoder,
    speculative_batch_decoder,
    unpack_rows,
)
from labkit.measure.harness import run_interleaved, summarise

from tiny_models import tiny_model

CONFIG = DraftConfig(SkipSet(mlp=[1, 2], attention=[3]), None, "static", 0.3, 4)
PROMPTS = [[5, 6, 7, 8, 9], [11, 12], [3, 4, 5, 6], [20, 21, 22, 23, 24, 25, 26], [30]]


def test_blocks_pack_and_unpack_every_prompt_in_order():
    blocks = pack_rows([torch.tensor([p]) for p in PROMPTS], 2)
    assert [b.shape[0] for b in blocks] == [2, 2, 1] and blocks[0][1, -1].item() == PAD
    assert [row for b in blocks for row in unpack_rows(b)] == PROMPTS
    with pytest.raises(ValueError, match="batch"):
        pack_rows(PROMPTS, 0)
    with pytest.raises(ValueError, match="block"):
        unpack_rows([1, 2])


def test_a_batched_run_is_one_harness_row_with_every_row_checked():
    model = tiny_model("llama")
    decoders = [plain_batch_decoder(model, "plain"), speculative_batch_decoder(model, CONFIG, "on"),
                policy_batch_decoder(model, CONFIG, LoadPolicy((1, 4), (2, 0)), "policy")]
    runs = run_interleaved(decoders, pack_rows(PROMPTS[:4], 2), max_new_tokens=6, repeats=2, progress=False)
    rows = {r["method"]: r for r in summarise(runs)}
    assert all(r["identical"] for r in rows.values())
    assert rows["plain"]["new_tokens"] == 4 * 6 and rows["on"]["new_tokens"] == 4 * 6
    assert 0 <= rows["on"]["acceptance"] <= 1 and rows["on"]["c"] != rows["on"]["c"]     # c: NaN for a batch


def test_the_policy_decoder_caps_gamma_and_turns_speculation_off():
    model = tiny_model("llama")
    block = pack_rows(PROMPTS[:3], 3)[0]
    off = policy_batch_decoder(model, CONFIG, LoadPolicy((1, 2), (3, 0)), "off").run(block, 5)
    assert isinstance(off, BatchRun) and sum(off.result.drafted) == 0 and off.trace.summary()["steps"] == 0
    one = pack_rows(PROMPTS[:1], 1)[0]
    capped = policy_batch_decoder(model, CONFIG, LoadPolicy((1,), (1,)), "cap 1").run(one, 8)
    steps = capped.trace.summary()["steps"]
    assert steps and capped.trace.summary()["drafted"] <= steps                      # at most one per step
    plain = plain_batch_decoder(model, "plain").run(one, 8)
    assert torch.equal(capped.sequences, plain.sequences)


def test_the_calibration_gives_a_policy_for_every_batch_size():
    model = tiny_model("llama")
    cal = batch_calibration(model, CONFIG, PROMPTS, batch_sizes=(1, 2), gammas=(1, 2), tokens=4, repeats=2)
    assert cal.policy.batch_sizes == (1, 2) and 0 <= cal.alpha <= 1 and 0 <= cal.acceptance <= 1
    assert cal.to_dict()["policy"]["max_draft"] == list(cal.policy.max_draft)
