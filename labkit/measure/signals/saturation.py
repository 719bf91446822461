"""Where a token's prediction settles: the logit lens over every layer and sub-layer, and CALM's exit signals.

Notation (as everywhere in labkit): p target, q draft, α per-token acceptance probability, γ max draft.

A pre-norm decoder adds two blocks to the residual stream per layer, so a forward passes through S = 2L + 1
*stages*: the embeddings h_0, then after the attention block of layer 0, after its MLP block (= layer 0's
output), ..., after the MLP block of layer L-1 (the last hidden state). The **logit lens** (nostalgebraist
2020; Geva et al. 2022) reads any stage with the model's own final norm and LM head, as an early exit would.
A token is **saturated** at a stage when that reading's top-1 already is the final top-1 (Geva et al.;
Simoulin & Crabbé 2021), and **settled** when it stays so at every later stage. The fraction saturated
after layer E is the teacher-forced α of an early-exit draft at E, which is why saturation is what makes
layer-skipped and early-exit drafts work.

CALM (Schuster et al. 2022) decides to exit from one of three confidence measures: the **softmax response**
(in CALM, the gap between the top-1 and top-2 probabilities of the lens), **hidden-state saturation** (cosine
similarity of consecutive layers' states), and a small **trained exit classifier** (a linear map of the exit
layer's hidden state). :func:`fit_exit_classifier` fits that classifier (a logistic regression) on tokens of
*training* prompts; :func:`exit_signal_rocs` says how well each measure separates "this layer already gives the
final token" from "not yet" on other prompts (ROC curve and its area, AUC, with a bootstrap interval over tokens,
so that a ranking of the signals can say when it is within the noise).

The tokens are each prompt's greedy continuation by the full model, read back in one teacher-forced forward.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from ...core.checks import check_int
from ...core.decoding import autoregressive_generate
from ...core.skip import decoder_layers, pre_mlp_norm

__all__ = ["Saturation", "stage_labels", "residual_states", "lens_logits", "measure_saturation", "roc_curve",
           "roc_auc", "exit_signal_rocs", "CALM_SIGNALS", "ExitClassifier", "fit_exit_classifier", "bootstrap_auc"]

#: CALM's three exit-confidence measures, as named in the figures (softmax response = top-1 minus top-2
#: probability, as CALM defines it; state saturation = cosine of consecutive layers' states; exit classifier =
#: a logistic regression on the exit layer's hidden state, trained on other prompts).
CALM_SIGNALS = ("softmax response", "state saturation", "exit classifier")


def stage_labels(n_layers: int) -> list[str]:
    """S = 2L + 1 names: 'embeddings', '0 attn', '0 mlp', ..., f'{L-1} mlp' (layer indices as in a SkipSet)."""
    return ["embeddings"] + [f"{i} {block}" for i in range(n_layers) for block in ("attn", "mlp")]


@contextlib.contextmanager
def _recording_stages(model, kept: dict):
    """Forward hooks (on this instance, removed on exit) that keep every stage's residual stream in ``kept``."""
    layers = decoder_layers(model)
    norm_name = pre_mlp_norm(model)

    def first_input(module, args, kwargs):
        kept[0] = args[0] if args else kwargs["hidden_states"]

    handles = [layers[0].register_forward_pre_hook(first_input, with_kwargs=True)]
    for i, layer in enumerate(layers):
        norm = getattr(layer, norm_name)
        handles.append(norm.register_forward_pre_hook(lambda m, args, i=i: kept.__setitem__(2 * i + 1, args[0])))
        handles.append(layer.register_forward_hook(
            lambda m, args, out, i=i: kept.__setitem__(2 * i + 2, out[0] if isinstance(out, tuple) else out)))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@torch.inference_mode()
def residual_states(model, input_ids: torch.Tensor) -> torch.Tensor:
    """The residual stream (S, T, H) after every stage, from one forward over ``input_ids`` (1, T), no cache."""
    kept: dict[int, torch.Tensor] = {}
    with _recording_stages(model, kept):
        model.model(input_ids=input_ids, use_cache=False)
    return torch.stack([kept[s][0] for s in range(2 * len(decoder_layers(model)) + 1)])


@torch.inference_mode()
def lens_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The model's own read-out of any residual stream (..., H) -> (..., V): final norm, LM head, and the
    final logit soft-capping where the model has one (Gemma2)."""
    logits = model.lm_head(model.model.norm(hidden)).float()
    cap = getattr(model.config, "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1)


@dataclass
class Saturation:
    """Per generated token (N of them) and stage (S = 2L + 1): what the logit lens reads there."""

    model: str
    n_layers: int
    tokens: np.ndarray             # (N,) the final top-1 token (what greedy decoding emitted)
    prompt_index: np.ndarray       # (N,) which prompt each token belongs to
    top1: np.ndarray               # (N, S) lens top-1 token
    p_final: np.ndarray            # (N, S) lens probability of the final token
    p_max: np.ndarray              # (N, S) lens top-1 probability: CALM's softmax response
    gap: np.ndarray                # (N, S) top-1 minus top-2 probability: CALM's top-2 gap
    cos_last: np.ndarray           # (N, S) cosine of the stage's state with the last hidden state
    cos_prev_layer: np.ndarray     # (N, L + 1) cosine of layer l's output with layer l-1's (NaN at l = 0)
    prompts: list[str] = field(default_factory=list)
    layer_states: np.ndarray | None = None   # (N, L + 1, H) layer outputs after the final norm: what an exit reads

    @property
    def stages(self) -> list[str]:
        return stage_labels(self.n_layers)

    @staticmethod
    def layer_stage(layer: int) -> int:
        """Stage index of the state after ``layer`` full layers (0: the embeddings)."""
        return 2 * layer

    @property
    def saturated(self) -> np.ndarray:                                       # (N, S) bool
        return self.top1 == self.tokens[:, None]

    @property
    def settled(self) -> np.ndarray:
        """(N, S): saturated here and at every later stage."""
        return np.flip(np.logical_and.accumulate(np.flip(self.saturated, axis=1), axis=1), axis=1)

    def fraction_saturated(self) -> np.ndarray:
        return self.saturated.mean(axis=0)

    def fraction_settled(self) -> np.ndarray:
        return self.settled.mean(axis=0)

    def exit_alpha(self) -> dict[int, float]:
        """{E: fraction of tokens an exit after layer E gets right}: the teacher-forced α of early exit at E."""
        return {e: float(self.saturated[:, self.layer_stage(e)].mean()) for e in range(1, self.n_layers + 1)}


@torch.inference_mode()
def _one_prompt(model, input_ids: torch.Tensor, max_new_tokens: int) -> dict:
    out = autoregressive_generate(model, input_ids, max_new_tokens)
    seq, start = out.sequences, out.prompt_length
    if seq.shape[1] == start:
        return {}
    states = residual_states(model, seq[:, :-1])[:, start - 1:]              # (S, n, H): predicting the new tokens
    logits = lens_logits(model, states)                                      # (S, n, V)
    probs = torch.softmax(logits, dim=-1)
    top2 = probs.topk(2, dim=-1)
    final = logits[-1].argmax(dim=-1)                                       # (n,) the full model's top-1
    layer_out = states[0::2]                                                # (L + 1, n, H)
    cos_prev = torch.full(layer_out.shape[:2], float("nan"), device=layer_out.device)
    cos_prev[1:] = _cosine(layer_out[1:], layer_out[:-1])
    kept = {"tokens": final, "top1": top2.indices[..., 0].T,
            "p_final": probs.gather(-1, final.expand(probs.shape[0], -1)[..., None])[..., 0].T,
            "p_max": top2.values[..., 0].T, "gap": (top2.values[..., 0] - top2.values[..., 1]).T,
            "cos_last": _cosine(states, states[-1:].expand_as(states)).T, "cos_prev_layer": cos_prev.T,
            "layer_states": model.model.norm(layer_out).float().transpose(0, 1)}
    return {key: value.cpu() for key, value in kept.items()}                # what follows runs on the CPU


def measure_saturation(model, tokenizer, prompt_texts: list[str], *, max_new_tokens: int = 48, name: str = "",
                       progress: bool = True) -> Saturation:
    """The logit lens over every stage for each prompt's greedy continuation (``max_new_tokens`` tokens)."""
    if not prompt_texts:
        raise ValueError("prompt_texts is empty: give at least one prompt")
    check_int("max_new_tokens", max_new_tokens, 1)
    parts, index = [], []
    for i, text in enumerate(tqdm(prompt_texts, desc=f"logit lens {name}".strip(), disable=not progress)):
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        part = _one_prompt(model, ids, max_new_tokens)
        if part:
            parts.append(part)
            index.extend([i] * len(part["tokens"]))
    arrays = {k: torch.cat([p[k] for p in parts]).numpy() for k in parts[0]}
    return Saturation(model=name, n_layers=len(decoder_layers(model)), prompt_index=np.array(index),
                      prompts=list(prompt_texts), **arrays)


# ---------------------------------------------------------------------------------------------------------
# how well a confidence signal predicts "already right": ROC with numpy
# ---------------------------------------------------------------------------------------------------------
def roc_curve(scores, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(false-positive rate, true-positive rate, thresholds) of "exit when score >= threshold", thresholds
    from +inf down through every distinct score (ties share one point)."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    keep = ~np.isnan(scores)
    scores, labels = scores[keep], labels[keep]
    n_pos, n_neg = labels.sum(), (~labels).sum()
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"a ROC curve needs both classes (got {n_pos} positives, {n_neg} negatives)")
    order = np.argsort(-scores, kind="stable")
    scores, labels = scores[order], labels[order]
    last_of_tie = np.r_[np.nonzero(np.diff(scores))[0], len(scores) - 1]
    tp, fp = np.cumsum(labels)[last_of_tie], np.cumsum(~labels)[last_of_tie]
    return np.r_[0.0, fp / n_neg], np.r_[0.0, tp / n_pos], np.r_[np.inf, scores[last_of_tie]]


def roc_auc(scores, labels) -> float:
    """Area under the ROC curve: P(a random positive scores above a random negative), ties counting half."""
    fpr, tpr, _ = roc_curve(scores, labels)
    return float(np.trapezoid(tpr, fpr))


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based) of ``x``, ties sharing their mean rank."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return (ends - (counts - 1) / 2.0)[inverse]


def _auc_by_ranks(scores: np.ndarray, labels: np.ndarray) -> float:
    """AUC by the Mann-Whitney rank sum (the same number as :func:`roc_auc`, without the curve): NaN for one class."""
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((_ranks(scores)[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def bootstrap_auc(scores: np.ndarray, labels: np.ndarray, *, n_boot: int = 200, seed: int = 0,
                  level: float = 0.95) -> tuple[float, float]:
    """(low, high) percentile interval of the AUC when the *tokens* (rows of ``scores``/``labels``, shape (N, E):
    one token's exits at every layer stay together) are resampled with replacement ``n_boot`` times. Why: the
    tokens are one sample of text; a ranking of two signals whose intervals overlap is within the noise."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    rng = np.random.default_rng(seed)
    aucs = []
    for _ in range(n_boot):
        rows = rng.integers(0, len(scores), len(scores))
        s, y = scores[rows].ravel(), labels[rows].ravel()
        keep = ~np.isnan(s)
        auc = _auc_by_ranks(s[keep], y[keep])
        if not np.isnan(auc):
            aucs.append(auc)
    if not aucs:
        return float("nan"), float("nan")
    tail = 100 * (1 - level) / 2
    return float(np.percentile(aucs, tail)), float(np.percentile(aucs, 100 - tail))


@dataclass
class ExitClassifier:
    """CALM's third measure: P(layer E already gives the final token) = sigmoid(w · x + b_E), x the exit layer's
    normed hidden state (standardised with the training tokens' mean and spread), one bias per exit layer."""

    weight: np.ndarray         # (H,)
    layer_bias: dict           # {E: b_E}
    mean: np.ndarray           # (H,)
    std: np.ndarray            # (H,)
    n_train: int               # training examples (tokens x exit layers)

    def scores(self, sat: Saturation, layers) -> np.ndarray:
        """(N, len(layers)) predicted probability that each token's exit at each layer is already right."""
        if sat.layer_states is None:
            raise ValueError("this Saturation has no layer_states: measure it with measure_saturation")
        x = (sat.layer_states[:, list(layers)] - self.mean) / self.std          # (N, E, H)
        z = x @ self.weight + np.array([self.layer_bias[e] for e in layers])
        return 1.0 / (1.0 + np.exp(-z))


def fit_exit_classifier(train: Saturation, layers=None, *, l2: float = 1e-2, max_iter: int = 200) -> ExitClassifier:
    """A logistic regression (L2 penalty ``l2``, L-BFGS from zero: deterministic) of "layer E is already right"
    on the exit layer's hidden state, over the tokens of ``train`` at exit layers ``layers`` (default 1..L-1).
    Fit it on prompts other than those you evaluate it on: on its own training tokens it looks better than it is."""
    if train.layer_states is None:
        raise ValueError("the training Saturation has no layer_states: measure it with measure_saturation")
    layers = list(layers) if layers is not None else list(range(1, train.n_layers))
    states = train.layer_states[:, layers].astype(np.float64)                    # (N, E, H)
    mean, std = states.reshape(-1, states.shape[-1]).mean(0), states.reshape(-1, states.shape[-1]).std(0) + 1e-6
    x = torch.from_numpy(((states - mean) / std).reshape(-1, states.shape[-1]))
    y = torch.from_numpy(np.stack([train.saturated[:, train.layer_stage(e)] for e in layers], 1).reshape(-1) * 1.0)
    which = torch.arange(len(layers)).repeat(len(train.tokens))
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(len(layers), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=max_iter, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b[which], y) + l2 * (w @ w)
        value.backward()
        return value

    with torch.enable_grad():
        opt.step(loss)
    return ExitClassifier(w.detach().numpy().copy(), {e: float(b.detach()[i]) for i, e in enumerate(layers)}, mean, std,
                          int(y.numel()))


def _signal_table(sat: Saturation, layers, classifier: ExitClassifier | None) -> dict[str, tuple]:
    """{signal: (scores (N, E), labels (N, E))} for the exits at ``layers``."""
    stages = [sat.layer_stage(e) for e in layers]
    labels = np.stack([sat.saturated[:, s] for s in stages], axis=1)
    values = {"softmax response": np.stack([sat.gap[:, s] for s in stages], axis=1),
              "state saturation": np.stack([sat.cos_prev_layer[:, e] for e in layers], axis=1)}
    if classifier is not None:
        values["exit classifier"] = classifier.scores(sat, layers)
    return {name: (v, labels) for name, v in values.items()}


def exit_signal_rocs(sat: Saturation, layers=None, *, classifier: ExitClassifier | None = None, n_boot: int = 200,
                     seed: int = 0) -> dict[str, dict]:
    """For each CALM measure (the exit classifier only when given one, fitted on other prompts), pooled over the
    exit layers ``layers`` (default 1..L-1; at L every token is right): {'fpr', 'tpr', 'thresholds', 'auc',
    'auc_low', 'auc_high' (bootstrap over tokens, :func:`bootstrap_auc`), 'auc_by_layer': {E: auc},
    'positives'} for "layer E already gives the final token" (per-layer AUC None where a layer is always or never
    right)."""
    layers = list(layers) if layers is not None else list(range(1, sat.n_layers))
    out = {}
    for name, (scores, labels) in _signal_table(sat, layers, classifier).items():
        fpr, tpr, thresholds = roc_curve(scores.ravel(), labels.ravel())
        by_layer = {}
        for j, e in enumerate(layers):
            both = 0 < labels[:, j].sum() < len(labels)
            by_layer[e] = roc_auc(scores[:, j], labels[:, j]) if both else None
        low, high = bootstrap_auc(scores, labels, n_boot=n_boot, seed=seed) if n_boot else (np.nan, np.nan)
        out[name] = {"fpr": fpr, "tpr": tpr, "thresholds": thresholds, "auc": float(np.trapezoid(tpr, fpr)),
                     "auc_low": low, "auc_high": high, "auc_by_layer": by_layer, "positives": float(labels.mean())}
    return out
