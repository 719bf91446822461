"""Skip strategies: the set of skipped blocks, chosen again before every draft, so it can follow the text.

Notation as in :mod:`labkit.core.decoding`: p target, q draft, α per-token acceptance probability,
accepted/drafted the measured acceptance, γ max draft, d drafted per step, c = draft cost per drafted token /
full step, c_v = verify cost per step / full step. A skip set z removes blocks (attention or MLP of a layer);
the draft is the model without them.

A :class:`SkipStrategy` is asked ``choose(state) -> SkipSet`` before each self-draft and told
``observe(state, start, verdict, n_drafted)`` after each verification (``n_drafted``: tokens its set drafted
in that step, 0 when prompt lookup drafted it). It never touches what is emitted (verification decides that) nor the
shared KV cache (side computations run on :func:`~labkit.core.cache.fork_cache`), so decoding stays lossless
whatever it chooses. Four strategies, each after a paper:

- :class:`StaticStrategy`: one fixed set (Draft & Verify with a searched set);
- :class:`OnTheFlyStrategy` (SWIFT, Xia et al. 2025): candidates scored by teacher-forced *matchness* on the
  recent context in one batched forward; mostly random search with a model-based proposal every few rounds;
  it stops optimising once matchness is high and starts again when acceptance falls;
- :class:`InContextStrategy` (CLaSp, Chen et al. 2025): a dynamic program over (layer, blocks skipped) keeps,
  for every count, the set whose hidden state is closest (cosine) to the full model's from the last verification;
- :class:`KnapsackStrategy` (KnapSpec): attention and MLP blocks chosen by a 0/1 knapsack that maximises the
  expected tokens per unit of time, with block costs from a latency model and values from measured importance.

Choosing costs time. Every strategy keeps a :class:`~.base.Ledger` (decode time seen, time spent choosing) and runs
its expensive work only while that stays within ``budget`` (a share of decode time).

A proxy (matchness on 16 tokens, cosine at one position) can prefer a set that drafts worse. On-the-fly and
in-context therefore let the target have the last word (:class:`~.base.Probation`): every set's accepted/drafted is
counted while it drafts, a set that drafts worse than the best one measured is dropped for good and the strategy
goes back to that one, and each dropped set doubles the wait before the next search. On-the-fly searches as soon as
its start set has drafted a trial's worth of tokens (SWIFT's cold start; ``trust_initial=True`` waits until the
start set's acceptance falls), in-context only once acceptance falls.

Modules: :mod:`.base` (the interface, its time ledger, the acceptance trackers two strategies share, and
:class:`StaticStrategy`), then one module per paper: :mod:`.on_the_fly`, :mod:`.in_context`, :mod:`.knapsack`.
"""
from .base import STRATEGY_NAMES, Ledger, SkipStrategy, StaticStrategy
from .in_context import InContextStrategy, LayerChoice, capture_layer_calls, layer_dp, replay_layer
from .knapsack import BlockCosts, KnapsackStrategy, knapsack, knapsack_set
from .on_the_fly import OnTheFlyStrategy, window_matchness

__all__ = ["SkipStrategy", "Ledger", "StaticStrategy", "OnTheFlyStrategy", "InContextStrategy", "KnapsackStrategy",
           "BlockCosts", "window_matchness", "layer_dp", "capture_layer_calls", "replay_layer", "LayerChoice",
           "knapsack", "knapsack_set", "STRATEGY_NAMES"]
