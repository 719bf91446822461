"""Skip strategies: their building blocks compute what they claim, they keep visible state, and they leave the
model and the cache exactly as they found them (equality with greedy decoding: tests/core/test_decoding.py)."""
import itertools
import random
from types import SimpleNamespace

import pytest
import torch

from labkit import AdaptiveThreshold, FixedK, SkipSet, autoregressive_generate, skipping, speculative_generate
from labkit.core.cache import crop_to, new_cache
from labkit.core.forward import forward_tokens, model_output
from labkit.core.sampling import Warp
from labkit.core.state import DecodingState
from labkit.core.strategies import (
    InContextStrategy,
    KnapsackStrategy,
    Ledger,
    OnTheFlyStrategy,
    StaticStrategy,
    capture_layer_calls,
    knapsack,
    knapsack_set,
    layer_dp,
    window_matchness,
)
from labkit.core.strategies.base import Probation, SmoothedAcceptance
from labkit.core.strategies.on_the_fly import _surrogate_proposal
from labkit.core.verify import target_forward

from tiny_models import ARCHITECTURES, tiny_model

L, VOCAB = 4, 97
COSTS = {"attention_ms": [0.3] * L, "mlp_ms": [0.1] * L, "fixed_ms": 0.3,
         "verify_ms": [1.9 + 0.1 * k for k in range(13)]}


def strategies(seed: int = 0) -> dict:
    """Every strategy, set to act at every opportunity (budget 1), so the tests exercise their side computations."""
    return {
        "static": StaticStrategy(SkipSet(mlp=[1, 2])),
        "on-the-fly": OnTheFlyStrategy(SkipSet(attention=[2], mlp=[1, 3]), every=1, budget=1.0, seed=seed,
                                       trust_initial=False, trial_tokens=1),
        "in-context": InContextStrategy(SkipSet(attention=[3], mlp=[2]), every=1, budget=1.0, redo_below=1.0,
                                        trial_tokens=1),
        "knapsack": KnapsackStrategy(COSTS, [2.0, .1, .2, .1, .3, .1, .1, .2], anchor=SkipSet(mlp=[1]),
                                     anchor_alpha=0.9, min_tokens=2, margin=0.0),
    }


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param, n_layers=L, vocab_size=VOCAB)


def greedy_state(model, n_prompt=6, n_new=20, seed=0):
    """A decoding state after plain greedy decoding: every token but the last in the cache."""
    ids = torch.randint(0, VOCAB, (1, n_prompt), generator=torch.Generator().manual_seed(seed))
    tokens = autoregressive_generate(model, ids, n_new).sequences[0].tolist()
    cache = new_cache(model)
    with torch.inference_mode():
        forward_tokens(model, torch.tensor([tokens[:-1]]), 0, cache)
    return DecodingState(model, cache, tokens, n_prompt, Warp(), frozenset())


def test_window_matchness_is_teacher_forced_agreement_and_leaves_the_cache(model):
    state = greedy_state(model)
    before = [(layer.keys.clone(), layer.values.clone()) for layer in state.cache.layers]
    sets = [SkipSet(), SkipSet(mlp=[1]), SkipSet(attention=[1, 3], mlp=[0])]
    scores = window_matchness(model, state, torch.tensor([s.to_mask(L) for s in sets]), 8).tolist()
    assert scores[0] == 1.0                                       # the full model predicts its own greedy tokens
    T, begin = len(state.tokens), len(state.tokens) - 9
    for skip, score in zip(sets, scores):                         # the same number, one set at a time
        cache = new_cache(model)
        with torch.inference_mode():
            forward_tokens(model, torch.tensor([state.tokens[:begin]]), 0, cache)
            with skipping(model, skip):
                logits = model_output(model, torch.tensor([state.tokens[begin:T - 1]]), begin, cache).logits[0]
        expected = (logits.argmax(-1) == torch.tensor(state.tokens[begin + 1:])).float().mean().item()
        assert score == pytest.approx(expected)
    for (k, v), layer in zip(before, state.cache.layers):
        assert torch.equal(k, layer.keys) and torch.equal(v, layer.values)


def test_layer_dp_reproduces_the_full_model_when_nothing_is_skipped(model):
    """The DP re-runs each decoder layer on candidate states; with nothing skipped it must land exactly on the
    target's own hidden states (cosine 1 after every layer), for the set in force too."""
    state = greedy_state(model, n_new=12)
    tokens, T = list(state.tokens), len(state.tokens)
    crop_to(state.cache, T - 5)
    state.tokens = tokens[:T - 4]                               # the pending token; 3 drafted tokens to verify
    with capture_layer_calls(model) as captured:
        _, hidden = target_forward(state, tokens[T - 4:T - 1], hidden_states=True)
    crop_to(state.cache, T - 3)                                 # two accepted
    mask, cosines, (followed,) = layer_dp(model, captured, hidden, 2, state.cache, T - 5 + 2, 0,
                                          follow=[[False] * 2 * L])
    assert mask == (False,) * 2 * L
    assert cosines == pytest.approx([1.0] * L, abs=1e-5) and followed == pytest.approx([1.0] * L, abs=1e-5)
    mask, cosines, _ = layer_dp(model, captured, hidden, 2, state.cache, T - 5 + 2, 3)
    assert sum(mask) == 3 and len(cosines) == L and all(-1.0 <= c <= 1.0 + 1e-6 for c in cosines)


def test_knapsack_matches_brute_force():
    rng = random.Random(0)
    for _ in range(20):
        n = rng.randint(2, 7)
        savings = [rng.choice([0.1, 0.2, 0.3, 0.5]) for _ in range(n)]
        values = [rng.random() for _ in range(n)]
        least, takes = knapsack(savings, values, 0.1)
        units = [round(s / 0.1) for s in savings]
        for t in range(len(least)):
            combos = [c for c in itertools.product([0, 1], repeat=n) if sum(u * x for u, x in zip(units, c)) == t]
            best = min((sum(v * x for v, x in zip(values, c)) for c in combos), default=float("inf"))
            assert float(least[t]) == pytest.approx(best)
            if combos:
                chosen = knapsack_set(takes, units, t)
                assert sum(u for u, x in zip(units, chosen) if x) == t
                assert sum(v for v, x in zip(values, chosen) if x) == pytest.approx(best)


def test_surrogate_proposes_the_blocks_that_cost_least():
    rng = random.Random(1)
    harm = [0.3, 0.0, 0.05, 0.2, 0.01, 0.4, 0.02, 0.1]           # matchness lost by skipping each block
    history = {}
    for _ in range(40):
        mask = tuple(rng.random() < 0.4 for _ in harm)
        history[mask] = 1.0 - sum(h for h, m in zip(harm, mask) if m) + rng.gauss(0, 0.01)
    assert _surrogate_proposal(history, 3) == tuple(b in (1, 4, 6) for b in range(8))


def test_ledger_budget():
    ledger = Ledger(decode_s=1.0, select_s=0.05)
    assert ledger.affords(0.05, 0.1) and not ledger.affords(0.06, 0.1)
    assert ledger.share == pytest.approx(0.05)


def test_strategies_record_their_sets_state_and_time(model):
    ids = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(2))
    for name, strategy in strategies().items():
        out = speculative_generate(model, ids, skip=strategy, policy=FixedK(3), max_new_tokens=30)
        steps = [s for s in out.trace.steps if s.n_drafted]
        assert all(isinstance(s.skip, SkipSet) for s in steps), name
        assert all(s.select_s >= 0 and s.draft_s >= 0 and s.verify_s >= 0 for s in out.trace.steps)
        summary = out.trace.summary()
        total = summary["draft_s"] + summary["verify_s"] + summary["select_s"]
        assert summary["ms_per_token"] == pytest.approx(1e3 * total / summary["emitted"])
        state = strategy.state()
        assert state["strategy"] == name and state["skip"] == str(steps[-1].skip)
        if name != "static":
            assert summary["select_s"] > 0, name                    # it did choose, and the time was recorded


def test_strategies_learn_and_reset(model):
    ids = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(4))
    s = strategies()
    for _ in range(2):                                            # state carries across calls
        for strategy in s.values():
            speculative_generate(model, ids, skip=strategy, policy=AdaptiveThreshold(), max_new_tokens=24)
    assert s["on-the-fly"].rounds > 0 and s["on-the-fly"].history
    assert s["in-context"].n_dp > 0
    assert len(s["knapsack"].measured) > 1 and s["knapsack"].scale != 1.0
    for strategy in s.values():
        assert strategy.ledger.decode_s > 0
        strategy.reset()
        assert strategy.ledger.select_s == 0.0
    assert s["on-the-fly"].rounds == 0 and not s["on-the-fly"].history
    assert s["in-context"].n_dp == 0 and s["in-context"].current == SkipSet(attention=[3], mlp=[2])
    assert not s["knapsack"].measured and s["knapsack"].current == SkipSet(mlp=[1])


def test_a_strategy_serves_one_model_shape():
    strategy = OnTheFlyStrategy(SkipSet(mlp=[1]))
    speculative_generate(tiny_model("llama", n_layers=4), torch.tensor([[1, 2, 3]]), skip=strategy, max_new_tokens=4)
    with pytest.raises(ValueError, match="4-layer model"):
        speculative_generate(tiny_model("llama", n_layers=2), torch.tensor([[1, 2, 3]]), skip=strategy,
                             max_new_tokens=4)


def test_bad_arguments_name_themselves():
    with pytest.raises(TypeError, match="skip strategy"):
        speculative_generate(tiny_model("llama"), torch.tensor([[1, 2]]), skip="attention=1", max_new_tokens=2)
    with pytest.raises(ValueError, match="budget"):
        OnTheFlyStrategy(SkipSet(), budget=2.0)
    with pytest.raises(ValueError, match="window"):
        OnTheFlyStrategy(SkipSet(), window=0)
    with pytest.raises(TypeError, match="initial"):
        InContextStrategy([1, 2])
    with pytest.raises(TypeError, match="verify_ms"):
        KnapsackStrategy({"attention_ms": [1.0], "mlp_ms": [1.0], "fixed_ms": 1.0}, [0.1, 0.1])
    with pytest.raises(ValueError, match="2L = 8 blocks"):
        KnapsackStrategy(COSTS, [0.1] * 7)
    with pytest.raises(ValueError, match="n_skipped"):
        speculative_generate(tiny_model("llama"), torch.tensor([[1, 2]]),
                             skip=InContextStrategy(SkipSet(), n_skipped=9), max_new_tokens=2)


def test_knapsack_proposes_by_model_and_keeps_what_measures_fastest():
    k = KnapsackStrategy(COSTS, [2.0, .1, .2, .1, .3, .1, .1, .2], anchor=SkipSet(mlp=[1]), anchor_alpha=0.9,
                         min_tokens=10, margin=0.05)
    k.n_layers = L
    assert k.current == SkipSet(mlp=[1])
    proposal = k._untried()
    # the vectorised ranking agrees with the one-set formula: no knapsack solution is predicted faster
    solutions = {SkipSet.from_mask(knapsack_set(k.takes, k.units, t)) for t in k.saving_t}
    assert max(k.predicted_rate(z)[0] for z in solutions) == pytest.approx(k.predicted_rate(proposal)[0])
    rate_now = k.predicted_rate(k.current)[0]
    k.measured[k.current] = [20.0, 20.0 / rate_now]                # measured exactly as predicted
    k._decide()
    assert k.current == proposal                                    # predicted faster: try it
    k.measured[proposal] = [20.0, 20.0 / (0.5 * rate_now)]          # it measures at half the anchor's rate
    k._decide()
    assert k.current != proposal and k.n_moves == 2                 # leaves it, never to return while slower
    assert k.state()["sets_tried"] == 2


def test_probation_goes_back_to_the_best_measured_set_and_drops_the_worse():
    p = Probation(tokens=8)
    for _ in range(3):
        assert p.count("old", 4, 3) is None               # the start set: 9 of 12 (0.75)
    p.moved()                                             # a proxy puts "new" in force
    assert p.settling and p.count("new", 4, 1) is None    # 4 drafted: not compared yet, no other move meanwhile
    assert p.count("new", 4, 1) == "old"                  # 2 of 8 < 0.75: back to the best measured
    assert p.rejected == {"new"} and p.acceptance("old") == 0.75 and p.settling
    assert p.wait(4) == 8                                 # the proxy was wrong once: search half as often


def test_probation_keeps_a_set_that_drafts_as_well():
    p = Probation(tokens=8)
    p.count("old", 8, 6)
    p.moved()
    assert p.count("new", 8, 6) is None and not p.rejected and not p.settling
    assert p.count("new", 8, 8) is None                   # better still: it is the best now
    assert p.count("old", 8, 0) == "new" and p.rejected == {"old"}     # and the old set, back in force, is not


def test_acceptance_estimate_counts_judged_tokens():
    a = SmoothedAcceptance(0.5, 1.0)
    a.update(4, 4)                                        # all accepted: stays 1
    assert a.value == 1.0
    a.update(4, 1)                                        # one accepted (1), then the first rejected (0)
    assert a.value == pytest.approx(0.5)                  # the two tokens after it were never judged


def _verdict(n_accepted):
    return SimpleNamespace(n_accepted=n_accepted, hidden_states=None)


def test_on_the_fly_trusts_its_start_set_until_acceptance_falls(model):
    trusting = OnTheFlyStrategy(SkipSet(mlp=[1]), restart_below=0.7, trust_initial=True).bind(model)
    assert trusting.phase == "settled"
    cold = OnTheFlyStrategy(SkipSet(mlp=[1])).bind(model)                 # SWIFT's cold start, the default
    assert cold.phase == "optimising"
    for _ in range(20):
        trusting._observe(None, 0, _verdict(0), 4)
    assert trusting.phase == "optimising"                 # the target says the set fails: search


def test_strategies_go_back_when_a_move_drafts_worse(model):
    fly = OnTheFlyStrategy(SkipSet(mlp=[1]), trial_tokens=4).bind(model)
    old = fly.incumbent
    new = old[1:] + old[:1]                               # as many blocks skipped, others
    fly._observe(None, 0, _verdict(4), 4)
    fly.probation.moved()
    fly.incumbent, fly.phase = new, "optimising"
    fly._observe(None, 0, _verdict(0), 4)
    assert fly.incumbent == old and fly.phase == "settled" and fly.state()["sets_dropped"] == 1
    start, other = SkipSet(mlp=[1]), SkipSet(attention=[1])
    ctx = InContextStrategy(start, trial_tokens=4).bind(model)
    ctx._observe(None, 0, _verdict(4), 4)
    ctx.probation.moved()
    ctx.current, ctx.same_in_a_row = other, 0
    ctx._observe(None, 0, _verdict(1), 4)
    assert ctx.current == start and ctx.settled and other in ctx.probation.rejected
