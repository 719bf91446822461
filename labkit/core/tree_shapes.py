"""How a tree draft grows: which nodes get children, and how many (Medusa, SWIFT, EAGLE-2).

A shape grows a :class:`GrowingTree` from the draft's distribution q at the pending token t_0. Growing a node
means one draft forward over it (all nodes of a level in one forward, with the tree's attention mask,
:func:`labkit.core.tree.tree_forward`) to get q there; its children are then the top-k tokens of that q (greedy)
or k i.i.d. draws from it (sampling: what SpecInfer's rule needs to stay exact, so a shape never drops a child
because of its token while sampling). Three shapes, after three papers, and the chain as the baseline:

- ``"chain"``: no tree (today's one continuation, stopped by the draft policy);
- ``"static"`` (Medusa, Cai et al. 2024): a fixed set of paths of ranks, e.g. (0,), (1,), (0, 0): the same
  tree every step;
- ``"confidence"`` (SWIFT's confidence-aware candidates, Xia et al. 2025): the top-1 chain, stopped by the
  policy, with up to ``siblings`` more candidates beside every token the draft was unsure of (top-1 q below
  ``below``); the siblings are leaves, so they cost no draft forward, only verify width;
- ``"dynamic"`` (EAGLE-2, Li et al. 2024): each level expands the ``top_k`` nodes of highest cumulative q
  (the product of q along the path, the draft's estimate that the path is accepted), ``top_k`` children each;
  greedy drafts then keep the ``nodes`` best nodes by that score (an ancestor never scores below its child).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .checks import check_int, check_probability
from .draft import Draft

__all__ = ["GrowingTree", "TreeShape", "StaticTree", "ConfidenceTree", "DynamicTree", "draft_tree", "TREE_NAMES",
           "MEDUSA_CHOICES"]

TREE_NAMES = ("chain", "static", "confidence", "dynamic")
#: A small Medusa-style tree (ranks of the draft's candidates along each path): 10 nodes, depth 4.
MEDUSA_CHOICES = ((0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 0, 1), (0, 0, 0, 0), (0, 0, 0, 1))


class GrowingTree:
    """A tree draft under construction over the pending token: its nodes, q at every grown node, and the draft
    forward (``forward(tokens, positions, visible) -> logits (R, V)``, see :func:`~labkit.core.tree.tree_forward`)
    that grows nodes. Column 0 of the tree is t_0, then the grown nodes in the order they were fed."""

    def __init__(self, state, forward):
        self.state, self.forward = state, forward
        self.start = state.position - 1                              # t_0's position
        self.draft = Draft(tree=[], forward=None)
        self.depth: list[int] = []
        self.score: list[float] = []                                 # product of q along the path to the node
        self.fed: list[int] = []                                     # grown nodes, in column order after t_0
        logits = forward([state.tokens[-1]], [self.start], torch.ones(1, 1, dtype=torch.bool))
        self.q = {-1: state.warp.probs(logits[-1])}                  # node -> q at it, (V,) (-1: the root)

    def __len__(self) -> int:
        return len(self.draft.tokens)

    def ends(self, node: int) -> bool:
        """True for a node drafted as EOS: nothing follows it."""
        return node >= 0 and self.draft.tokens[node] in self.state.eos

    def add_children(self, node: int, ranks) -> list[int]:
        """Children of a grown node: its q's candidates at ``ranks`` (greedy: the r-th most likely token; sampling:
        the r-th of max(ranks) + 1 i.i.d. draws). Returns the new nodes."""
        q, ranks = self.q[node], list(ranks)
        if self.state.warp.do_sample:
            generator = self.state.generator
            on = q if generator is None else q.to(generator.device)          # drawn on the generator's device
            picks = torch.multinomial(on, max(ranks) + 1, replacement=True, generator=generator).tolist()
        else:
            picks = torch.topk(q, min(max(ranks) + 1, q.shape[-1])).indices.tolist()
        new = []
        for r in ranks:
            if r >= len(picks):
                continue
            token, draft = picks[r], self.draft
            draft.tokens.append(token)
            draft.tree.append(node)
            draft.q.append(float(q[token]))
            draft.confidence.append(float(q.max()))
            if self.state.warp.do_sample:
                draft.q_dists.append(q)
            self.depth.append(1 if node < 0 else self.depth[node] + 1)
            self.score.append((1.0 if node < 0 else self.score[node]) * float(q[token]))
            new.append(len(draft.tokens) - 1)
        return new

    def grow(self, nodes: list[int]) -> None:
        """One draft forward over ``nodes`` (each sees the prefix, t_0, its grown ancestors and itself)."""
        nodes = [n for n in nodes if not self.ends(n)]
        if not nodes:
            return
        columns = [-1] + self.fed + nodes
        rows = [[c == -1 or c in self._path(n) for c in columns] for n in nodes]
        logits = self.forward([self.draft.tokens[n] for n in nodes], [self.start + self.depth[n] for n in nodes],
                              torch.tensor(rows))                    # (R, V)
        probs = self.state.warp.probs(logits)
        self.fed += nodes
        for n, q in zip(nodes, probs):
            self.q[n] = q

    def _path(self, node: int) -> set[int]:
        out = set()
        while node >= 0:
            out.add(node)
            node = self.draft.tree[node]
        return out

    def keep_best(self, n_nodes: int) -> None:
        """Keep the ``n_nodes`` nodes of highest score (ties: the earlier node, so every kept node's parent is kept)."""
        if len(self) <= n_nodes:
            return
        kept = sorted(sorted(range(len(self)), key=lambda i: (-self.score[i], i))[:n_nodes])
        index = {old: new for new, old in enumerate(kept)}
        d = self.draft
        d.tree = [-1 if d.tree[i] < 0 else index[d.tree[i]] for i in kept]
        for name in ("tokens", "q", "confidence"):
            setattr(d, name, [getattr(d, name)[i] for i in kept])
        self.depth, self.score = [self.depth[i] for i in kept], [self.score[i] for i in kept]


class TreeShape:
    """Interface: ``grow(tree, depth, policy)`` adds nodes to a :class:`GrowingTree` down to ``depth`` at most."""

    name = "tree"

    def grow(self, tree: GrowingTree, depth: int, policy) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class StaticTree(TreeShape):
    """Medusa's fixed tree: ``choices`` are paths of ranks, every prefix of a path also a path."""

    choices: tuple = MEDUSA_CHOICES
    name = "static"

    def __post_init__(self) -> None:
        choices = tuple(tuple(check_int("a choice's rank", r, 0) for r in c) for c in self.choices)
        missing = [c for c in choices if len(c) > 1 and c[:-1] not in choices]
        if not choices or () in choices or missing:
            raise ValueError(f"choices must be non-empty paths of ranks whose prefixes are paths too; "
                             f"missing prefixes of {missing}" if missing else "choices must be non-empty paths")
        object.__setattr__(self, "choices", choices)

    def grow(self, tree: GrowingTree, depth: int, policy) -> None:
        node_of = {(): -1}
        for level in range(1, min(depth, max(map(len, self.choices))) + 1):
            paths = [c for c in self.choices if len(c) == level and node_of.get(c[:-1]) is not None]
            parents = list(dict.fromkeys(c[:-1] for c in paths))
            tree.grow([node_of[p] for p in parents if p])
            for parent in parents:
                node = node_of[parent]
                if tree.ends(node):
                    continue
                ranks = sorted(c[-1] for c in paths if c[:-1] == parent)
                for r, new in zip(ranks, tree.add_children(node, ranks)):
                    node_of[parent + (r,)] = new


@dataclass(frozen=True)
class ConfidenceTree(TreeShape):
    """The top-1 chain (stopped by the draft policy) with up to ``siblings`` more candidates beside every drafted
    token whose distribution's top-1 q was below ``below``."""

    below: float = 0.6
    siblings: int = 2
    name = "confidence"

    def __post_init__(self) -> None:
        check_probability("below", self.below)
        check_int("siblings", self.siblings, 0)

    def grow(self, tree: GrowingTree, depth: int, policy) -> None:
        node = -1
        for level in range(1, depth + 1):
            q = tree.q[node]
            unsure = float(q.max()) < self.below
            main = tree.add_children(node, range(1 + (self.siblings if unsure else 0)))[0]
            by_q = tree.state.warp.do_sample and policy.sampling_signal == "q"      # as a chain's stop signal
            signal = tree.draft.q[main] if by_q else tree.draft.confidence[main]
            if tree.ends(main) or level == depth or not policy.keep_drafting(level, signal):
                return
            tree.grow([main])
            node = main


@dataclass(frozen=True)
class DynamicTree(TreeShape):
    """EAGLE-2's dynamic tree: each level grows the ``top_k`` nodes of highest cumulative q, ``top_k`` children
    each; greedy drafts keep the best ``nodes`` nodes, sampled ones stop before a level would pass ``nodes``."""

    top_k: int = 3
    nodes: int = 16
    name = "dynamic"

    def __post_init__(self) -> None:
        check_int("top_k", self.top_k, 1)
        check_int("nodes", self.nodes, 1)

    def grow(self, tree: GrowingTree, depth: int, policy) -> None:
        sampling, frontier = tree.state.warp.do_sample, [-1]
        for level in range(1, depth + 1):
            if sampling and len(tree) + len(frontier) * self.top_k > self.nodes:
                break
            created = [c for n in frontier for c in tree.add_children(n, range(self.top_k))]
            frontier = sorted((c for c in created if not tree.ends(c)), key=lambda c: -tree.score[c])[:self.top_k]
            if level == depth or not frontier:
                break
            tree.grow(frontier)
        if not sampling:
            tree.keep_best(self.nodes)


def draft_tree(name: str = "dynamic", **options) -> TreeShape | None:
    """A tree shape by name: ``"chain"`` (None: no tree), ``"static"`` (``choices``), ``"confidence"`` (``below``,
    ``siblings``), ``"dynamic"`` (``top_k``, ``nodes``); use as ``speculative_generate(..., tree=...)``."""
    shapes = {"static": StaticTree, "confidence": ConfidenceTree, "dynamic": DynamicTree}
    if name == "chain":
        if options:
            raise ValueError(f"the chain takes no options, got {sorted(options)}")
        return None
    if name not in shapes:
        raise ValueError(f"tree must be one of {', '.join(map(repr, TREE_NAMES))}; got {name!r}")
    return shapes[name](**options)
