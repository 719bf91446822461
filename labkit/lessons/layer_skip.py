"""Notebook 02's sentences, written from the numbers they describe (see :mod:`labkit.lessons.claims`).

What a forward costs and what dominates it, how far the fitted per-layer costs spread, what verification costs,
which single blocks the models cannot lose, whether the live search beat greedy elimination (and whether its set
traded agreement for draft cost against greedy's set of the same size), how
the predicted α relates to a run's accepted / drafted, and how the wall clock compares with the prediction; and
the wall-clock table as a reader sees it. Notation: docs/notation.md.
"""
from __future__ import annotations

import math
import statistics

import numpy as np

from ..artifacts.prompts import repeated_share
from ..core.skip import SkipSet
from ..measure.costs.analytic import expected_tokens_per_step, predict
from .claims import compare, join

__all__ = ["block_parameters", "cost_sentence", "pooling_sentence", "verify_sentence", "single_block_sentence",
           "redundancy_sentence", "path_ends_sentence", "search_history_sentence", "search_vs_greedy_sentence",
           "mask_sentence", "set_tradeoff_sentence", "probe_repeated_share",
           "expected_accepted_per_drafted", "acceptance_sentence", "wall_clock_sentence"]


def block_parameters(model) -> dict[str, int]:
    """Parameters of one attention block and one MLP block (layer 0), and of the fixed part (embedding, head)."""
    layer = model.model.layers[0]
    head = model.get_output_embeddings().weight.numel()
    return {"attention": sum(p.numel() for p in layer.self_attn.parameters()),
            "mlp": sum(p.numel() for p in layer.mlp.parameters()), "lm_head": head}


def cost_sentence(cost_model, params: dict[str, int]) -> str:
    """Where a full step's time goes in this fit, whether it follows the weights, and how good the fit is."""
    cm, L = cost_model, len(cost_model.attention_ms)
    att, mlp = sum(cm.attention_ms) / L, sum(cm.mlp_ms) / L
    text = (f"In this fit a full step is {cm.full_step_ms:.2f} ms: fixed part {cm.fixed_ms:.2f} ms "
            f"({cm.fixed_ms / cm.full_step_ms:.0%}), a mean layer's attention {att:.2f} ms, MLP {mlp:.2f} ms and "
            f"overhead {sum(cm.layer_ms) / L:.2f} ms (R² {cm.fit.get('r2', float('nan')):.3f}). ")
    r2 = cm.fit.get("r2", 1.0)
    if r2 < 0.9 or att <= 0 or mlp <= 0:
        return text + ("The fit is poor (a busy machine, or blocks whose cost came out at 0 ms): read the full step "
                       "and the totals, not the split between block types.")
    weight_ratio, time_ratio = params["attention"] / params["mlp"], att / mlp
    text += (f"An attention block holds {params['attention'] / 1e3:.0f} k parameters and an MLP block "
             f"{params['mlp'] / 1e3:.0f} k ({weight_ratio:.2f}x), yet costs {time_ratio:.2f}x as much time. ")
    if time_ratio > 1.3 * weight_ratio:
        return text + ("Time does not follow the weights: at this size each block's many small operations (per-call "
                       "overhead of PyTorch kernels) cost more than reading its weights.")
    return text + "Time roughly follows the weights here: reading them is a large part of a step."


def summary_cost_sentence(cost_model, verify_steps: float) -> str:
    """The summary's cost line: the fixed part as the floor of any draft, with this fit's numbers only when the fit
    can split a step (a poor fit, or a fixed part that came out at 0 ms, says so instead of quoting 0 ms)."""
    cm = cost_model
    head = "A forward is a fixed part plus each kept block; the fixed part is the floor of any draft"
    r2 = cm.fit.get("r2", 1.0)
    if r2 < 0.9 or cm.fixed_ms <= 0:
        split = (f" (this run's fit could not split its {cm.full_step_ms:.2f} ms step: R² {r2:.2f}, fixed part "
                 f"{cm.fixed_ms:.2f} ms; a busy machine, see section 2)")
    else:
        split = f" (here {cm.fixed_ms:.2f} of {cm.full_step_ms:.2f} ms)"
    return f"{head}{split}. Verifying 5 tokens at once cost {verify_steps:.2f} one-token steps."


def pooling_sentence(cost_model, rel_tol: float = 1e-3) -> str:
    """How far the fitted per-layer bars of each block type spread, whether any came out at 0 ms, and (from the
    fit's record) which block types the partial pooling pooled completely. Bars within ``rel_tol`` of each other
    (relative to their mean) count as equal."""
    cm, L = cost_model, cost_model.n_layers
    groups = (("attention", "attention", cm.attention_ms), ("mlp", "MLP", cm.mlp_ms),
              ("layer", "layer-overhead", cm.layer_ms))
    parts, zeros = [], 0
    for _, label, values in groups:
        lo, hi, mean = min(values), max(values), sum(values) / L
        zeros += sum(v <= 0.0 for v in values)
        if hi - lo <= rel_tol * max(abs(mean), 1e-12):
            parts.append(f"all {L} {label} bars are {mean:.3f} ms")
        else:
            parts.append(f"the {L} {label} bars range from {lo:.3f} to {hi:.3f} ms (mean {mean:.3f})")
    text = f"In this fit {join(parts)}"
    text += f"; {zeros} bar{'s' if zeros != 1 else ''} came out at 0 ms." if zeros else "; no bar is at 0 ms."
    pooling, shrink, n_sets = cm.fit.get("pooling"), cm.fit.get("shrinkage") or {}, cm.fit.get("n_sets")
    if pooling == "full":
        text += " The fit was asked for one cost per block type (pooling='full')."
    elif pooling == "partial" and shrink and n_sets:
        full = [label for key, label, _ in groups if shrink.get(key, 0.0) >= 1e6 * n_sets]
        part = [label for key, label, _ in groups if 0.0 < shrink.get(key, 0.0) < 1e6 * n_sets]
        said = []
        if full:
            said.append(f"pooled the {join(full)} costs completely (their layers' own estimates differed by no "
                        f"more than the timing noise)")
        if part:
            said.append(f"pulled the {join(part)} costs part of the way towards one shared cost")
        if said:
            text += f" The fit {join(said)}."
    return text


def verify_sentence(verify_5: float, r2: float = 1.0) -> str:
    """What verifying 5 tokens in one forward cost, and the regime that makes it cheap."""
    text = (f"Verifying 5 tokens in one forward cost {verify_5:.2f} one-token steps here (5 separate steps: 5.00)"
            + (f"; the fit is poor (R² {r2:.2f}), so the verify line may be flatter than the machine. " if r2 < 0.9
               else ". "))
    if verify_5 < 2.0:
        return text + ("It is cheap because this forward is dominated by work paid once per call (Python and "
                       "framework work per module, reading the weights), not by arithmetic per token. A compute-bound "
                       "forward (a large batch on a GPU, a very long draft) would cost closer to one step per token.")
    return text + ("Here the extra tokens are not cheap: the forward is dominated by work per token, and verification "
                   "saves less than it does where per-call work or weight reads dominate.")


def single_block_sentence(single: dict, names: tuple[str, str]) -> str:
    """Which single block each model can least afford to lose (layer 0's attention, usually) and the typical cost."""
    parts = []
    for name in names:
        d = single[name]
        worst_kind, worst_layer = min(((k, i) for k in ("attention", "mlp") for i in range(len(d[k]))),
                                      key=lambda kl: d[kl[0]][kl[1]])
        others = [v for k in ("attention", "mlp") for i, v in enumerate(d[k]) if (k, i) != (worst_kind, worst_layer)]
        kind = {"attention": "attention", "mlp": "MLP"}[worst_kind]
        parts.append(f"{name}: skipping {kind} {worst_layer} alone leaves {d[worst_kind][worst_layer]:.0%} "
                     f"agreement (the lowest of any single block), MLP 0 leaves {d['mlp'][0]:.0%}, the median other "
                     f"block {statistics.median(others):.0%}")
    return "; ".join(parts) + "."


def redundancy_sentence(half: dict, trained: dict, paths: dict, default_name: str,
                        n_positions: int | None = None) -> str:
    """Agreement at half the blocks skipped, and the trained path against greedy's set of the same size. With
    ``n_positions`` (the probe's scored positions) a difference within two standard errors of a difference of two
    agreements, 2·√(2·a(1 − a)/n), is called within the noise."""
    names = list(half)
    text = (f"With half the blocks skipped, {join([f'{n} agrees on {half[n]:.1%}' for n in names])} of the "
            f"positions. ")
    for skip, a in trained.values():
        greedy_skip, greedy_a = paths[default_name][skip.n_skipped - 1]
        text += (f"The trained draft path agrees on {a:.1%}, greedy elimination's set of the same size "
                 f"({skip.n_skipped} blocks) on {greedy_a:.1%}: ")
        mean = (a + greedy_a) / 2
        se = math.sqrt(max(mean * (1 - mean), 1e-12) / n_positions) if n_positions else 0.0
        if n_positions and abs(a - greedy_a) <= 2 * math.sqrt(2) * se:
            text += (f"within the noise ({n_positions} positions, one standard error about {100 * se:.1f} points): "
                     f"this probe cannot tell the two sets apart. ")
        elif a > greedy_a + 1e-9:
            text += "greedy, one block at a time, walked past the better set. "
        else:
            text += "greedy found a set at least as good. "
    return text.strip()


def path_ends_sentence(predicted, full_step_ms: float) -> str:
    """Skipping nothing and skipping everything on the predicted path, against plain decoding."""
    rows = predicted[predicted["alpha_source"] == "measured"] if "alpha_source" in predicted else predicted
    ends = {"Skipping nothing": rows.loc[rows["n_skipped"].idxmin()],
            f"skipping all {int(rows['n_skipped'].max())} blocks": rows.loc[rows["n_skipped"].idxmax()]}
    why = {"Skipping nothing": ("a draft costs a full step and buys nothing; verifying several tokens costs more",
                                "on this fit verifying several tokens costs no more than one step, "
                                "so γ full drafts and one verify emit γ + 1 tokens for γ + 1 steps"),
           "skip": ("the draft still pays the fixed part and the verifier rejects almost everything",
                    "the fixed part and the verify pass happen to cost nothing extra on this fit")}
    parts = []
    for name, row in ends.items():
        ms = float(row["ms_per_token"])
        slower, level = why["Skipping nothing" if name == "Skipping nothing" else "skip"]
        if ms > full_step_ms * 1.005:
            parts.append(f"{name} is predicted at {ms:.2f} ms/token, slower than plain decoding: {slower}")
        else:
            parts.append(f"{name} is predicted at {ms:.2f} ms/token, as fast as plain decoding: {level}")
    return f"Plain decoding takes {full_step_ms:.2f} ms/token. " + "; ".join(parts) + "."


def _mask_key(params: dict) -> tuple:
    return tuple(sorted(params.items()))


def search_history_sentence(study, n_random: int = 10, n_warm: int = 3) -> str:
    """Where the study found its best trial, and how often the GP proposed a mask it had already evaluated."""
    trials = [t for t in study.trials if t.value is not None]
    best = min(trials, key=lambda t: t.value)
    phase = ("a warm-start set" if best.number < n_warm else "a random mask" if best.number < n_random
             else "a GP proposal")
    seen, repeats, first_repeat = set(), 0, None
    for t in trials:
        key = _mask_key(t.params)
        if key in seen:
            repeats += 1
            first_repeat = t.number if first_repeat is None else first_repeat
        seen.add(key)
    text = f"The best of {len(trials)} trials is trial {best.number}, {phase}. "
    if repeats:
        text += (f"{repeats} trial(s), from trial {first_repeat} on, re-proposed a mask the study had already "
                 f"evaluated ({len(seen)} distinct masks): the modelled objective is deterministic, so a repeat "
                 f"teaches the GP nothing; it is a sign that its acquisition has converged on a region (with a "
                 f"noisy, measured objective a repeat would at least average the noise).")
    else:
        text += f"Every trial evaluated a new mask ({len(seen)} distinct masks)."
    return text


def search_vs_greedy_sentence(search_speedup: float, path_speedup: float, n_trials: int, n_layers: int = 8) -> str:
    """The live search's best against the best set on the greedy-elimination path (same cost model, prompts)."""
    text = compare(search_speedup, path_speedup, a_name="The live search's best predicted speedup",
                   b_name="the best set on the greedy-elimination path", rel_tol=0.01)
    if search_speedup > path_speedup * 1.01:
        return text + f": optimising f directly beat optimising agreement one block at a time, in {n_trials} trials."
    if search_speedup < path_speedup * 0.99:
        return text + (f": in {n_trials} trials the GP did not reach what greedy elimination found (greedy scored "
                       f"{n_layers * (2 * n_layers + 1)} skip sets to draw its path; the search evaluated {n_trials}).")
    return text + f": in {n_trials} trials the two end up level."


def mask_sentence(masks: dict[str, SkipSet]) -> str:
    """What the masks in the heat map keep and where they differ."""
    names = list(masks)
    keeps = [n for n in names if 0 not in masks[n].attention]
    text = (f"{join(keeps)} keep{'s' if len(keeps) == 1 else ''} layer 0's attention" if keeps else
            "none of them keeps layer 0's attention")
    if len(names) == 2:
        a, b = (masks[n] for n in names)
        only_a = [f"attention {i}" for i in sorted(set(a.attention) - set(b.attention))] + \
                 [f"MLP {i}" for i in sorted(set(a.mlp) - set(b.mlp))]
        only_b = [f"attention {i}" for i in sorted(set(b.attention) - set(a.attention))] + \
                 [f"MLP {i}" for i in sorted(set(b.mlp) - set(a.mlp))]
        text += (f"; only {names[0]} skips {join(only_a) or 'nothing else'}, only {names[1]} skips "
                 f"{join(only_b) or 'nothing else'}" if only_a or only_b else "; the two masks are identical")
    return text + "."


def set_tradeoff_sentence(cost_model, search: tuple[SkipSet, float], greedy: tuple[SkipSet, float] | None,
                          ms_rel_tol: float = 1e-3) -> str:
    """The search's set against greedy elimination's set of the same size: which agrees more, which drafts
    cheaper under ``cost_model``, and so whether one was traded for the other or one set is better on both.

    ``search`` / ``greedy``: (skip set, α on the same probe); ``greedy`` None when the search skipped nothing.
    Agreements are counts of positions, so any difference is real; draft costs within ``ms_rel_tol`` are level.
    """
    (s_skip, s_alpha) = search
    if greedy is None:
        return "The search's set skips nothing, so there is no greedy-elimination set of its size to compare with."
    g_skip, g_alpha = greedy
    s_ms, g_ms = cost_model.draft_ms(s_skip), cost_model.draft_ms(g_skip)
    s_f, g_f = predict(cost_model, s_skip, s_alpha).ms_per_token, predict(cost_model, g_skip, g_alpha).ms_per_token
    text = (f"With {s_skip.n_skipped} blocks skipped, the search's set agrees on {s_alpha:.1%} of the probe's "
            f"positions and greedy elimination's on {g_alpha:.1%}; under the cost model a drafted token costs "
            f"{s_ms:.3f} ms with the search's set and {g_ms:.3f} ms with greedy's (predicted f {s_f:.2f} against "
            f"{g_f:.2f} ms/token). ")
    more = 0 if abs(s_alpha - g_alpha) <= 1e-9 else (1 if s_alpha > g_alpha else -1)          # +1: search agrees more
    cheaper = (0 if abs(s_ms - g_ms) <= ms_rel_tol * max(s_ms, g_ms, 1e-12)
               else (1 if s_ms < g_ms else -1))                                             # +1: search drafts cheaper
    missed = " Greedy elimination, one block at a time, missed a set of this size that agrees more."
    if more > 0 and cheaper > 0:
        return text + "The search's set is better on both counts: nothing was traded." + missed
    if more > 0 and cheaper == 0:
        return text + "The search's set agrees more at the same draft cost: nothing was traded." + missed
    if more > 0:
        return text + "The search traded a dearer draft for higher agreement." + missed
    if more == 0 and cheaper > 0:
        return text + ("The two agree equally often and the search's set drafts cheaper: nothing was traded (greedy "
                       "elimination ranks sets by agreement alone and does not see the cost).")
    if more == 0 and cheaper == 0:
        return text + "The two sets are level on both counts."
    if cheaper > 0:
        text += "The search traded agreement for a cheaper draft (it scores f, not agreement): "
        if s_f < g_f * (1 - ms_rel_tol):
            return text + "here the trade paid, its predicted f is the lower."
        return text + ("here it did not pay, greedy's set is predicted faster: a set the search did not find in its "
                       "trials.")
    return text + ("Greedy elimination's set is at least as good on both counts: a set the search did not find in "
                   "its trials.")


def probe_repeated_share(probe, n: int = 4) -> float:
    """Mean share of the probe's greedy continuation tokens that complete an n-gram seen earlier (a loop's share)."""
    shares = []
    for ids, targets, scored in zip(probe.input_ids, probe.targets, probe.scored):
        start = int(scored.nonzero()[0])
        new = targets[scored].tolist()
        shares.append(repeated_share(ids[: start + 1].tolist(), new, n))
    return float(np.mean(shares))


def expected_accepted_per_drafted(alpha: float, d: float) -> float:
    """E[accepted / drafted] with i.i.d. acceptance α and d drafted per step: (α + α² + … + α^d) / d."""
    return (expected_tokens_per_step(alpha, d) - 1.0) / d if d > 0 else float("nan")


def acceptance_sentence(alpha: float, measured: float, d: float, probe_share: float | None = None,
                        run_share: float | None = None, prompt_agreement: float | None = None) -> str:
    """Why a run's accepted / drafted sits below the teacher-forced α, in short sentences: the tokens drafted after
    a rejection (counting); then, for a larger gap, the text (``prompt_agreement``: the teacher-forced agreement on
    the run's own prompt, which separates the text from the condition; the repeated shares when given) and the
    condition (the draft reads the keys and values the full model wrote). ``d``: the run's measured drafted per
    step, not the policy's γ."""
    iid = expected_accepted_per_drafted(alpha, d)
    text = (f"The search's α = {alpha:.3f} is a per-token probability; the run measured accepted / drafted = "
            f"{measured:.3f} with d = {d:.2f} drafted per step. Tokens drafted after a step's first rejection are "
            f"never judged, so i.i.d. acceptance gives (α + α² + … + α^d) / d = {iid:.3f}. ")
    if abs(iid - measured) <= 0.05:
        return text + "That accounts for the gap."
    if measured > iid:
        return text + (f"This run's drafts were accepted more often than that ({measured - iid:+.3f}): on this prompt "
                       f"the set drafted better than on the probe's prompts.")
    text += f"The rest of the gap ({iid - measured:.3f}) is not explained by counting. "
    if probe_share is not None and run_share is not None:
        text += (f"The text: {probe_share:.0%} of the probe's continuation tokens complete a 4-gram seen before, "
                 f"{run_share:.0%} of this run's")
        text += ("; repeated text is easy to draft. " if probe_share >= run_share + 0.2 else ". ")
    if prompt_agreement is not None:
        on_prompt = expected_accepted_per_drafted(prompt_agreement, d)
        explained = abs(on_prompt - measured) <= 0.5 * abs(iid - measured)
        if explained:
            why = "the new text explains most of the gap."
        elif on_prompt < measured:
            why = "the new text explains all of the gap (this prompt is harder for the draft than the probe's)."
        else:
            why = ("the text does not explain it; what is left is the condition (the draft reads keys and values "
                   "the full model wrote).")
        return text + f"On this prompt the teacher-forced agreement is {prompt_agreement:.3f}, which predicts " \
                      f"{on_prompt:.3f}: " + why
    return text + ("The condition: a real draft reads keys and values the full model wrote when it verified, the probe "
                   "its own. This one run does not separate the two.")


def wall_clock_sentence(wall, predicted: float, expected_acc: float | None = None,
                        measured_acc: float | None = None, acc_row: str | None = None) -> str:
    """Each measured speedup (median of interleaved runs, min-max over them when the frame has it) against plain
    decoding and against the modelled prediction, row by row; ``expected_acc`` / ``measured_acc``: accepted /
    drafted the prediction implies and the run measured for ``acc_row`` (the fixed-γ row), the reason given for
    that row only."""
    rows = wall.drop(index="plain decoding")
    parts = []
    for label, row in rows.iterrows():
        lo, hi = row.get("speedup_min", row["speedup"]), row.get("speedup_max", row["speedup"])
        spread = f" (min–max {lo:.2f}–{hi:.2f})" if "speedup_min" in row else ""
        verdict = ("faster than plain decoding" if lo > 1 else "slower than plain decoding" if hi < 1 else
                   "level with plain decoding within the noise")
        if hi < predicted * 0.95:
            verdict += ", below the prediction"
        elif lo > predicted * 1.05:
            verdict += ", above the prediction"
        else:
            verdict += ", about as predicted"
        parts.append(f"{label} {row['speedup']:.2f}x{spread}: {verdict}")
    text = f"Predicted {predicted:.2f}x; measured on this machine: " + "; ".join(parts) + ". "
    if acc_row is None and len(rows):
        acc_row = rows.index[0]
    if expected_acc is not None and measured_acc is not None and measured_acc < expected_acc - 0.1:
        text += (f"The {acc_row} drafts were accepted far less often than the prediction assumed ({measured_acc:.2f} "
                 f"against {expected_acc:.2f} accepted / drafted; the next sentence says why). ")
    if any(r.get("speedup_max", r["speedup"]) < predicted * 0.95 for _, r in rows.iterrows()):
        text += ("The cost model leaves out the decoder's bookkeeping and the prefill, and one prompt on a shared "
                 "machine is a small sample. ")
    return text + ("Greedy speculative output was identical to plain decoding in every run."
                   if bool(wall["identical"].all()) else "But an output DIFFERED from plain decoding: a bug.")
