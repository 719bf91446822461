"""What the lab's models are trained to do: the loss of each recipe, and the skipped copy it distils into.

Recipe ``skip_robust`` (the shipped ``default``): every step runs the full model *and* a
randomly skipped copy of itself (the same weights with some attention/MLP blocks removed,
as :mod:`labkit.core.skip` does while drafting). The loss is

    CE(full model, data)  +  distill_weight * KL(full model (no grad) || skipped model)

so the weights learn to make every sub-network agree with the whole network: the draft
path is trained directly (a cousin of LayerSkip's stochastic depth, Elhoushi et al. 2024).
Skipped blocks are drawn per step: a skip ratio r ~ U(min, max), then round(r * 2L)
blocks without replacement, later layers more likely (weight l + 1), never layer 0's
attention. With ``draft_skip`` set, a share ``draft_skip_prob`` of the steps draft with that one
fixed set instead (LayerSkip-style training of a single draft path, e.g. in a second stage that
extends the token budget of a finished run). With ``greedy_tail`` = N, the KL term's windows end
in N tokens of the full model's own greedy continuation instead of corpus text: on-policy
positions, the text a draft actually meets while decoding (DistillSpec, Zhou et al. 2023).
With ``top1_weight`` > 0 the draft is also trained with cross-entropy against the full model's
top-1 token, the only thing greedy verification checks.
Recipe ``plain`` is the same loop with the first term only.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..core.cache import new_cache
from ..core.forward import cache_argument
from ..core.skip import SkipSet, parse_skip_set, skipping
from .config import TrainConfig

__all__ = ["training_loss", "draft_skip_set", "random_skip_set", "greedy_continuation"]


def draft_skip_set(n_layers: int, cfg: TrainConfig, g: torch.Generator) -> SkipSet:
    """This step's draft path: the fixed ``draft_skip`` with probability ``draft_skip_prob``, else random."""
    if cfg.draft_skip and torch.rand((), generator=g).item() < cfg.draft_skip_prob:
        return parse_skip_set(cfg.draft_skip).validate(n_layers)
    return random_skip_set(n_layers, cfg, g)


def random_skip_set(n_layers: int, cfg: TrainConfig, g: torch.Generator) -> SkipSet:
    """Blocks to skip this step: later layers more likely, never layer 0's attention."""
    r = cfg.skip_ratio_min + (cfg.skip_ratio_max - cfg.skip_ratio_min) * torch.rand((), generator=g).item()
    weights = torch.tensor([float(l + 1) for l in range(n_layers)] * 2)  # attention blocks, then MLP blocks
    weights[0] = 0.0
    k = min(int(round(r * 2 * n_layers)), 2 * n_layers - 1)
    chosen = torch.multinomial(weights, k, replacement=False, generator=g).tolist()
    mask = [False] * (2 * n_layers)
    for c in chosen:
        mask[c] = True
    return SkipSet.from_mask(mask)


@torch.no_grad()
def greedy_continuation(model, prefix: torch.Tensor, n_new: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The full model's greedy continuation of every row of ``prefix`` (B, P), with a KV cache.

    Returns (tokens (B, n_new), logits (B, n_new, V)); ``logits[:, i]`` is the full model's
    next-token distribution *after* reading new token i, i.e. its target at that position.
    """
    was_training = model.training
    model.eval()
    cache = new_cache(model)
    batch, length = prefix.shape
    next_token = model(input_ids=prefix, **cache_argument(model, cache),
                       use_cache=True).logits[:, -1].argmax(-1)             # (B,)
    tokens, logits = [], []
    for i in range(n_new):
        tokens.append(next_token)
        position = torch.full((batch, 1), length + i, dtype=torch.long)
        step = model(input_ids=next_token[:, None], position_ids=position, **cache_argument(model, cache),
                     use_cache=True).logits[:, -1]                          # (B, V)
        logits.append(step)
        next_token = step.argmax(-1)
    model.train(was_training)
    return torch.stack(tokens, 1), torch.stack(logits, 1)


def training_loss(model, batch: torch.Tensor, cfg: TrainConfig, g: torch.Generator) -> tuple[torch.Tensor, float]:
    """Loss to minimise and the full model's cross-entropy (for logging)."""
    inputs, targets = batch[:, :-1], batch[:, 1:]                          # (B, T)
    logits = model(input_ids=inputs, use_cache=False).logits               # (B, T, V)
    ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    if cfg.recipe == "plain":
        return ce, ce.item()
    skip = draft_skip_set(model.config.num_hidden_layers, cfg, g)
    kl_inputs, target_logits = inputs, logits.detach()                     # (B, T), (B, T, V)
    if cfg.greedy_tail:
        # On-policy positions (DistillSpec, Zhou et al. 2023): while decoding, the draft predicts
        # on the full model's own greedy text, so train it there too. A causal model's logits on
        # the prefix are the same whatever follows, so only the tail needs new targets.
        n = cfg.greedy_tail
        tail, tail_logits = greedy_continuation(model, inputs[:, :-n], n)
        kl_inputs = torch.cat([inputs[:, :-n], tail], dim=1)
        target_logits = torch.cat([target_logits[:, :-n], tail_logits], dim=1)
    with skipping(model, skip):
        draft_logits = model(input_ids=kl_inputs, use_cache=False).logits  # (B, T, V)
    target_logp = F.log_softmax(target_logits, dim=-1)
    draft_logp = F.log_softmax(draft_logits, dim=-1)
    kl = F.kl_div(draft_logp.flatten(0, 1), target_logp.flatten(0, 1), log_target=True, reduction="batchmean")
    loss = ce + cfg.distill_weight * kl
    if cfg.top1_weight:
        # Greedy verification accepts a draft token iff it is the full model's top-1: train that directly.
        loss = loss + cfg.top1_weight * F.cross_entropy(draft_logits.flatten(0, 1), target_logits.argmax(-1).flatten())
    return loss, ce.item()
