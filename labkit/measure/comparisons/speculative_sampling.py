"""Speculative sampling from first principles: the two distributions at one real position, the rule that
makes drafting lossless, and a Monte-Carlo check of that rule against two tempting wrong ones.

Notation: p is the target distribution (the full model), q the draft distribution (the model with the blocks
of a skip set removed), both after the same temperature. A drafted token x ~ q is accepted with probability
min(1, p(x)/q(x)); at the first rejection the replacement is drawn from the residual normalise(max(0, p - q))
(Leviathan et al. 2023; Chen et al. 2023). The probability that a drafted token is accepted is

    α = Σ_x q(x) min(1, p(x)/q(x)) = Σ_x min(p(x), q(x)) = 1 - TV(p, q),

and a step that drafts γ tokens emits E = (1 - α^(γ+1)) / (1 - α) tokens on average
(:func:`labkit.measure.costs.analytic.expected_tokens_per_step`).

Everything here is measured on real runs: :class:`RecordingDrafter` wraps the engine's drafter and keeps the
exact p and q every acceptance decision of a :func:`~labkit.core.decoding.speculative_generate` call used.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from ...core.checks import check_int, with_defaults
from ...core.decoding import GenerationResult, autoregressive_generate, speculative_generate
from ...core.drafters import Drafter, SelfDrafter
from ...core.policies import DraftPolicy, FixedK
from ...core.sampling import residual_distribution
from ...core.skip import SkipSet
from ..costs.analytic import expected_tokens_per_step, speedup
from ..harness import phase_costs, timed

__all__ = ["RULES", "SampledPosition", "RecordingDrafter", "record_positions", "alpha", "total_variation",
           "acceptance_probability", "rule_distribution", "simulate_rule", "ChiSquare", "distribution_test",
           "monte_carlo", "chi_square_power", "alpha_curve", "temperature_sweep", "EXACT_TV", "STEP_RULES",
           "two_token_tree", "two_token_joint", "simulate_two_tokens", "multi_token_check",
           "argmax_agreement"]

#: A rule whose closed-form output is within this TV of p is exact (float rounding only).
EXACT_TV = 1e-6

#: The acceptance rules the Monte-Carlo compares: the lossless one and two tempting mistakes.
RULES = {
    "speculative": "x ~ q, accept with min(1, p/q), else draw from normalise(max(0, p − q))",
    "resample from p": "x ~ q, accept with min(1, p/q), else draw from p (the residual forgotten)",
    "greedy draft": "x = argmax q, accept with min(1, p/q), else draw from normalise(max(0, p − q))",
}


@dataclass
class SampledPosition:
    """One drafted token the target tested, with the exact distributions of that decision."""

    step: int                  # which step of the run
    slot: int                  # 0-based index in the step's draft
    position: int              # where the drafted token sits in the sequence
    token: int                 # the drafted token d
    accepted: bool
    p: torch.Tensor            # (V,) target distribution at the run's temperature
    q: torch.Tensor            # (V,) draft distribution at the run's temperature
    temperature: float

    def at(self, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(p, q) at another temperature: both re-warped from the same logits (log p · T_run = logits + c)."""
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        scale = self.temperature / temperature
        return (torch.softmax(torch.log(self.p) * scale, dim=-1), torch.softmax(torch.log(self.q) * scale, dim=-1))

    @property
    def alpha(self) -> float:
        return alpha(self.p, self.q)


class RecordingDrafter(Drafter):
    """Drafts with ``inner`` and keeps the q of every drafted slot and the p the verifier computed (sampling only)."""

    def __init__(self, inner: Drafter):
        self.inner, self.steps = inner, []

    def prepare(self, state, prompt_ids) -> None:
        self.inner.prepare(state, prompt_ids)

    def draft(self, state, budget, policy):
        return self.inner.draft(state, budget, policy)

    def commit(self, state, draft, verdict) -> None:
        if draft.tokens and verdict.p is not None:
            self.steps.append((verdict.start, list(draft.tokens), list(draft.q_dists), verdict.p, verdict.n_accepted))
        self.inner.commit(state, draft, verdict)

    def positions(self, temperature: float) -> list[SampledPosition]:
        """Every drafted token that was tested: the accepted ones and the first rejected one of each step."""
        out = []
        for step, (start, tokens, q_dists, p, n) in enumerate(self.steps):
            for slot in range(min(n + 1, len(tokens))):
                out.append(SampledPosition(step, slot, start + slot, tokens[slot], slot < n, p[slot], q_dists[slot],
                                           temperature))
        return out


def record_positions(model, input_ids, *, skip: SkipSet, temperature: float, max_new_tokens: int,
                     policy: DraftPolicy | None = None, seed: int = 0,
                     weights: str | None = None) -> tuple[GenerationResult, list[SampledPosition]]:
    """One real sampled self-speculative run (``policy`` default FixedK(4), seeded; the draft skips ``skip`` and
    reads ``weights``: None the model's own, "int8" the int8 copies) and its tested positions."""
    recorder = RecordingDrafter(SelfDrafter(model, skip, weights=weights))
    result = speculative_generate(model, input_ids, drafter=recorder, policy=policy or FixedK(4),
                                  max_new_tokens=max_new_tokens, do_sample=True, temperature=temperature,
                                  generator=torch.Generator().manual_seed(seed), eos_token_id=[])
    return result, recorder.positions(temperature)


# ---------------------------------------------------------------------------------------
# the rule, in closed form
# ---------------------------------------------------------------------------------------
def alpha(p: torch.Tensor, q: torch.Tensor) -> float:
    """α = Σ min(p, q): the probability that x ~ q is accepted with min(1, p/q)."""
    return float(torch.minimum(p, q).sum())


def total_variation(p: torch.Tensor, q: torch.Tensor) -> float:
    """TV(p, q) = ½ Σ |p - q| (= 1 - α)."""
    return 0.5 * float((p - q).abs().sum())


def acceptance_probability(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """min(1, p/q) per token (1 where q = 0: such a token is never drafted)."""
    return torch.where(q > 0, torch.clamp(p / q.clamp_min(1e-30), max=1.0), torch.ones_like(p))


def _check_rule(rule: str) -> str:
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(map(repr, RULES))}, got {rule!r}")
    return rule


def rule_distribution(p: torch.Tensor, q: torch.Tensor, rule: str) -> torch.Tensor:
    """The exact distribution of the token a rule emits at one drafted slot (V,)."""
    _check_rule(rule)
    if rule == "greedy draft":
        x = int(q.argmax())
        a = min(1.0, float(p[x] / q[x]))
        out = (1 - a) * residual_distribution(p, q)
        out[x] += a
        return out
    accepted = torch.minimum(p, q)                               # q(x) min(1, p(x)/q(x))
    rejected = 1.0 - float(accepted.sum())
    return accepted + rejected * (residual_distribution(p, q) if rule == "speculative" else p)


def simulate_rule(p: torch.Tensor, q: torch.Tensor, rule: str, n: int, generator: torch.Generator) -> torch.Tensor:
    """Monte-Carlo: ``n`` independent runs of one drafted slot under ``rule``; counts of each emitted token (V,)."""
    _check_rule(rule)
    check_int("n", n, 1)
    if rule == "greedy draft":
        x = torch.full((n,), int(q.argmax()))
    else:
        x = torch.multinomial(q, n, replacement=True, generator=generator)                # (n,) drafts from q
    u = torch.rand(n, generator=generator)
    accept = u * q[x] < p[x]                                                             # u < p/q
    k = int((~accept).sum())
    fallback = p if rule == "resample from p" else residual_distribution(p, q)
    replacement = torch.multinomial(fallback, k, replacement=True, generator=generator) if k else x[:0]
    return torch.bincount(torch.cat([x[accept], replacement]), minlength=p.shape[0])


# ---------------------------------------------------------------------------------------
# is the output distributed as p? a chi-square goodness-of-fit test
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChiSquare:
    statistic: float
    df: int                    # bins - 1
    p_value: float             # nan when fewer than two bins have enough mass to test
    n: int                     # draws

    def passes(self, level: float) -> bool:
        """True unless the test rejects "distributed as p" at ``level`` (a nan p-value never passes)."""
        return self.p_value >= level


def _bins(p: torch.Tensor, n: int, min_expected: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Bin of every token (V,) and expected counts per bin: a bin per token with n p ≥ min_expected, the rest
    pooled into one bin (merged into the smallest kept bin when even the pool is too small)."""
    expected = n * (p.double() / p.double().sum())
    order = torch.argsort(expected, descending=True)
    kept = int((expected >= min_expected).sum())
    bins = torch.empty_like(order)
    bins[order] = torch.clamp(torch.arange(len(order)), max=kept)                 # kept tokens 0..kept-1, rest: kept
    per_bin = torch.zeros(kept + 1, dtype=torch.float64).index_add_(0, bins, expected)
    if per_bin[kept] < min_expected and kept > 0:
        bins[bins == kept] = kept - 1
        per_bin[kept - 1] += per_bin[kept]
        per_bin = per_bin[:kept]
    return bins, per_bin


def distribution_test(counts: torch.Tensor, p: torch.Tensor, *, min_expected: float = 5.0) -> ChiSquare:
    """Pearson's chi-square test of observed token ``counts`` (V,) against the distribution ``p`` (V,), over the
    tokens with enough expected mass (the rest pooled)."""
    from scipy.stats import chisquare

    n = int(counts.sum())
    bins, expected = _bins(p, n, min_expected)
    observed = torch.zeros_like(expected).index_add_(0, bins, counts.double())
    if len(expected) < 2:
        return ChiSquare(0.0, 0, float("nan"), n)
    result = chisquare(observed.numpy(), expected.numpy())
    return ChiSquare(float(result.statistic), len(expected) - 1, float(result.pvalue), n)


def chi_square_power(p: torch.Tensor, emitted: torch.Tensor, n: int, *, level: float = 0.01,
                     min_expected: float = 5.0) -> float:
    """Probability that :func:`distribution_test` with ``n`` draws rejects "distributed as p" when the tokens are
    really drawn from ``emitted`` (non-central chi-square approximation). Against a wrong rule (emitted ≠ p) that is
    the test's *power*; for an exact rule (emitted = p) it is the *false-alarm rate*, = ``level``."""
    from scipy.stats import chi2, ncx2

    bins, expected = _bins(p, n, min_expected)
    if len(expected) < 2:
        return float("nan")
    actual = torch.zeros_like(expected).index_add_(0, bins, n * emitted.double() / emitted.double().sum())
    noncentrality = float(((actual - expected) ** 2 / expected).sum())
    df = len(expected) - 1
    critical = chi2.ppf(1 - level, df)
    return float(chi2.sf(critical, df)) if noncentrality == 0 else float(ncx2.sf(critical, df, noncentrality))



def monte_carlo(p: torch.Tensor, q: torch.Tensor, n: int, *, seed: int = 0, level: float = 0.01) -> list[dict]:
    """Every rule of :data:`RULES` run ``n`` times at one slot, each tested against p: one dict per rule with the
    counts, the test, whether it is consistent with p at ``level``, the exact TV distance of the rule's output
    from p, whether that output is exactly p (``exact``), and ``rejection_rate``: how often the test at this ``n``
    rejects the rule: its power for a wrong rule, its false-alarm rate (= ``level``) for an exact one."""
    out = []
    for rule in RULES:
        counts = simulate_rule(p, q, rule, n, torch.Generator().manual_seed(seed))
        test = distribution_test(counts, p)
        emitted = rule_distribution(p, q, rule)
        tv = total_variation(emitted, p)
        out.append({"rule": rule, "counts": counts, "statistic": test.statistic, "df": test.df,
                    "p_value": test.p_value, "consistent_with_p": test.passes(level), "level": level, "n": n,
                    "tv_to_p": tv, "exact": tv < EXACT_TV,
                    "rejection_rate": chi_square_power(p, emitted, n, level=level)})
    return out


# ---------------------------------------------------------------------------------------
# a whole step stays exact: two-token sequences from a tiny distribution tree
# ---------------------------------------------------------------------------------------
#: How the first two emitted tokens come about (γ drafted per step); the last one is the tempting mistake.
STEP_RULES = {
    "γ = 1, bonus from p": "draft d1 ~ q; accepted: the bonus x2 ~ p(·|x1); rejected: the next step drafts x2",
    "γ = 2, rest discarded": "draft d1, d2 ~ q; after a rejection at d1 the drafted d2 is thrown away",
    "γ = 2, rest kept (wrong)": "as above, but after a rejection at d1 the drafted d2 is kept as x2",
}


def two_token_tree(vocab: int = 4, *, seed: int = 0) -> dict:
    """A tiny random model of two positions: p1, q1 (V,) and p2[x1], q2[x1] (V, V) rows, each uniform on the
    simplex (Dirichlet(1): normalised Exp(1) draws from a seeded generator; the global RNG is left alone)."""
    check_int("vocab", vocab, 2)
    g = torch.Generator().manual_seed(seed)

    def draw(*shape):
        e = -torch.log(torch.rand(*shape, vocab, generator=g, dtype=torch.float64).clamp_min(1e-300))
        return e / e.sum(-1, keepdim=True)

    return {"p1": draw(), "q1": draw(), "p2": draw(vocab), "q2": draw(vocab)}


def two_token_joint(tree: dict) -> torch.Tensor:
    """The target's joint of the first two tokens, p(x1, x2) = p1(x1) p2(x2 | x1), flattened (V²,)."""
    return (tree["p1"][:, None] * tree["p2"]).reshape(-1)


def _slot(p: torch.Tensor, q: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One drafted slot per row of ``p``, ``q`` (n, V): (drafted, accepted, emitted) with the speculative rule."""
    d = torch.multinomial(q, 1, generator=g)[:, 0]
    rows = torch.arange(len(d))
    accepted = torch.rand(len(d), generator=g) * q[rows, d] < p[rows, d]
    residual = (p - q).clamp_min(0)
    residual = residual / residual.sum(-1, keepdim=True).clamp_min(1e-30)
    replacement = torch.multinomial(residual.clamp_min(1e-30), 1, generator=g)[:, 0]
    return d, accepted, torch.where(accepted, d, replacement)


def simulate_two_tokens(tree: dict, rule: str, n: int, *, seed: int = 0) -> torch.Tensor:
    """Counts of the first two emitted tokens (x1, x2), flattened (V²,), over ``n`` runs of ``rule``
    (:data:`STEP_RULES`). After a rejection the next step restarts from the emitted prefix x1: a fresh slot
    drafts x2 from q2[x1] and tests it against p2[x1]."""
    if rule not in STEP_RULES:
        raise ValueError(f"rule must be one of {', '.join(map(repr, STEP_RULES))}, got {rule!r}")
    check_int("n", n, 1)
    g = torch.Generator().manual_seed(seed)
    V = tree["p1"].shape[0]
    d1, ok1, x1 = _slot(tree["p1"].expand(n, V), tree["q1"].expand(n, V), g)
    _, _, restart = _slot(tree["p2"][x1], tree["q2"][x1], g)                # the next step, from prefix x1
    if rule.startswith("γ = 1"):
        bonus = torch.multinomial(tree["p2"][x1], 1, generator=g)[:, 0]
        x2 = torch.where(ok1, bonus, restart)
    else:
        d2, _, second = _slot(tree["p2"][d1], tree["q2"][d1], g)            # slot 2 is tested only after d1 passed
        x2 = torch.where(ok1, second, d2 if "kept" in rule else restart)
    return torch.bincount(x1 * V + x2, minlength=V * V)


def multi_token_check(tree: dict, n: int, *, seed: int = 0, level: float = 0.01) -> list[dict]:
    """Every rule of :data:`STEP_RULES` run ``n`` times, its empirical joint of (x1, x2) tested against p's joint
    by :func:`distribution_test`: one dict per rule (rule, n, tv: TV(empirical, joint), p_value, consistent_with_p,
    and ``tv_noise``: the TV of ``n`` draws straight from the joint, the distance sampling alone leaves)."""
    joint = two_token_joint(tree)
    direct = torch.multinomial(joint, n, replacement=True, generator=torch.Generator().manual_seed(seed + 99))
    tv_noise = total_variation(torch.bincount(direct, minlength=len(joint)).double() / n, joint.double())
    out = []
    for i, rule in enumerate(STEP_RULES):
        counts = simulate_two_tokens(tree, rule, n, seed=seed + i)
        test = distribution_test(counts, joint)
        out.append({"rule": rule, "n": n, "level": level, "tv": total_variation(counts.double() / n, joint.double()),
                    "statistic": test.statistic, "df": test.df, "p_value": test.p_value,
                    "consistent_with_p": test.passes(level), "tv_noise": tv_noise})
    return out


def argmax_agreement(positions: list[SampledPosition]) -> float:
    """Share of ``positions`` where argmax p = argmax q: the α that both distributions tend to as T → 0 (each
    becomes a point mass on its argmax, and Σ min(p, q) is 1 where those agree and 0 where they do not)."""
    if not positions:
        raise ValueError("no positions: the run drafted nothing")
    return statistics.fmean(float(int(pos.p.argmax()) == int(pos.q.argmax())) for pos in positions)


def alpha_curve(positions: list[SampledPosition], temperatures) -> list[float]:
    """Mean α over ``positions`` with p and q re-warped to each temperature (same contexts, other temperature)."""
    if not positions:
        raise ValueError("no positions: the run drafted nothing")
    return [statistics.fmean(alpha(*pos.at(t)) for pos in positions) for t in temperatures]


# ---------------------------------------------------------------------------------------
# real runs across temperatures
# ---------------------------------------------------------------------------------------
def _check_temperatures(temperatures) -> list[float]:
    values = [float(t) for t in temperatures]
    if not values or any(not t > 0 for t in values):
        raise ValueError(f"temperatures must be a non-empty list of numbers > 0, got {temperatures!r}")
    return values


def _sweep_run(model, ids, skip, temperature, gamma, max_new_tokens, seed, weights=None) -> dict:
    """Plain sampling, then speculative sampling, on one prompt at one temperature (same seed): their numbers
    (each call timed by :func:`labkit.measure.harness.timed`)."""
    plain, plain_s = timed(lambda: autoregressive_generate(
        model, ids, max_new_tokens, do_sample=True, temperature=temperature,
        generator=torch.Generator().manual_seed(seed), eos_token_id=[]))
    (result, positions), spec_s = timed(lambda: record_positions(
        model, ids, skip=skip, temperature=temperature, policy=FixedK(gamma), max_new_tokens=max_new_tokens,
        seed=seed, weights=weights))
    s = result.trace.summary()
    return {"plain_s": plain_s, "plain_tokens": len(plain.new_tokens), "spec_s": spec_s,
            "spec_tokens": s["emitted"], "steps": s["steps"], "drafted": s["drafted"], "accepted": s["accepted"],
            "tested": len(positions), "alpha_sum": sum(pos.alpha for pos in positions), "draft_s": s["draft_s"],
            "verify_s": s["verify_s"]}


def _speedup_spread(runs: list[dict]) -> tuple[float, float]:
    """(min, max) over repetitions of plain ms per token ÷ speculative ms per token (each repetition's prompts
    summed): the noise a speedup comparison must exceed."""
    by_rep: dict[int, list[dict]] = {}
    for r in runs:
        by_rep.setdefault(r.get("rep", 0), []).append(r)
    ratios = []
    for rs in by_rep.values():
        plain = sum(r["plain_s"] for r in rs) / sum(r["plain_tokens"] for r in rs)
        ratios.append(plain / (sum(r["spec_s"] for r in rs) / sum(r["spec_tokens"] for r in rs)))
    return min(ratios), max(ratios)


def _sweep_row(temperature: float, runs: list[dict], gamma: int) -> dict:
    lo, hi = _speedup_spread(runs)
    total = {k: sum(r[k] for r in runs) for k in runs[0] if k != "rep"}
    plain_ms = 1e3 * total["plain_s"] / total["plain_tokens"]
    spec_ms = 1e3 * total["spec_s"] / total["spec_tokens"]
    predicted = total["alpha_sum"] / total["tested"] if total["tested"] else float("nan")
    c, c_v = phase_costs(total["draft_s"], total["drafted"], total["verify_s"], total["steps"], plain_ms)
    c = c if total["drafted"] else float("nan")
    E = expected_tokens_per_step(predicted, gamma) if total["tested"] else float("nan")
    return {"temperature": temperature, "gamma": gamma,
            "measured_alpha": total["accepted"] / total["tested"] if total["tested"] else float("nan"),
            "predicted_alpha": predicted, "tested": total["tested"], "accepted": total["accepted"],
            "acceptance_rate": total["accepted"] / total["drafted"] if total["drafted"] else float("nan"),
            "tokens_per_step": total["spec_tokens"] / total["steps"], "expected_tokens_per_step": E,
            "c": c, "c_v": c_v, "plain_ms_per_token": plain_ms, "spec_ms_per_token": spec_ms,
            "measured_speedup": plain_ms / spec_ms, "speedup_min": lo, "speedup_max": hi,
            "predicted_speedup": speedup(predicted, gamma, c) if total["tested"] else float("nan"),
            "predicted_speedup_cv": E / (gamma * c + c_v)}


#: How :func:`temperature_sweep` runs, by name, with its defaults.
SWEEP_DEFAULTS = {"max_new_tokens": 48, "repeats": 1, "seed": 0, "progress": True}


def temperature_sweep(model, prompt_ids: list[torch.Tensor], *, skip: SkipSet, temperatures, gamma: int = 4,
                      weights: str | None = None, **run):
    """Real sampled runs across temperatures, each beside plain sampling of the same prompt with the same seed,
    interleaved (prompt by prompt, temperature by temperature, plain then speculative).

    One row per temperature: measured α (accepted / tested drafted tokens) beside the α that the same decisions'
    p and q predict (mean Σ min(p, q)); measured tokens per step beside Leviathan's E(α, γ) (FixedK(γ) drafts);
    the measured wall-clock speedup over plain sampling beside Leviathan's E / (γ c + 1) and E / (γ c + c_v),
    c and c_v measured in the same runs (relative to a plain step); speedup_min / speedup_max: the spread of the
    speedup over the ``repeats`` repetitions. A pandas DataFrame. ``run``, by name (:data:`SWEEP_DEFAULTS`):
    ``max_new_tokens``, ``repeats``, ``seed``, ``progress``; ``weights``: the draft's ("int8" or None).
    """
    import pandas as pd

    max_new_tokens, repeats, seed, progress = with_defaults("temperature_sweep", run, SWEEP_DEFAULTS).values()
    temperatures = _check_temperatures(temperatures)
    check_int("repeats", repeats, 1)
    if not prompt_ids:
        raise ValueError("give at least one prompt")
    _sweep_run(model, prompt_ids[0], skip, temperatures[0], gamma, 8, seed, weights)          # warm-up
    runs = {t: [] for t in temperatures}
    bar = tqdm(total=repeats * len(prompt_ids) * len(temperatures), desc="temperatures", disable=not progress)
    for rep in range(repeats):
        for i, ids in enumerate(prompt_ids):
            for t in temperatures:
                run = _sweep_run(model, ids, skip, t, gamma, max_new_tokens, seed + 1000 * rep + i, weights)
                runs[t].append({**run, "rep": rep})
                bar.update()
    bar.close()
    return pd.DataFrame([_sweep_row(t, runs[t], gamma) for t in temperatures])
