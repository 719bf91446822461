"""Fitting a model's width-draft predictors on its own activations, and how well they recall the neurons that matter.

For every layer l the MLP's input x (N, H) is recorded over windows of the training split. A neuron's contribution
is y_i = |act(g_i·x)(u_i·x)|·‖w_down[:, i]‖ (:func:`labkit.core.width.neuron_contributions`), so the predictor
needs g·x and u·x cheaply: the rank-r W_r that best reproduces W x *on these activations*, min E‖(W − W_r) x‖²,
is W_r = [W L]_r L⁻¹ with XᵀX/N + λ = L Lᵀ (the truncated SVD of the whitened weights), i.e.
A = L⁻ᵀ V_r (H, r), B = (U_r S_r)ᵀ (r, I), for the gate and the up projection (B_u scaled by ‖w_down[:, i]‖).
Closed form, so a fit is deterministic for given windows (seeded) and takes seconds, not a training loop. (A first
try, a low-rank ridge regression of y itself on x, recalled barely more than chance at half the neurons: y is a
product of two linear maps, which a linear predictor of |y| does not capture.) The static importance a pruned
draft ranks by is the mean contribution over the same tokens.

Recall (Deja Vu's measure): of the k neurons with the largest true contribution at a token, the share the
predictor's top k holds, averaged over held-out tokens (the validation split), per layer; beside it the same for the
static ranking (what pruning keeps), so the gain of choosing per token shows.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..artifacts.corpus import corpus_files
from ..artifacts.models import fingerprint, model_key
from ..artifacts.paths import RESULTS_DIR
from ..core.checks import check_int, check_number
from ..core.skip import decoder_layers
from ..core.width import GatheredMLP, WidthPredictors, mlp_parts, neuron_contributions

__all__ = ["WidthFitConfig", "sample_windows", "mlp_inputs", "fit_predictors", "recall", "load_or_fit",
           "predictors_cache", "predictors_for"]


@dataclass(frozen=True)
class WidthFitConfig:
    """``rank``: r of each layer's predictor; ``windows`` of ``window_tokens`` tokens (one per file, at a seeded
    offset); ``ridge``: λ relative to the mean diagonal of XᵀX."""

    rank: int = 32
    windows: int = 64
    window_tokens: int = 128
    ridge: float = 1e-3
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("rank", self.rank, 1)
        check_int("windows", self.windows, 1)
        check_int("window_tokens", self.window_tokens, 2)
        check_number("ridge", self.ridge, 0.0)


def sample_windows(tokenizer, split: str, n: int, length: int, seed: int = 0, root: Path | None = None) -> torch.Tensor:
    """(n', length) token windows of ``split``, one per file, files and offsets drawn with ``seed`` (files shorter
    than ``length`` are passed over; n' < n only when the split runs out)."""
    files = corpus_files(split, root)
    rng = random.Random(seed)
    rng.shuffle(files)
    windows = []
    for path in files:
        ids = tokenizer(path.read_text(encoding="utf-8", errors="replace"), return_tensors="pt",
                        add_special_tokens=False)["input_ids"][0]
        if len(ids) >= length:
            start = rng.randrange(len(ids) - length + 1)
            windows.append(ids[start:start + length])
        if len(windows) == n:
            break
    if not windows:
        raise ValueError(f"no window of {length} tokens in the {split!r} split")
    return torch.stack(windows)


@torch.inference_mode()
def mlp_inputs(model, windows: torch.Tensor, batch: int = 8, progress: bool = True) -> list[torch.Tensor]:
    """Each layer's MLP input x over every token of ``windows`` (N, T): one (N·T, H) tensor per layer
    (``progress``: a progress bar over the batches)."""
    layers = decoder_layers(model)
    seen: list[list[torch.Tensor]] = [[] for _ in layers]
    hooks = [layer.mlp.register_forward_pre_hook(lambda _m, args, i=i: seen[i].append(
        args[0].reshape(-1, args[0].shape[-1]).float())) for i, layer in enumerate(layers)]
    try:
        for start in tqdm(range(0, len(windows), batch), desc="MLP inputs", leave=False, disable=not progress):
            model(windows[start:start + batch].to(model.device))
    finally:
        for hook in hooks:
            hook.remove()
    return [torch.cat(parts) for parts in seen]


def _whitened_low_rank(w: torch.Tensor, chol: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(A (H, r), B (r, I)) with x A B ≈ x wᵀ best on the activations whose second moment is chol cholᵀ."""
    u, s, vh = torch.linalg.svd(w @ chol, full_matrices=False)
    r = min(rank, len(s))
    a = torch.linalg.solve_triangular(chol.T, vh[:r].T, upper=True)                     # L⁻ᵀ V_r
    return a, (u[:, :r] * s[:r]).T


def _fit_layer(mlp, x: torch.Tensor, cfg: WidthFitConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gate, up, down, _ = (t.float() if isinstance(t, torch.Tensor) else t for t in mlp_parts(mlp))
    second = x.T @ x / len(x)                                                           # (H, H)
    chol = torch.linalg.cholesky(second + cfg.ridge * second.diagonal().mean() * torch.eye(len(second)))
    a_g, b_g = _whitened_low_rank(gate, chol, cfg.rank)
    a_u, b_u = _whitened_low_rank(up, chol, cfg.rank)
    y = neuron_contributions(mlp, x.to(mlp_parts(mlp)[0].dtype)).float()               # (N, I)
    return torch.cat([a_g, a_u], 1), torch.stack([b_g, b_u * down.norm(dim=0)]), y.mean(0)


@torch.inference_mode()
def fit_predictors(model, windows: torch.Tensor, cfg: WidthFitConfig = WidthFitConfig(),
                   progress: bool = True) -> WidthPredictors:
    """Every layer's predictor and importance fitted on the model's own activations over ``windows``
    (``progress``: a progress bar over the batches of windows)."""
    inputs = mlp_inputs(model, windows, progress=progress)
    parts = [_fit_layer(layer.mlp, x, cfg) for layer, x in zip(decoder_layers(model), inputs)]
    return WidthPredictors([p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts],
                           {"config": asdict(cfg), "tokens": int(inputs[0].shape[0])})


def _share(chosen: torch.Tensor, true: torch.Tensor, n_neurons: int) -> float:
    hits = torch.zeros(len(true), n_neurons, dtype=torch.bool)
    hits.scatter_(1, true, True)
    return float(hits.gather(1, chosen).float().mean())


@torch.inference_mode()
def recall(model, predictors: WidthPredictors, windows: torch.Tensor, kept: float, progress: bool = True
           ) -> list[dict]:
    """Per layer, over every token of ``windows``: the share of the top-k true contributions (k = kept·I) that the
    predictor's top k holds (``predictor``), and that the static importance ranking holds (``static``)."""
    check_number("kept", kept, 0.0, 1.0)
    rows = []
    for i, (layer, x) in enumerate(zip(decoder_layers(model), mlp_inputs(model, windows, progress=progress))):
        y = neuron_contributions(layer.mlp, x.to(mlp_parts(layer.mlp)[0].dtype)).float()
        n = y.shape[1]
        k = max(1, round(kept * n))
        true = y.topk(k, dim=1).indices
        scores = GatheredMLP(layer.mlp, predictors.a[i], predictors.b[i], k).scores(x.to(y.dtype))
        static = predictors.importance[i].topk(k).indices.expand(len(y), k)
        rows.append({"layer": i, "kept": kept, "k": k, "predictor": _share(scores.topk(k, dim=1).indices, true, n),
                     "static": _share(static, true, n)})
    return rows


def load_or_fit(model, tokenizer, cache_file: str | Path, cfg: WidthFitConfig = WidthFitConfig(),
                progress: bool = True) -> WidthPredictors:
    """The predictors cached in ``cache_file`` when they were fitted with ``cfg`` for a model of this shape, else
    fitted on training-split windows and cached there (``progress``: a progress bar while fitting)."""
    cache_file = Path(cache_file)
    if cache_file.exists():
        cached = WidthPredictors.load(cache_file)
        if cached.info.get("config") == asdict(cfg):
            cached.check(model)
            return cached
    windows = sample_windows(tokenizer, "train", cfg.windows, cfg.window_tokens, cfg.seed)
    predictors = fit_predictors(model, windows, cfg, progress)
    predictors.save(cache_file)
    return predictors


def predictors_cache(name) -> Path:
    """Where a model's fitted predictors are cached: ``results/width/<model key>-<weights fingerprint>.pt`` (new
    weights, a new file)."""
    return RESULTS_DIR / "width" / f"{model_key(name)}-{fingerprint(name)}.pt"


def predictors_for(name, model, tokenizer, cfg: WidthFitConfig = WidthFitConfig(),
                   progress: bool = True) -> WidthPredictors:
    """:func:`load_or_fit` at the model's own cache (:func:`predictors_cache`): what notebook 12 and the reference
    group ``12`` read, so both use the same predictors. Notebook 12 passes ``progress=False``: a finished progress
    bar is a closed widget, and its first run on a fresh clone (nothing cached) would show one the second does not."""
    return load_or_fit(model, tokenizer, predictors_cache(name), cfg, progress)
