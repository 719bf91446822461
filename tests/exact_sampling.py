"""Exactness checks for sampling: a tiny enumerable model, its exact distribution over a few tokens, and the
chi-square / total-variation tests a sampler must pass (used by the chain and the tree tests)."""
import itertools

import torch
from scipy import stats

from labkit.core.sampling import Warp

from tiny_models import tiny_model

VOCAB = 6
N_SAMPLES = 3000
PROMPT = torch.tensor([[1, 4, 2]])


def sharp_tiny_model(**kw):
    model = tiny_model("llama", vocab_size=VOCAB, hidden_size=16, **kw)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(6.0)   # peaked distributions, far apart
    return model


def exact_two_token_distribution(model, warp: Warp, prompt=PROMPT, n_tokens: int = 2) -> dict:
    """P(t1, t2 | prompt) (or of ``n_tokens`` tokens) by enumeration over the whole (tiny) vocabulary."""
    with torch.no_grad():
        dist = {(): 1.0}
        for _ in range(n_tokens):
            longer = {}
            for prefix, prob in dist.items():
                ids = torch.cat([prompt, torch.tensor([list(prefix)], dtype=torch.long)], dim=1)
                p = warp.probs(model(ids).logits[0, -1])
                longer.update({prefix + (t,): prob * float(p[t]) for t in range(VOCAB)})
            dist = longer
    return dist


def empirical(sample_fn, n_tokens: int = 2) -> dict:
    g = torch.Generator().manual_seed(1234)
    counts = dict.fromkeys(itertools.product(range(VOCAB), repeat=n_tokens), 0)
    for _ in range(N_SAMPLES):
        new = sample_fn(g)
        counts[tuple(new)] += 1
    return counts


def chi_square_p_value(counts: dict, dist: dict) -> float:
    """Pearson chi-square over cells with expected count >= 5 (the rest pooled into one cell)."""
    obs, exp, pooled_obs, pooled_exp = [], [], 0, 0.0
    for cell, prob in dist.items():
        e = prob * N_SAMPLES
        if e >= 5:
            obs.append(counts[cell])
            exp.append(e)
        else:
            pooled_obs += counts[cell]
            pooled_exp += e
    if pooled_exp > 0:
        obs.append(pooled_obs)
        exp.append(pooled_exp)
    exp = [e * sum(obs) / sum(exp) for e in exp]   # float32 probabilities sum to 1 only approximately
    return float(stats.chisquare(obs, exp).pvalue)


def total_variation(counts: dict, dist: dict) -> float:
    return 0.5 * sum(abs(counts[c] / N_SAMPLES - p) for c, p in dist.items())


def tv_bound(dist: dict) -> float:
    """4x the expected TV of an exact sampler of this size (sum of binomial standard deviations / 2)."""
    return 4 * 0.5 * sum((p * (1 - p) / N_SAMPLES) ** 0.5 for p in dist.values())


WARPS = [Warp(True, 1.0), Warp(True, 0.7, top_k=4, top_p=0.9)]
