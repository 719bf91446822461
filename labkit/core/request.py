"""What one generate call asks for, resolved once: who drafts and when it stops (:func:`resolve_drafter`), how
tokens are chosen (:func:`resolve_sampling`), and which keyword forms the entry points still take.

``speculative_generate(model, ids, draft=..., sampling=...)`` names a draft in one argument:

- a :class:`~labkit.core.draft_config.DraftConfig` (its skip set, draft weights and, unless ``policy`` is given,
  its stop rule; a width configuration needs its predictors: pass ``width_drafter(...)`` instead);
- a :class:`~labkit.core.skip.SkipSet` or a :class:`~labkit.core.strategies.SkipStrategy` (a self-draft);
- a :class:`~labkit.core.drafters.Drafter` (any drafter: lookahead, a cascade, Medusa heads, a model);
- a name core can resolve on its own: ``"lookahead"`` or ``"token_recycling"`` (their defaults), or a skip set's
  text (``"attention=1,4;mlp=3"``, :func:`~labkit.core.skip.parse_skip_set`). The shipped configurations live in
  ``labkit.artifacts`` above core: ``draft=labkit.best_config()``.

The older keywords (``skip``, ``drafter``, ``draft_model``; ``do_sample``, ``temperature``, ``top_k``, ``top_p``)
still work and are converted here; ``lookup``, ``draft_weights``, ``draft_head`` and ``tree`` modify a self-draft,
given by either form. Every either-or check between them lives in :func:`resolve_drafter`.
"""
from __future__ import annotations

from .checks import check_int, take_options
from .draft_config import DraftConfig
from .drafters import Drafter, LookupDrafter, ModelDrafter, SelfDrafter
from .lookahead import lookahead
from .policies import AdaptiveThreshold, DraftPolicy
from .recycling import token_recycling
from .sampling import Warp
from .skip import SkipSet, parse_skip_set
from .strategies import SkipStrategy
from .tree_shapes import TreeShape

__all__ = ["DRAFT_KEYWORDS", "DRAFT_NAMES", "SAMPLING_KEYWORDS", "make_drafter", "resolve_drafter",
           "resolve_sampling"]

#: The keywords that describe a draft one part at a time (the older form; ``draft=`` is the newer one).
DRAFT_KEYWORDS = ("skip", "drafter", "draft_model", "lookup", "draft_weights", "draft_head", "tree")
#: The keywords that describe the sampling one part at a time (the older form; ``sampling=Warp(...)``).
SAMPLING_KEYWORDS = ("do_sample", "temperature", "top_k", "top_p")
#: The drafters core makes from a name alone (with their defaults).
DRAFT_NAMES = {"lookahead": lookahead, "token_recycling": token_recycling}
_WHO = ("skip", "drafter", "draft_model")          # what ``draft`` replaces
_MODIFIERS = ("lookup", "draft_weights", "draft_head", "tree")   # what modifies a self-draft


def _given(parts: dict) -> list[str]:
    """The draft keywords that say something (None, and ``lookup=0``, say nothing), in their canonical order."""
    return [k for k in DRAFT_KEYWORDS if parts.get(k) is not None and not (k == "lookup" and parts[k] == 0)]


def _draft_parts(draft, parts: dict) -> dict:
    """``draft`` as the older keywords it stands for (``skip`` or ``drafter``, and a config's draft weights)."""
    if isinstance(draft, str):
        if draft in DRAFT_NAMES:
            return {"drafter": DRAFT_NAMES[draft]()}
        try:
            return {"skip": parse_skip_set(draft)}
        except ValueError:
            raise ValueError(f"draft: unknown name {draft!r}; core knows {sorted(DRAFT_NAMES)} and skip-set text "
                             f"('attention=1,4;mlp=3'); a shipped configuration: draft=labkit.best_config()") from None
    if isinstance(draft, DraftConfig):
        if draft.width is not None:
            raise ValueError("draft: a width DraftConfig needs its predictors: pass "
                             "draft=width_drafter(model, predictors, config.width, config.skip)")
        if draft.draft_weights is not None and parts.get("draft_weights") is not None:
            raise ValueError("give draft (a DraftConfig, which carries draft_weights) or draft_weights, not both")
        return {"skip": draft.skip, "draft_weights": draft.draft_weights or parts.get("draft_weights")}
    if isinstance(draft, (SkipSet, SkipStrategy)):
        return {"skip": draft}
    if isinstance(draft, Drafter):
        return {"drafter": draft}
    raise TypeError(f"draft must be a DraftConfig, a SkipSet, a skip strategy, a Drafter or a name, "
                    f"got {type(draft).__name__}")


def _check_policy(policy) -> DraftPolicy:
    if policy is None:
        return AdaptiveThreshold()
    if not isinstance(policy, DraftPolicy):
        raise TypeError(f"policy must be a labkit draft policy (FixedK, StaticThreshold, AdaptiveThreshold), "
                        f"got {policy!r}")
    return policy


def resolve_drafter(model, draft=None, policy: DraftPolicy | None = None, **parts) -> tuple[Drafter, DraftPolicy]:
    """The drafter and stop rule a call describes, with every either-or check between ``draft`` and the older
    keywords (:data:`DRAFT_KEYWORDS`) in one place; errors name the arguments. ``policy`` None: the config's stop
    rule when ``draft`` is a :class:`DraftConfig`, else a fresh :class:`AdaptiveThreshold`."""
    take_options("resolve_drafter", parts, DRAFT_KEYWORDS)
    given, who = _given(parts), "drafter"
    if draft is not None:
        clash = [k for k in given if k in _WHO]
        if clash:
            raise ValueError(f"give draft or {clash[0]}, not both")
        if policy is None and isinstance(draft, DraftConfig):
            policy = draft.make_policy()
        parts, who = {**parts, **_draft_parts(draft, parts)}, "draft"
        given = _given(parts)
    drafter = parts.get("drafter")
    if drafter is None:
        return _build(model, parts, given), _check_policy(policy)
    if not isinstance(drafter, Drafter):
        raise TypeError(f"drafter must be a labkit.core.drafters.Drafter, got {type(drafter).__name__}")
    others = [k for k in given if k != "drafter"]
    if others:
        raise ValueError(f"give a {who} or {' / '.join(others)}, not both (a drafter is made whole)")
    return drafter, _check_policy(policy)


def _build(model, parts: dict, given: list[str]) -> Drafter:
    """A self-draft (or a separate draft model's) from its parts, each checked against the others."""
    if "draft_model" in given:
        for k in ("skip", *_MODIFIERS[1:]):
            if k in given:
                raise ValueError(f"give either {k} (self-drafting) or draft_model, not both")
    tree = parts.get("tree")
    if tree is not None and not isinstance(tree, TreeShape):
        raise TypeError(f"tree must be a tree shape from labkit.draft_tree(name), got {tree!r}")
    lookup = check_int("lookup", parts.get("lookup", 0), 0)
    drafter = (ModelDrafter(model, parts["draft_model"]) if "draft_model" in given
               else SelfDrafter(model, parts.get("skip"), parts.get("draft_weights"), parts.get("draft_head"), tree))
    return LookupDrafter(lookup, drafter) if lookup else drafter


def make_drafter(model, **parts) -> Drafter:
    """The drafter the older keywords describe (self-drafting unless a draft model is given; ``skip``: a set or a
    skip strategy; ``draft_weights``: None or "int8"; ``draft_head``: a head fitted for the set ``skip``;
    ``tree``: a tree shape, :func:`labkit.draft_tree`; ``lookup``: prompt lookup first)."""
    return resolve_drafter(model, **parts)[0]


def resolve_sampling(sampling: Warp | None = None, **parts) -> Warp:
    """The :class:`Warp` a call samples with: ``sampling`` itself, or one made from the older keywords
    (:data:`SAMPLING_KEYWORDS`; greedy when none is given). Giving both is a ValueError naming them."""
    take_options("resolve_sampling", parts, SAMPLING_KEYWORDS)
    if sampling is None:
        return Warp(**parts)
    if parts:
        raise ValueError(f"give sampling or {' / '.join(parts)}, not both")
    if not isinstance(sampling, Warp):
        raise TypeError(f"sampling must be a labkit Warp (labkit.core.sampling.Warp), got {type(sampling).__name__}")
    return sampling
