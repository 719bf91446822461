"""Which signal stops a sampled draft (top-1 confidence or q(d)) changes how much is drafted, never the output
distribution; and the AUC helpers of labkit.measure.signals.stop_signal rank as they should. (What each signal is, for
one draft: tests/core/test_drafters.py.)"""
import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from labkit import StaticThreshold, speculative_generate
from labkit.measure.signals.stop_signal import auc, outside_prompts, soft_auc

from tiny_models import tiny_model

VOCAB, N_SAMPLES, PROMPT = 6, 3000, torch.tensor([[1, 4, 2]])


def sharp(n_layers, seed):
    model = tiny_model("llama", vocab_size=VOCAB, hidden_size=16, n_layers=n_layers, seed=seed)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(6.0)
    return model


def exact(model):
    """P(t1, t2 | PROMPT) at temperature 1, by enumeration."""
    with torch.no_grad():
        p1 = torch.softmax(model(PROMPT).logits[0, -1], -1)
        return {(a, b): float(p1[a] * torch.softmax(model(torch.cat([PROMPT, torch.tensor([[a]])], 1)).logits[0, -1],
                                                    -1)[b]) for a in range(VOCAB) for b in range(VOCAB)}


def policy(signal):
    p = StaticThreshold(0.5, 2)
    p.sampling_signal = signal
    return p


@pytest.mark.parametrize("signal", ["confidence", "q"])
def test_either_signal_is_lossless(signal):
    target, draft = sharp(2, 3), sharp(1, 11)
    dist, g = exact(target), torch.Generator().manual_seed(1234)
    counts = dict.fromkeys(itertools.product(range(VOCAB), repeat=2), 0)
    drafted = 0
    for _ in range(N_SAMPLES):
        out = speculative_generate(target, PROMPT, draft_model=draft, policy=policy(signal), max_new_tokens=3,
                                   do_sample=True, generator=g)
        counts[tuple(out.new_tokens[:2])] += 1
        drafted += out.trace.n_drafted
    obs, exp = zip(*[(counts[c], p * N_SAMPLES) for c, p in dist.items() if p * N_SAMPLES >= 5])
    exp = [e * sum(obs) / sum(exp) for e in exp]
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    assert drafted > 0


def test_auc_helpers():
    assert auc(np.array([0.1, 0.2, 0.8, 0.9]), np.array([0, 0, 1, 1])) == 1.0
    assert auc(np.array([0.1, 0.2, 0.8, 0.9]), np.array([1, 1, 0, 0])) == 0.0
    assert auc(np.array([0.5, 0.5]), np.array([0, 1])) == 0.5                  # ties count half
    # one pair of different tokens: accepted mass at 0.9 above rejected mass at 0.1, and the reverse
    assert soft_auc(np.array([0.1, 0.9]), np.array([0.2, 0.8])) == pytest.approx(0.8 * 0.8 / (0.8 * 0.8 + 0.2 * 0.2))
    rng = np.random.default_rng(0)
    assert abs(auc(rng.random(4000), rng.integers(0, 2, 4000)) - 0.5) < 0.03


def test_outside_prompts_are_documented_third_party_functions():
    prompts = outside_prompts()
    assert len(prompts) == 8 and all(p.text.rstrip().endswith(('"""', "'''")) for p in prompts)
    assert all(p.source.split(":")[0].split(".")[0] in ("tqdm", "optuna") for p in prompts)
