"""The engine, in the paper's order (imports torch and transformers only).

Where and in what precision a model runs, and a clock that waits for the device: ``devices``.
Which models and blocks: ``architectures``, ``skip`` (SkipSet, the swap that removes blocks), ``cache``, ``forward``,
``state``, ``checks`` (argument checks). How q and p are drawn: ``sampling``. When drafting stops: ``policies``,
``gate``. Which blocks each draft skips: ``strategies`` (a package, one module per paper). The draft's weights and
head: ``draft_weights``, ``draft_head``, and ``draft_config`` (one draft configuration as data). What a draft
is: ``draft`` (a chain or a tree); how a tree grows and is verified: ``tree_shapes``, ``tree``. Who drafts:
``drafters``, ``width`` (drafts that compute only some MLP neurons: contextual sparsity and pruning),
``early_exit``, ``medusa`` (multi-token heads), ``lookahead`` (n-grams from Jacobi iterations),
``recycling`` (the target's own top-k, recycled), ``cascade`` (a draft drafted by cheaper drafts;
``labkit.cascade``). How the target verifies: ``verify``. What one generate call asks for (a draft in one
argument, its stop rule, the sampling; the older keywords converted): ``request``. What a step is worth:
``expectation``. The loop: ``decoding``; what it recorded: ``trace``. Many sequences at once:
``batch`` (one cache, per-row positions and a mask of valid columns), ``batch_decoding`` (the batched loops).
Another way to decode in parallel: ``jacobi``, and what it recorded: ``jacobi_trace``."""
from .architectures import SUPPORTED_ARCHITECTURES, check_supported
from .batch import BatchConfig
from .batch_decoding import BatchResult, LoadPolicy
from .cache import crop_to, new_cache
from .cascade import CascadeDrafter
from .decoding import GenerationResult, autoregressive_generate, speculative_generate
from .draft_config import DraftConfig
from .draft_head import DraftHead
from .drafters import Draft, Drafter, LookupDrafter, ModelDrafter, SelfDrafter, ngram_lookup
from .early_exit import EarlyExitDrafter
from .forward import forward_tokens
from .gate import TargetConfidenceGate
from .jacobi import jacobi_generate
from .jacobi_trace import JacobiIteration, JacobiTrace
from .lookahead import LookaheadDrafter, lookahead
from .medusa import HeadsDrafter, MedusaHeads
from .policies import AdaptiveThreshold, DraftPolicy, FixedK, StaticThreshold
from .recycling import TokenRecyclingDrafter, token_recycling
from .sampling import Warp
from .skip import SkipSet, format_skip_set, parse_skip_set, skipping
from .strategies import InContextStrategy, KnapsackStrategy, OnTheFlyStrategy, SkipStrategy, StaticStrategy
from .trace import StepRecord, Trace
from .tree_shapes import draft_tree
from .width import WidthPredictors, WidthSet, width_drafter

__all__ = [
    "AdaptiveThreshold", "BatchConfig", "BatchResult",
    "CascadeDrafter", "Draft", "DraftConfig", "DraftHead", "DraftPolicy", "Drafter",
    "EarlyExitDrafter", "FixedK",
    "GenerationResult", "InContextStrategy", "JacobiIteration", "JacobiTrace", "KnapsackStrategy", "LookupDrafter",
    "HeadsDrafter", "LoadPolicy",
    "MedusaHeads", "ModelDrafter", "OnTheFlyStrategy", "SUPPORTED_ARCHITECTURES", "SelfDrafter",
    "SkipSet", "SkipStrategy",
    "StaticStrategy", "StaticThreshold", "StepRecord", "TargetConfidenceGate", "Trace", "Warp",
    "autoregressive_generate", "check_supported", "crop_to", "format_skip_set", "forward_tokens",
    "jacobi_generate",
    "draft_tree", "LookaheadDrafter", "TokenRecyclingDrafter", "lookahead", "token_recycling",
    "new_cache", "ngram_lookup", "parse_skip_set", "skipping", "speculative_generate",
    "WidthPredictors", "WidthSet", "width_drafter",
]
