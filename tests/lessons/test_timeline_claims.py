"""Notebook 03's sentences turn with the data (fake traces and tables that reverse each claim)."""
import pandas as pd

from labkit.core.policies import AdaptiveThreshold
from labkit.core.trace import StepRecord, Trace
from labkit.lessons import timeline as tl


def trace(steps, conf=0.5, ms_per_token=5.0, threshold=0.25, sampling=False):
    """steps: [(n_drafted, n_accepted)]; every step emits n_accepted + 1 tokens."""
    t = Trace(prompt_length=3, sampling=sampling)
    for i, (d, a) in enumerate(steps):
        t.steps.append(StepRecord(position=3 + i, drafted=[1] * d, q=[0.5] * d, confidence=[conf] * d, p=[0.5] * d,
                                  n_accepted=a, next_token=2, next_kind="replacement", threshold=threshold + 0.001 * i,
                                  draft_s=0.001, verify_s=0.002, n_emitted=a + 1))
    t.total_s = ms_per_token * t.n_emitted / 1e3
    return t


def test_confidence_band_sentence():
    assert "100% had a top-1 probability between 0.2 and 0.6" in tl.confidence_band_sentence(trace([(3, 2)], conf=0.4))
    assert "100% at least 0.6" in tl.confidence_band_sentence(trace([(3, 2)], conf=0.9))
    assert "stop many drafts" in tl.confidence_band_sentence(trace([(3, 2)], conf=0.9))


def test_sampling_sentence_explains_the_slowdown_or_not():
    greedy = trace([(4, 3)] * 5, ms_per_token=5.0)
    slow = trace([(10, 1)] * 5, ms_per_token=18.0, sampling=True)
    text = tl.sampling_sentence(greedy, slow, AdaptiveThreshold())
    assert "(3.6x)" in text and "rejected or discarded" in text and "moves at most 0.001 per step" in text
    fine = trace([(4, 3)] * 5, ms_per_token=5.0, sampling=True)
    assert "did not waste more drafts" in tl.sampling_sentence(greedy, fine)


def test_verify_and_drafters_sentences():
    assert "c_v = 0.60" in tl.verify_cost_sentence(trace([(3, 2)]), plain_ms_per_token=2.0 / 0.6)
    runs = {"self": trace([(4, 3)], ms_per_token=4.0), "separate": trace([(4, 3)], ms_per_token=6.0)}
    assert "the self was faster" in tl.drafters_sentence(runs)
    runs["self"] = trace([(4, 3)], ms_per_token=9.0)
    assert "the separate was faster" in tl.drafters_sentence(runs)


def contrast(loop_off, loop_on, novel_off, novel_on, loop_share=0.5, novel_share=0.02):
    rows = []
    for label, share, (off, on) in (("first held-out prompt", loop_share, (loop_off, loop_on)),
                                    ("showcase prompt", novel_share, (novel_off, novel_on))):
        for n, tps in ((0, off), (6, on)):
            rows.append({"text": label, "prompt lookup": n, "tokens per step": tps, "accepted / drafted": 0.5,
                         "copied share of drafts": 0.0 if n == 0 else 0.3, "ms per token": 5.0,
                         "repeated share": share})
    return pd.DataFrame(rows).set_index(["text", "prompt lookup"])


def test_repetition_sentence_follows_the_table():
    text = tl.repetition_sentence(contrast(6.9, 6.0, 2.4, 2.1))
    assert text.startswith("The first held-out prompt's text repeats itself (50%")
    assert "tokens per step fell (6.90 → 6.00" in text and "at most 6 tokens long" in text
    helped = tl.repetition_sentence(contrast(2.0, 4.0, 2.4, 2.4))
    assert "tokens per step rose (2.00 → 4.00" in helped and "at most 6 tokens" not in helped and "stayed" in helped
    swapped = tl.repetition_sentence(contrast(2.4, 2.4, 6.9, 6.9, loop_share=0.02, novel_share=0.5))
    assert swapped.startswith("The showcase prompt's text repeats itself")


def test_speed_sentence():
    from types import SimpleNamespace as R
    assert "slower than plain decoding (0.63x" in tl.speed_sentence(R(ms_per_token=6.2), R(ms_per_token=3.9))
    assert "faster than plain decoding (1.59x" in tl.speed_sentence(R(ms_per_token=3.9), R(ms_per_token=6.2))
    assert "as fast as" in tl.speed_sentence(R(ms_per_token=4.0), R(ms_per_token=4.05))
