"""Early-exit drafting: the first E layers draft, and the verifier reuses what they computed (LayerSkip).

Notation (as everywhere in labkit): p target (all L layers), q draft, α per-token acceptance probability,
γ max draft, d drafted per step, c = draft cost per drafted token / full step, c_v = verify cost per step
/ full step. The pending token t_0 sits at position P - 1; the step drafts d_1..d_γ.

The draft is the target cut after layer E: layers 0..E-1, then the model's own final norm and LM head
(Elbayad et al.'s depth-adaptive decoder, CALM, LayerSkip's self-speculation). In labkit terms it is a
:class:`~labkit.core.drafters.SelfDrafter` whose skip set is every block of layers E..L-1; what makes it
a drafter of its own is the verify (LayerSkip, Elhoushi et al. 2024, Sec. 4.2 "cache reuse"):

- **Why the early layers' KV cache can be kept.** Layers 0..E-1 of the draft *are* layers 0..E-1 of the
  target: same weights, and the same input (the embedding of the same token, at the same position, seeing
  the same earlier keys/values, which are themselves the target's). So the keys/values the draft appended
  to cache layers 0..E-1 while drafting t_0, d_1..d_{γ-1} are exactly what the target's verify forward
  would append there (up to float rounding: one token at a time, like plain decoding), and so are the
  hidden states h_E those layers output. Cache layers E..L-1 saw nothing while drafting (those layers
  were skipped), so they still end at position P - 2, as the verify forward needs.
- **Verify = finish the forward.** In one forward, layers 0..E-1 run on d_γ only (the one token the draft
  never fed back); layers E..L-1 run on h_E of [t_0, d_1..d_γ] in one batch; the final norm and LM head give
  p at all γ + 1 positions. A plain verify would run layers 0..E-1 on all γ + 1 tokens again. Cost of a step:
  γ·(E/L + head) drafting + (1·E/L + (γ+1)·(L-E)/L + head) verifying instead of (γ+1)·1.
- **What is then valid.** After the verdict the decoder keeps the accepted prefix in every cache layer
  (:func:`~labkit.core.verify.accept` crops all layers to the same length); the rejected tokens' entries are
  cut in the early and the late layers alike, so the cache invariant of :mod:`labkit.core.state` holds.

How, with transformers' layer API and no forked modeling code: the late layers are swapped for identities
while drafting (:func:`~labkit.core.skip.skipping`); a forward hook on layer E-1 keeps h_E; the verify
forward swaps layer 0 for a stand-in that runs the original layers 0..E-1 on d_γ alone and returns the kept
h_E with it (layers 1..E-1 become identities), so the model's own late layers, final norm, LM head (and
Gemma2's logit soft-capping) run unchanged. Its
attention masks are built by transformers' mask functions sized against a *late* cache layer
(``layer_idx=``): the early layers already hold the draft, so the default (sizing against layer 0)
would be γ + 1 positions off.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch
from torch import nn
from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

from .architectures import check_mask_free_drafting, check_supported, n_layers
from .checks import check_int
from .drafters import Draft, Drafter, draft_tokens
from .forward import cache_argument
from .policies import DraftPolicy
from .skip import SkipSet, decoder_layers, skipping
from .state import DecodingState

__all__ = ["EarlyExitDrafter", "exit_skip_set", "late_forward"]


def exit_skip_set(n_layers_total: int, exit_layer: int) -> SkipSet:
    """The skip set of an exit after layer ``exit_layer``: every block of layers exit_layer..L-1."""
    late = range(exit_layer, n_layers_total)
    return SkipSet(attention=late, mlp=late)


def check_exit_layer(model, exit_layer) -> int:
    return check_int("exit_layer", exit_layer, 1, n_layers(model) - 1)     # at least one layer drafts, one verifies


@contextlib.contextmanager
def _keeping_output(layer: nn.Module, kept: list) -> Iterator[None]:
    """While inside, every output (1, T, H) of ``layer`` is appended to ``kept``."""
    handle = layer.register_forward_hook(
        lambda module, args, out: kept.append(out[0] if isinstance(out, tuple) else out))
    try:
        yield
    finally:
        handle.remove()


class _FinishEarly(nn.Module):
    """Stands in for decoder layer 0 in the verify forward. Of the T tokens it is given, the first T - 1 went
    through layers 0..E-1 while drafting (their outputs are ``kept``); it runs those layers on the last token
    only (one query token attends to everything cached: no mask), appending its keys/values to their cache
    layers, and returns layer E's input for all T."""

    def __init__(self, early_layers: list[nn.Module], kept: torch.Tensor):
        super().__init__()
        self.early_layers, self.kept = early_layers, kept             # (a plain list: not registered as children)

    def forward(self, hidden_states: torch.Tensor, *args, attention_mask=None, position_ids=None,
                position_embeddings=None, **kwargs) -> torch.Tensor:
        h = hidden_states[:, -1:]                                         # (1, 1, H): the last token's embedding
        cos, sin = position_embeddings
        for layer in self.early_layers:
            h = layer(h, attention_mask=None, position_ids=position_ids[:, -1:],
                      position_embeddings=(cos[:, -1:], sin[:, -1:]), **kwargs)
        return torch.cat([self.kept, h], dim=1)                           # (1, T, H)


class _Identity(nn.Module):
    def forward(self, hidden_states: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return hidden_states


@contextlib.contextmanager
def _finishing(model, exit_layer: int, kept: torch.Tensor) -> Iterator[None]:
    """Run ``model`` with layers 0..exit_layer-1 replaced by :class:`_FinishEarly` (then identities)."""
    layers = decoder_layers(model)
    saved = [layers._modules[str(i)] for i in range(exit_layer)]
    try:
        layers._modules["0"] = _FinishEarly(saved, kept)
        for i in range(1, exit_layer):
            layers._modules[str(i)] = _Identity()
        yield
    finally:
        for i, original in enumerate(saved):
            layers._modules[str(i)] = original


def _late_masks(model, exit_layer: int, cache, hidden: torch.Tensor, positions: torch.Tensor):
    """The attention masks of layers exit_layer..L-1 for a batch ``hidden`` (1, T, H) at ``positions`` (1, T),
    sized against a late cache layer of each attention type (the early layers already hold these tokens)."""
    config, total = model.config, n_layers(model)
    layer_types = getattr(config, "layer_types", None)
    kinds = {"full_attention": create_causal_mask, "sliding_attention": create_sliding_window_causal_mask}
    if not layer_types:
        make = create_sliding_window_causal_mask if getattr(config, "sliding_window", None) else create_causal_mask
        return make(config, hidden, None, cache, positions, layer_idx=exit_layer, allow_is_causal_skip=False)
    masks = {}
    for kind in set(layer_types):
        if kind not in kinds:
            raise NotImplementedError(f"early-exit verify cannot build masks for {kind!r} layers")
        late = [i for i in range(exit_layer, total) if layer_types[i] == kind]
        masks[kind] = kinds[kind](config, hidden, None, cache, positions, layer_idx=late[0],
                                  allow_is_causal_skip=False) if late else None
    return masks


def late_forward(model, exit_layer: int, tokens: list[int], start: int, cache, kept: torch.Tensor) -> torch.Tensor:
    """Logits (T, V) of the full model at ``tokens`` (positions start..), given layer ``exit_layer``'s input
    ``kept`` (1, T-1, H) for all but the last token: one forward in which layers 0..exit_layer-1 run on the last
    token only and layers exit_layer..L-1, the final norm and the LM head on all T."""
    ids = torch.tensor([tokens], device=kept.device)                          # (1, T)
    positions = torch.arange(start, start + len(tokens), device=kept.device)[None]   # (1, T)
    hidden = kept.new_empty((1, len(tokens), kept.shape[-1]))                 # shape/dtype only, for the masks
    masks = _late_masks(model, exit_layer, cache, hidden, positions)
    with _finishing(model, exit_layer, kept):
        out = model(input_ids=ids, position_ids=positions, **cache_argument(model, cache), use_cache=True,
                    attention_mask=masks)
    return out.logits[0]


class EarlyExitDrafter(Drafter):
    """Draft with layers 0..``exit_layer``-1 + the final norm + the shared LM head; verify by finishing the
    forward from layer ``exit_layer`` on (the early layers' cache and hidden states are reused: the draft carries
    them, in its ``forward``)."""

    def __init__(self, model, exit_layer: int):
        check_supported(model)
        self.exit_layer = check_exit_layer(model, exit_layer)
        self.skip = exit_skip_set(n_layers(model), exit_layer)
        check_mask_free_drafting(model, True)
        self.model = model
        self._exit_layer_module = decoder_layers(model)[exit_layer - 1]

    def draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        kept: list[torch.Tensor] = []                           # h_E of t_0, d_1..d_{γ-1}: one (1, 1, H) per forward
        with skipping(self.model, self.skip), _keeping_output(self._exit_layer_module, kept):
            draft, _ = draft_tokens(self.model, state.cache, [state.tokens[-1]], state.position - 1, state, budget,
                                    policy)
        draft.drafter, draft.skip = self, self.skip
        if len(draft):
            draft.forward = functools.partial(self.finish_forward, kept)
        return draft

    def finish_forward(self, kept: list[torch.Tensor], state: DecodingState, draft: Draft):
        """p at [t_0, d_1..d_γ] from the early layers' kept work (``kept``, one (1, 1, H) per drafted token) + layers
        E..L-1: (logits (γ+1, V), None)."""
        if len(kept) != len(draft):
            raise RuntimeError(f"early-exit draft kept {len(kept)} hidden states for {len(draft)} tokens")
        tokens = [state.tokens[-1]] + draft.tokens
        return late_forward(self.model, self.exit_layer, tokens, state.position - 1, state.cache,
                            torch.cat(kept, dim=1)), None
