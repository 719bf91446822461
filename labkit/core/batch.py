"""Many sequences in one KV cache: rows of different lengths, explicit per-row positions and a mask of valid columns.

A batch of B rows shares one transformers cache of C columns per layer. Row b's token at cache column j sits at
its own position; ``valid[b, j]`` says whether column j holds one of row b's tokens at all. Columns that do not
are *holes*: the left padding of a shorter prompt, the drafted tokens of a row that the target rejected (every
row's verify appends as many columns as the longest draft), or a row that fed nothing to a draft forward. Every
forward gets an explicit additive attention mask (B, 1, T, C + T) built from ``valid``, so a hole is never read,
and explicit positions, so a row's tokens keep their positions whatever column they landed in. Between steps
every layer holds the same C columns (drafting with skipped attention appends to some layers only; the draft is
cut back with :func:`~labkit.core.cache.crop_to` before the verify, as for one sequence).

Ragged acceptance (rows that accepted different numbers of drafted tokens) is handled as ``BatchConfig.ragged``
says (docs/decisions.md measures each):

- ``"mask"``: the rejected columns stay as holes; the cache is compacted (:func:`compact`, each row's valid
  columns gathered to the right, left-padded) only when more than half its columns are holes;
- ``"repad"``: compacted after every step (no holes beyond the padding; a gather of the whole cache each step);
- ``"shortest"``: every row keeps only as many drafted tokens as the row that accepted fewest (all rows advance
  alike, so no holes ever appear; lossless, since a prefix of accepted tokens followed by the target's verdict
  on the next one is what a shorter draft would have produced, but rows that accepted more give tokens back).

Rows that finish (EOS or their budget) leave the cache (:func:`keep_rows`): they stop costing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .cache import crop_to, new_cache
from .checks import check_choice, check_int
from .devices import model_device
from .forward import cache_argument, check_custom_mask
from .sampling import Warp

__all__ = ["BatchConfig", "BatchState", "RAGGED_MODES", "batch_forward", "attention_mask", "compact", "keep_rows",
           "pad_prompts"]

RAGGED_MODES = ("mask", "repad", "shortest")


@dataclass(frozen=True)
class BatchConfig:
    """How a batch is decoded: ``ragged`` (see the module docstring), ``compact_below`` (mode "mask": compact
    when the fraction of valid cache columns falls below it) and ``draft_while``: the batch's draft forwards go on
    while at least this fraction of the rows that began drafting still draft (a draft forward costs every row, so
    the last few rows' drafts are cut short; a shorter draft is still lossless; 0: until every row stops)."""

    ragged: str = "mask"
    compact_below: float = 0.5
    draft_while: float = 0.5

    def __post_init__(self) -> None:
        check_choice("ragged", self.ragged, RAGGED_MODES)
        for name in ("compact_below", "draft_while"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")


@dataclass
class BatchState:
    """What a batched call carries between steps. ``rows[i]`` is the original index of batch row i; ``tokens[i]``
    its prompt and emitted tokens, the last one pending (not in the cache, as for one sequence)."""

    model: torch.nn.Module
    cache: object
    tokens: list[list[int]]
    prompt_lengths: list[int]
    valid: torch.Tensor                      # (B, C) bool: cache column j holds a token of row b
    warp: Warp
    eos: frozenset[int]
    generator: torch.Generator | None = None
    rows: list[int] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.tokens)

    def positions(self) -> list[int]:
        """Sequence length of each row; its pending token sits at position - 1."""
        return [len(t) for t in self.tokens]

    def n_emitted(self, i: int) -> int:
        return len(self.tokens[i]) - self.prompt_lengths[i]


def pad_prompts(prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-padded ids (B, T) (pad id 0), their validity (B, T) bool and positions (B, T) (pads at 0)."""
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    valid = torch.zeros(len(prompts), width, dtype=torch.bool)
    positions = torch.zeros(len(prompts), width, dtype=torch.long)
    for b, prompt in enumerate(prompts):
        if prompt:
            ids[b, width - len(prompt):] = torch.tensor(prompt)
            valid[b, width - len(prompt):] = True
            positions[b, width - len(prompt):] = torch.arange(len(prompt))
    return ids, valid, positions


def attention_mask(cached: torch.Tensor, new: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, 1, T, C + T) additive mask: query t of row b sees cached column j when ``cached[b, j]`` and new column
    s <= t when ``new[b, s]``; every query sees itself (a hole's query then reads only itself: no empty row)."""
    batch, width = new.shape
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    seen_new = causal[None] & new[:, None, :]                                  # (B, T, T)
    seen_new |= torch.eye(width, dtype=torch.bool)[None]
    seen = torch.cat([cached[:, None, :].expand(batch, width, cached.shape[1]), seen_new], dim=2)
    return torch.zeros(seen.shape, dtype=dtype).masked_fill_(~seen, torch.finfo(dtype).min)[:, None]


def batch_forward(model, cache, valid: torch.Tensor, ids: torch.Tensor, positions: torch.Tensor,
                  new_valid: torch.Tensor, *, hidden_states: bool = False, last_only: bool = False):
    """One forward of ``ids`` (B, T) at ``positions`` (B, T) behind the cache, whose attending layers hold
    ``valid.shape[1]`` columns; ``new_valid`` (B, T) marks which new columns later queries may read. Returns the
    model's output (logits (B, T, V), or (B, 1, V) with ``last_only``)."""
    device = model_device(model)
    mask = attention_mask(valid.cpu(), new_valid.cpu(), model.dtype).to(device)
    layer_types = getattr(model.config, "layer_types", None)
    return model(input_ids=ids.to(device), position_ids=positions.to(device), **cache_argument(model, cache),
                 use_cache=True, output_hidden_states=hidden_states, logits_to_keep=1 if last_only else 0,
                 attention_mask=dict.fromkeys(set(layer_types), mask) if layer_types else mask)


def check_batch_fits(model, columns: int) -> None:
    """A batch's mask is a custom 4D mask over ``columns`` cache columns
    (:func:`~labkit.core.forward.check_custom_mask`)."""
    check_custom_mask(model, columns, "a batch")


def new_batch(model, prompts: list[list[int]], warp: Warp, eos: frozenset[int], generator,
              hidden_states: bool = False) -> tuple[BatchState, torch.Tensor | None]:
    """Every row's prompt but its last (pending) token read into a new cache; returns the state and, with
    ``hidden_states``, each row's final hidden state at its last cached token (B, H) (None where nothing)."""
    cache = new_cache(model)
    ids, valid, positions = pad_prompts([p[:-1] for p in prompts])
    state = BatchState(model, cache, [list(p) for p in prompts], [len(p) for p in prompts], valid, warp, eos,
                       generator, list(range(len(prompts))))
    if ids.shape[1] == 0:
        return state, None
    check_batch_fits(model, ids.shape[1])
    out = batch_forward(model, cache, torch.zeros(len(prompts), 0, dtype=torch.bool), ids, positions, valid,
                        hidden_states=hidden_states, last_only=not hidden_states)
    return state, (out.hidden_states[-1][:, -1] if hidden_states else None)


def _layers(cache):
    return [layer for layer in cache.layers if layer.get_seq_length() > 0]


def keep_rows(state: BatchState, keep: list[int]) -> None:
    """Keep batch rows ``keep`` (indices into the current batch) in the cache and the state; the rest leave."""
    if keep == list(range(state.size)):
        return
    index = torch.tensor(keep, dtype=torch.long)
    for layer in _layers(state.cache):
        rows = index.to(layer.keys.device)
        layer.keys, layer.values = layer.keys.index_select(0, rows), layer.values.index_select(0, rows)
    state.valid = state.valid.index_select(0, index)
    for name in ("tokens", "prompt_lengths", "rows"):
        setattr(state, name, [getattr(state, name)[i] for i in keep])


def compact(state: BatchState) -> None:
    """Gather each row's valid columns to the right of a narrower cache (left-padded): holes removed."""
    counts = state.valid.sum(dim=1)
    width = int(counts.max()) if state.size else 0
    if width == state.valid.shape[1]:
        return
    index = torch.zeros(state.size, width, dtype=torch.long)
    valid = torch.zeros(state.size, width, dtype=torch.bool)
    for b in range(state.size):
        columns = state.valid[b].nonzero().flatten()
        index[b, width - len(columns):] = columns
        valid[b, width - len(columns):] = True
    for layer in _layers(state.cache):
        gather = index.to(layer.keys.device)[:, None, :, None].expand(-1, layer.keys.shape[1], -1,
                                                                       layer.keys.shape[-1])
        layer.keys, layer.values = layer.keys.gather(2, gather), layer.values.gather(2, gather)
        if hasattr(layer, "cumulative_length"):                      # a sliding-window layer counts its length
            layer.cumulative_length = width
    state.valid = valid


def realign(state: BatchState, config: BatchConfig) -> None:
    """After a step: every layer back to the valid mask's width, then compacted if the mode asks for it."""
    crop_to(state.cache, state.valid.shape[1])
    if not state.size:
        return
    fraction = float(state.valid.float().mean()) if state.valid.numel() else 1.0
    if config.ragged == "repad" or (config.ragged == "mask" and fraction < config.compact_below):
        compact(state)


def check_rows(prompts, name: str = "input_ids") -> list[list[int]]:
    """A list of prompts (lists or 1-D tensors of ints), each non-empty; TypeError/ValueError naming ``name``."""
    rows = []
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, torch.Tensor):
            if prompt.dim() != 1 or prompt.dtype not in (torch.int64, torch.int32):
                raise TypeError(f"{name}[{i}] must be a 1-D integer tensor, got {prompt.dtype} {tuple(prompt.shape)}")
            prompt = prompt.tolist()
        if not isinstance(prompt, (list, tuple)) or not all(isinstance(t, int) for t in prompt):
            raise TypeError(f"{name}[{i}] must be a list of token ids or a 1-D LongTensor")
        check_int(f"len({name}[{i}])", len(prompt), 1)
        rows.append(list(prompt))
    if not rows:
        raise ValueError(f"{name} is an empty batch: give at least one prompt")
    return rows
