"""Multi-token heads (Medusa, Cai et al. 2024; Stern et al. 2018's blockwise parallel decoding): K small heads on
the target's last hidden state guess the tokens after the next one, and the target verifies the guesses.

Notation: h_t is the target's final-norm output at position t (what its LM head reads: p(x_{t+1}) =
softmax(lm_head(h_t))). Head k (k = 1..K) maps h_t to a guess of x_{t+1+k}:

    q_k = softmax(lm_head(h_t + SiLU(W_k h_t + b_k)))

a residual block per head followed by the model's own LM head (its weights shared, never copied or trained), as in
Medusa-1. A new head has W_k = b_k = 0, so it starts as the LM head itself. The heads are fitted on the model's own
greedy continuations (self-distillation, :mod:`labkit.training.medusa`): head k learns what the target would say
k tokens after its next one.

Where h comes from (the reuse design). Between steps the cache holds every token but the pending one t_0
(:mod:`labkit.core.state`). t_0 was chosen by the target from h at its predecessor, the last position the previous
verify forward accepted; that forward computed every position's hidden states anyway. So the drafter asks for them
(``Draft.forward = forward_with_hidden_states``), and :meth:`HeadsDrafter.commit` keeps the last layer's state at the
row whose logits gave t_0: h_{t-1} for t_0 = x_t. The next draft is then K head evaluations and no forward at all:
d_k = argmax q_k (greedy) or a draw from q_k (sampling) guesses x_{t+k}, the k-th token after t_0, which the
target's own LM head already fixed. When no h is kept (the first step after prefill, or after a step verified
without hidden states), :func:`predecessor_hidden` recomputes it with one single-token forward of t_0's
predecessor (cropping the cache by one position and appending it again); a one-token prompt has no predecessor and
its first step drafts nothing (a plain step, whose forward gives h for the next). The alternative (one forward of
t_0 to get its logits and h, its cache entry cropped before the verify recomputes it) costs a full forward per step,
as much as plain decoding: the heads would save nothing.

Lossless as every draft: q_k never depends on d_1..d_{k-1} (Medusa's heads do not see them), which speculative
sampling allows (any q fixed before d_k is drawn), and the target verifies every token as usual, so greedy output
is token-identical to plain decoding and sampled output exact. ``choices`` (e.g.
:data:`~labkit.core.tree_shapes.MEDUSA_CHOICES`) drafts Medusa's tree instead of the top-1 chain: the path
(r_1, .., r_L) is the r_1-th candidate of head 1, then the r_2-th of head 2, ...; greedy candidates are the top-k
tokens of q_L, sampled ones i.i.d. draws from it for every parent (what SpecInfer's rule needs,
:mod:`labkit.core.tree`).
"""
from __future__ import annotations

import hashlib
import json
import weakref
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from .cache import crop_to
from .checks import check_int
from .devices import clock, model_device
from .draft import Draft
from .draft_head import final_norm
from .drafters import Drafter, stop_signal
from .forward import cache_argument, model_output
from .policies import DraftPolicy
from .sampling import sample
from .state import DecodingState
from .tree import ancestry, check_tree_fits, depths, tree_mask
from .verify import Verdict, forward_with_hidden_states

__all__ = ["MedusaHeads", "HeadsDrafter", "lm_logits", "model_signature", "predecessor_hidden",
           "tree_verify_forward_with_hidden_states"]

WEIGHTS_FILE, INFO_FILE = "medusa_heads.safetensors", "medusa_heads.json"


def lm_logits(model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """The model's LM head on final-norm outputs (..., H) -> (..., V), with Gemma2's soft cap where the model has
    one. The weights are read detached: training the heads never trains the model."""
    lm_head = model.get_output_embeddings()
    bias = lm_head.bias.detach() if getattr(lm_head, "bias", None) is not None else None
    logits = F.linear(hidden.to(lm_head.weight.dtype), lm_head.weight.detach(), bias)
    cap = getattr(model.config, "final_logit_softcapping", None)
    return cap * torch.tanh(logits / cap) if cap else logits


def model_signature(model: nn.Module) -> str:
    """SHA-256 (16 hex) of what the heads depend on: the model's class and sizes, its LM head and final norm
    weights (as float32, so a model loaded in another dtype signs the same). Core cannot read the artifacts'
    file fingerprint; this one needs only the model."""
    h = hashlib.sha256()
    config = model.config
    h.update(f"{type(model).__name__}:{config.hidden_size}:{config.vocab_size}:{config.num_hidden_layers}".encode())
    for tensor in (model.get_output_embeddings().weight, getattr(final_norm(model), "weight", None)):
        if tensor is not None:
            h.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


class MedusaHeads(nn.Module):
    """K residual blocks h ↦ h + SiLU(W_k h + b_k) on the target's final-norm output; :meth:`logits` puts the
    model's own LM head behind them. ``signature``: the :func:`model_signature` of the model they were fitted for
    (None: not fitted yet, any model of this hidden size)."""

    def __init__(self, hidden_size: int, n_heads: int, signature: str | None = None, info: dict | None = None):
        super().__init__()
        check_int("hidden_size", hidden_size, 1)
        check_int("n_heads", n_heads, 1)
        self.blocks = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(n_heads))
        for block in self.blocks:                          # Medusa's start: every head is the LM head itself
            nn.init.zeros_(block.weight)
            nn.init.zeros_(block.bias)
        self.signature, self.info = signature, dict(info or {})

    @property
    def n_heads(self) -> int:
        return len(self.blocks)

    @property
    def hidden_size(self) -> int:
        return self.blocks[0].in_features

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., K, H): every head's corrected state."""
        hidden = hidden.to(self.blocks[0].weight.dtype)
        return torch.stack([hidden + F.silu(block(hidden)) for block in self.blocks], dim=-2)

    def logits(self, model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., K, V): head k's logits for the token k + 1 after the next one."""
        return lm_logits(model, self(hidden))

    def check(self, model: nn.Module) -> None:
        """ValueError naming ``heads`` unless they fit ``model``: its hidden size and, once fitted, its weights."""
        if self.hidden_size != model.config.hidden_size:
            raise ValueError(f"heads have hidden size {self.hidden_size}, the model {model.config.hidden_size}")
        if self.signature is not None and self.signature != model_signature(model):
            raise ValueError(f"heads were fitted for another model (signature {self.signature}, this model's "
                             f"{model_signature(model)}): fit them for it with `python -m labkit train-heads "
                             f"--model <name>`")

    def save(self, folder: str | Path) -> Path:
        """Write ``medusa_heads.safetensors`` (the blocks) and ``medusa_heads.json`` (K, H, signature, info)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}, folder / WEIGHTS_FILE)
        record = {"n_heads": self.n_heads, "hidden_size": self.hidden_size, "signature": self.signature,
                  "info": self.info}
        (folder / INFO_FILE).write_text(json.dumps(record, indent=1) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path, model: nn.Module | None = None) -> MedusaHeads:
        """Heads saved by :meth:`save`, checked against ``model`` when given (ValueError if they belong to another);
        FileNotFoundError naming the folder when it holds none."""
        folder = Path(folder)
        if not (folder / INFO_FILE).exists() or not (folder / WEIGHTS_FILE).exists():
            raise FileNotFoundError(f"no Medusa heads in {folder} (expected {INFO_FILE} and {WEIGHTS_FILE}); fit "
                                    f"them with `python -m labkit train-heads --model <name>`")
        record = json.loads((folder / INFO_FILE).read_text())
        heads = cls(record["hidden_size"], record["n_heads"], record.get("signature"), record.get("info"))
        heads.load_state_dict(load_file(folder / WEIGHTS_FILE))
        heads = heads.eval().requires_grad_(False)
        if model is not None:
            heads.check(model)
        return heads


def predecessor_hidden(state: DecodingState) -> torch.Tensor | None:
    """h (H,) at the pending token's predecessor, by one single-token forward of it (its cache entry is cropped
    and appended again, so the cache invariant holds); None for a one-token sequence (no predecessor)."""
    if state.position < 2:
        return None
    crop_to(state.cache, state.position - 2)
    out = model_output(state.model, [state.tokens[-2]], state.position - 2, state.cache, logits_to_keep=1,
                       output_hidden_states=True)
    return out.hidden_states[-1][0, -1]


def tree_verify_forward_with_hidden_states(state: DecodingState, draft: Draft) -> tuple[torch.Tensor, tuple]:
    """A tree draft's verify forward (:func:`labkit.core.tree.tree_verify_forward`) that also returns every layer's
    hidden states at [t_0, its nodes] ((N + 1, H) each), for a drafter that reads them."""
    start = state.position - 1
    crop_to(state.cache, start)
    visible = ancestry(draft.parents)
    check_tree_fits(state.model, start + visible.shape[1])
    device = model_device(state.model)
    mask = tree_mask(visible, start, state.model.dtype).to(device)
    layer_types = getattr(state.model.config, "layer_types", None)
    positions = [start] + [start + d for d in depths(draft.parents)]
    out = state.model(input_ids=torch.tensor([[state.tokens[-1]] + draft.tokens], device=device),
                      position_ids=torch.tensor([positions], device=device),
                      **cache_argument(state.model, state.cache),
                      use_cache=True, output_hidden_states=True,
                      attention_mask=dict.fromkeys(set(layer_types), mask) if layer_types else mask)
    return out.logits[0], tuple(h[0] for h in out.hidden_states)


class HeadsDrafter(Drafter):
    """Drafts with :class:`MedusaHeads` on the target's last hidden state: at most K tokens per step, no draft
    forward (the module docstring explains where h comes from). ``choices``: None for the top-1 chain (stopped by
    the draft policy, at EOS or at the budget), or Medusa's tree as paths of ranks (the policy is not consulted)."""

    def __init__(self, model, heads: MedusaHeads, choices: tuple | None = None):
        if not isinstance(heads, MedusaHeads):
            raise TypeError(f"heads must be labkit MedusaHeads, got {type(heads).__name__}")
        heads.check(model)
        heads.to(model_device(model))                # where the target's hidden states are (heads keep their dtype)
        if choices is not None:
            choices = tuple(tuple(check_int("a choice's rank", r, 0) for r in c) for c in choices)
            if not choices or any(not c or (len(c) > 1 and c[:-1] not in choices) for c in choices):
                raise ValueError("choices must be non-empty paths of ranks whose prefixes are paths too")
            if max(map(len, choices)) > heads.n_heads:
                raise ValueError(f"choices reach depth {max(map(len, choices))}; the heads guess {heads.n_heads}")
        self.model, self.heads, self.choices = model, heads, choices
        self.hidden, self.owner = None, None      # h for the state ``owner()`` (a weak reference) at its pending token

    def prepare(self, state: DecodingState, prompt_ids: torch.Tensor) -> None:
        self.hidden, self.owner = None, weakref.ref(state)     # the first draft recomputes h (one single-token forward)

    def draft(self, state: DecodingState, budget: int, policy: DraftPolicy) -> Draft:
        t0 = clock()
        if self.owner is None or self.owner() is not state or self.hidden is None:
            self.hidden, self.owner = predecessor_hidden(state), weakref.ref(state)
        t1 = clock()
        draft = Draft(drafter=self, forward=forward_with_hidden_states)
        if self.hidden is None or budget < 1:
            return draft
        q = state.warp.probs(self.heads.logits(self.model, self.hidden))          # (K, V): q_k of each head
        if self.choices is None:
            self._chain(draft, q[:budget], state, policy)
        else:
            self._tree(draft, q, state, budget)
        draft.select_s = t1 - t0            # recomputing h is the drafter's bookkeeping, not drafting
        return draft

    def _chain(self, draft: Draft, q: torch.Tensor, state: DecodingState, policy: DraftPolicy) -> None:
        """Head k's top-1 (or a draw from q_k) for k = 1.., until EOS, the budget or the policy stops it."""
        for q_k in q:
            token = sample(q_k, state.generator) if state.warp.do_sample else int(q_k.argmax())
            draft.add(token, q_k, keep_dist=state.warp.do_sample)
            if token in state.eos or not policy.keep_drafting(len(draft), stop_signal(draft, state, policy)):
                return

    def _tree(self, draft: Draft, q: torch.Tensor, state: DecodingState, budget: int) -> None:
        """Medusa's tree: the node of path c is the c[-1]-th candidate of head len(c) under the node of c[:-1]
        (greedy: the top-k tokens of q_k; sampling: i.i.d. draws from q_k, drawn once per parent)."""
        draft.tree, draft.forward, node_of, picks = [], tree_verify_forward_with_hidden_states, {(): -1}, {}
        for path in sorted((c for c in self.choices if len(c) <= budget), key=len):
            parent, q_k = node_of.get(path[:-1]), q[len(path) - 1]
            if parent is None or (parent >= 0 and draft.tokens[parent] in state.eos):
                continue
            if path[:-1] not in picks:
                n = 1 + max(c[-1] for c in self.choices if c[:-1] == path[:-1])
                drawn = (torch.multinomial(q_k, n, replacement=True, generator=state.generator) if state.warp.do_sample
                         else torch.topk(q_k, min(n, q_k.shape[-1])).indices)
                picks[path[:-1]] = drawn.tolist()
            if path[-1] >= len(picks[path[:-1]]):
                continue
            draft.add(picks[path[:-1]][path[-1]], q_k, keep_dist=state.warp.do_sample)
            draft.tree.append(parent)
            node_of[path] = len(draft.tokens) - 1

    def commit(self, state: DecodingState, draft: Draft, verdict: Verdict) -> None:
        """Keep h at the row whose logits chose the new pending token (the last accepted node's, else t_0's)."""
        if verdict.hidden_states is None:
            self.hidden = None
            return
        row = verdict.n_accepted if verdict.path is None else (verdict.path[-1] + 1 if verdict.path else 0)
        self.hidden, self.owner = verdict.hidden_states[-1][row], weakref.ref(state)
