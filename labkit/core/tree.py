"""Draft trees: many continuations of one prefix verified in one forward of the target (SpecInfer, Sequoia; the
tree attention of Medusa and EAGLE).

A tree draft is a :class:`~labkit.core.drafters.Draft` whose nodes name their parents: node i holds the token
d_i, its parent ``parents[i]`` < i (-1: the pending token t_0, the root), q(d_i) under the draft's distribution
at its parent and, while sampling, that whole distribution. Nodes are listed parents first. A chain is the tree
whose node i has parent i - 1.

One forward reads [t_0, d_0..d_{N-1}] (N + 1 tokens) behind the cached prefix (P - 1 positions): node i sits at
position P - 1 + depth(i), and its row of the attention mask sees the prefix, its ancestors and itself only
(:func:`ancestry`), so its logits are those a chain ending in node i would get. Then:

- greedy (:func:`verify_tree_greedy`): from the root, follow the child whose token is the target's argmax there
  while one exists; the path is accepted and the target's argmax after its last node is emitted (the bonus token
  at a leaf, the replacement otherwise): the same tokens as plain decoding;
- sampling (:func:`verify_tree_sampling`, SpecInfer's multi-candidate rule, Miao et al. 2024): the children of
  a node were drawn i.i.d. from q there; try them in order, accepting child x with probability
  min(1, p(x)/q(x)), and after each rejection replace p by normalise(max(0, p - q)); if every child is
  rejected, draw from the last p. Each try is speculative sampling of a fresh draw from q against the current p,
  so the emitted token is an exact sample of p whatever the number of children.

The forward appended all N + 1 positions to every cache layer; :func:`keep_path` keeps the prefix, t_0 and the
accepted path (in order) and drops the other nodes, so the cache invariant of :mod:`labkit.core.state` holds.
"""
from __future__ import annotations

import torch

from .cache import crop_to
from .devices import model_device
from .forward import cache_argument, check_custom_mask
from .sampling import residual_distribution, sample, uniform

__all__ = ["depths", "ancestry", "children", "tree_mask", "tree_forward", "tree_verify_forward",
           "verify_tree_greedy", "verify_tree_sampling", "keep_path", "check_tree_fits"]


def depths(parents: list[int]) -> list[int]:
    """Depth of every node (a child of the root: 1), checking that each parent comes earlier."""
    out: list[int] = []
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError(f"node {i}'s parent must be -1 (the root) or an earlier node, got {parent}")
        out.append(1 if parent < 0 else out[parent] + 1)
    return out


def ancestry(parents: list[int]) -> torch.Tensor:
    """(N + 1, N + 1) bool: row r (0 the root t_0, i + 1 node i) sees column c when c is r or one of its
    ancestors: the tree's attention mask over its own tokens."""
    depths(parents)
    seen = torch.zeros(len(parents) + 1, len(parents) + 1, dtype=torch.bool)
    seen[0, 0] = True
    for i, parent in enumerate(parents):
        seen[i + 1] = seen[parent + 1]
        seen[i + 1, i + 1] = True
    return seen


def children(parents: list[int]) -> list[list[int]]:
    """[r] = the nodes whose parent is row r's token (row 0: the root, row i + 1: node i), in order."""
    out: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for i, parent in enumerate(parents):
        out[parent + 1].append(i)
    return out


def tree_mask(visible: torch.Tensor, n_prefix: int, dtype: torch.dtype) -> torch.Tensor:
    """(1, 1, R, n_prefix + C) additive attention mask: every row sees the cached prefix, and the tree's C columns
    as ``visible`` (R, C) says (0 where seen, the dtype's lowest value where not)."""
    seen = torch.cat([torch.ones(visible.shape[0], n_prefix, dtype=torch.bool), visible], dim=1)
    return torch.zeros(seen.shape, dtype=dtype).masked_fill_(~seen, torch.finfo(dtype).min)[None, None]


def check_tree_fits(model, length: int) -> None:
    """A tree mask is a custom 4D mask: it needs eager or sdpa attention, and a sliding-window cache that has not
    dropped positions yet (a Gemma2 or Mistral window larger than the sequence)."""
    check_custom_mask(model, length, "a tree draft")


def tree_forward(model, cache, tokens: list[int], positions: list[int], visible: torch.Tensor,
                 n_prefix: int) -> torch.Tensor:
    """Logits (R, V) of ``tokens`` (R) at ``positions`` behind a cache that holds ``n_prefix`` prefix positions and
    then the tree columns fed earlier: row r sees the prefix and the tree columns ``visible`` (R, C) marks (C: the
    columns fed before, then these R)."""
    check_tree_fits(model, n_prefix + visible.shape[1])
    device = model_device(model)
    mask = tree_mask(visible.cpu(), n_prefix, model.dtype).to(device)
    layer_types = getattr(model.config, "layer_types", None)
    out = model(input_ids=torch.tensor([tokens], device=device), position_ids=torch.tensor([positions], device=device),
                **cache_argument(model, cache), use_cache=True,
                attention_mask=dict.fromkeys(set(layer_types), mask) if layer_types else mask)
    return out.logits[0]


def tree_verify_forward(state, draft) -> tuple[torch.Tensor, None]:
    """The target's logits (N + 1, V) at [t_0, d_0..d_{N-1}] of a tree draft, in one forward (``Draft.forward``
    of a tree)."""
    start = state.position - 1                                       # t_0's position; the prefix's length
    crop_to(state.cache, start)                                      # skipped attention appended nothing: realign
    positions = [start] + [start + d for d in depths(draft.parents)]
    return tree_forward(state.model, state.cache, [state.tokens[-1]] + draft.tokens, positions,
                        ancestry(draft.parents), start), None


def verify_tree_greedy(logits: torch.Tensor, tokens: list[int], parents: list[int]) -> tuple[list[int], int]:
    """(the accepted path as node indices, the target's own next token): from the root, follow the child that
    equals the target's argmax while one does. logits: (N + 1, V), row 0 the root."""
    target = logits.argmax(dim=-1).tolist()                          # (N + 1,)
    kids, path, row = children(parents), [], 0
    while True:
        match = next((c for c in kids[row] if tokens[c] == target[row]), None)
        if match is None:
            return path, target[row]
        path.append(match)
        row = match + 1


def verify_tree_sampling(p: torch.Tensor, tokens: list[int], parents: list[int], q_dists: list[torch.Tensor],
                         generator) -> tuple[list[int], int]:
    """SpecInfer's multi-candidate rule: (the accepted path, the next token). p: (N + 1, V), row 0 the root;
    ``q_dists[i]``: the distribution node i was drawn from (its parent's q)."""
    kids, path, row = children(parents), [], 0
    while True:
        target, accepted = p[row], None
        for child in kids[row]:
            q, x = q_dists[child], tokens[child]
            if uniform(generator) * float(q[x]) < float(target[x]):     # r < p/q
                accepted = child
                break
            target = residual_distribution(target, q)                # the next try meets what is left of p
        if accepted is None:
            return path, sample(target, generator)
        path.append(accepted)
        row = accepted + 1


def keep_path(cache, n_prefix: int, path: list[int]) -> None:
    """After a forward appended t_0 and the tree's nodes behind ``n_prefix`` positions, keep the prefix, t_0 and the
    nodes of ``path`` in order (every cache layer), dropping the other nodes."""
    keep = torch.tensor([n_prefix] + [n_prefix + 1 + i for i in path])
    for layer in cache.layers:
        if layer.get_seq_length() <= n_prefix:
            continue
        keep = keep.to(layer.keys.device)
        layer.keys = torch.cat([layer.keys[..., :n_prefix, :], layer.keys.index_select(-2, keep)], dim=-2)
        layer.values = torch.cat([layer.values[..., :n_prefix, :], layer.values.index_select(-2, keep)], dim=-2)
        if hasattr(layer, "cumulative_length"):                      # a sliding-window layer counts its length
            layer.cumulative_length = layer.keys.shape[-2]
