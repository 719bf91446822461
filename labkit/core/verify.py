"""Checking a draft with one forward pass of the target (Leviathan et al. 2023; Chen et al. 2023).

The target reads [pending, d_1..d_γ] in one forward and so has p at every drafted position, plus one
more. Greedy: accept the longest prefix of the draft that equals the target's argmax. Sampling:
accept d_i with probability min(1, p(d_i) / q(d_i)); at the first rejection draw the replacement from
normalise(max(0, p - q)). Either way the step emits the accepted tokens and one token of the target's
own (the *replacement*, or a *bonus* token after a fully accepted draft), so every emitted token is
what plain decoding would give: the same token (greedy) or an exact sample of p (sampling).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .cache import crop_to
from .forward import model_output
from .sampling import residual_distribution, sample, uniform
from .state import DecodingState
from .tree import keep_path, verify_tree_greedy, verify_tree_sampling

__all__ = ["Verdict", "target_forward", "full_forward", "forward_with_hidden_states", "verify", "verify_greedy",
           "verify_sampling", "accept"]


@dataclass
class Verdict:
    n_accepted: int                 # n: the first n drafted tokens are kept
    next_token: int                 # the target's replacement for d_{n+1}, or its bonus token
    p: torch.Tensor | None          # (γ+1, V) target probabilities while sampling (greedy: None, see probs())
    target_confidence: float = float("nan")   # p(next_token) at its position: how sure the target was
    hidden_states: tuple | None = None        # the target's hidden states at [pending, d_1..d_γ], when asked for
    start: int = 0                            # the step began at this position (the pending token sits at start - 1)
    path: list[int] | None = None             # a tree draft: the accepted nodes, root to leaf (None: a chain's
                                              # first n_accepted tokens)
    logits: torch.Tensor | None = None        # (γ+1, V) the target's logits (greedy: p from them, on request)

    def probs(self) -> torch.Tensor:
        """p at every verified row, (γ+1, V): the sampling distribution, or (greedy) the softmax of the logits,
        computed now: greedy decoding needs only argmaxes, so it never pays for a full softmax nobody reads."""
        return self.p if self.p is not None else torch.softmax(self.logits.float(), dim=-1)

    def p_of(self, rows: list[int], tokens: list[int]) -> list[float]:
        """p(token) at each row (the trace's p of each drafted token): read from p while sampling; greedy, from
        the logits of those rows alone (exp(logit - logsumexp), no (γ+1) × V softmax)."""
        if not tokens:
            return []
        if self.p is not None:
            return self.p[rows, tokens].tolist()
        picked = self.logits[rows].float()                                    # (k, V)
        return torch.exp(picked[range(len(rows)), tokens] - torch.logsumexp(picked, dim=-1)).tolist()


def verify_greedy(logits: torch.Tensor, drafted: list[int]) -> tuple[int, int]:
    """Accept the longest prefix of the draft that matches the target's argmax. logits: (γ+1, V)."""
    target = logits.argmax(dim=-1).tolist()                                   # (γ+1,)
    n = 0
    while n < len(drafted) and drafted[n] == target[n]:
        n += 1
    return n, target[n]


def verify_sampling(p: torch.Tensor, q_dists: list[torch.Tensor], drafted: list[int], generator) -> tuple[int, int]:
    """Speculative sampling: accept d_i with prob min(1, p/q); else draw from normalise(max(0, p - q))."""
    for i, d in enumerate(drafted):
        p_d, q_d = float(p[i, d]), float(q_dists[i][d])
        if uniform(generator) * q_d < p_d:           # r < p/q, safe when q_d > 0
            continue
        return i, sample(residual_distribution(p[i], q_dists[i]), generator)
    return len(drafted), sample(p[len(drafted)], generator)


def verify(state: DecodingState, logits: torch.Tensor, draft, *, hidden_states: tuple | None = None) -> Verdict:
    """The verdict on ``draft`` given the target's logits (γ+1, V) at [pending, d_1..d_γ] (a tree: at [pending,
    its nodes]; and, when the draft asked for them, its hidden states, which the verdict carries to the drafter).
    Greedy, no softmax over the rows is computed here: the verdict keeps the logits (:meth:`Verdict.probs`)."""
    tree, path = draft.tree is not None, None
    if state.warp.do_sample:
        p = state.warp.probs(logits)                                          # (γ+1, V)
        if tree:
            path, token = verify_tree_sampling(p, draft.tokens, draft.tree, draft.q_dists, state.generator)
        else:
            n, token = verify_sampling(p, draft.q_dists, draft.tokens, state.generator)
    else:
        p = None
        if tree:
            path, token = verify_tree_greedy(logits, draft.tokens, draft.tree)
        else:
            n, token = verify_greedy(logits, draft.tokens)
    if tree:
        n, row = len(path), (path[-1] + 1 if path else 0)                    # the row the next token came from
    else:
        row = n
    confidence = p[row, token] if p is not None else torch.exp(logits[row, token].float()
                                                                 - torch.logsumexp(logits[row].float(), dim=-1))
    return Verdict(n, token, p, float(confidence), hidden_states, state.position, path, logits)


def target_forward(state: DecodingState, drafted: list[int], *, hidden_states: bool = False):
    """One forward of the full model over the pending token and the draft: logits (γ+1, V), and with
    ``hidden_states`` the tuple of every layer's (γ+1, H) output as well (else None)."""
    crop_to(state.cache, state.position - 1)           # skipped attention appended nothing: realign layers
    out = model_output(state.model, [state.tokens[-1]] + drafted, state.position - 1, state.cache,
                       output_hidden_states=hidden_states)
    return out.logits[0], tuple(h[0] for h in out.hidden_states) if hidden_states else None


def full_forward(state: DecodingState, draft) -> tuple[torch.Tensor, None]:
    """How a draft is verified unless it says otherwise (``Draft.forward``): one full forward, logits only."""
    return target_forward(state, draft.tokens)[0], None


def forward_with_hidden_states(state: DecodingState, draft) -> tuple[torch.Tensor, tuple]:
    """One full forward that also returns every layer's hidden states (for a drafter that learns from them)."""
    return target_forward(state, draft.tokens, hidden_states=True)


def accept(state: DecodingState, draft, verdict: Verdict) -> tuple[list[int], str]:
    """Append the accepted tokens and the target's own; returns (new tokens, 'replacement'|'bonus'|'none').
    A tree keeps the accepted path's cache entries and drops its other nodes' (:func:`~labkit.core.tree.keep_path`)."""
    if verdict.path is not None:
        new = [draft.tokens[i] for i in verdict.path]
        at_leaf = not any(parent == (verdict.path[-1] if verdict.path else -1) for parent in draft.tree)
        keep_path(state.cache, verdict.start - 1, verdict.path)
    else:
        new = draft.tokens[:verdict.n_accepted]
        at_leaf = verdict.n_accepted == len(draft.tokens)
    if new and new[-1] in state.eos:                    # the draft ended on an accepted EOS: nothing more
        kind = "none"
    else:
        new = new + [verdict.next_token]
        kind = "bonus" if at_leaf else "replacement"
    state.tokens.extend(new)
    crop_to(state.cache, len(state.tokens) - 1)         # keep the accepted prefix, the new last token pending
    return new, kind
