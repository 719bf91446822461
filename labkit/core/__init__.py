"""The engine, in the paper's order: which blocks to skip (and strategies that choose them), who drafts, when
drafting stops, how the target verifies, what was recorded. Imports torch and transformers only."""
from .architectures import SUPPORTED_ARCHITECTURES, check_supported
from .cache import crop_to, new_cache
from .decoding import GenerationResult, autoregressive_generate, speculative_generate
from .draft_config import DraftConfig
from .draft_head import DraftHead
from .drafters import (
    Draft,
    Drafter,
    LookupDrafter,
    ModelDrafter,
    SelfDrafter,
    ngram_lookup,
)
from .early_exit import EarlyExitDrafter
from .forward import forward_tokens
from .gate import TargetConfidenceGate
from .jacobi import jacobi_generate
from .policies import AdaptiveThreshold, DraftPolicy, FixedK, StaticThreshold
from .sampling import Warp
from .skip import SkipSet, format_skip_set, parse_skip_set, skipping
from .strategies import (
    InContextStrategy,
    KnapsackStrategy,
    OnTheFlyStrategy,
    SkipStrategy,
    StaticStrategy,
)
from .trace import JacobiIteration, JacobiTrace, StepRecord, Trace

__all__ = [
    "AdaptiveThreshold", "Draft", "DraftConfig", "DraftHead", "DraftPolicy", "Drafter", "EarlyExitDrafter", "FixedK", "GenerationResult",
    "InContextStrategy", "JacobiIteration", "JacobiTrace", "KnapsackStrategy", "LookupDrafter", "ModelDrafter",
    "OnTheFlyStrategy", "SUPPORTED_ARCHITECTURES", "SelfDrafter", "SkipSet", "SkipStrategy", "StaticStrategy",
    "StaticThreshold", "StepRecord", "TargetConfidenceGate", "Trace", "Warp", "autoregressive_generate",
    "check_supported", "crop_to", "format_skip_set", "forward_tokens", "jacobi_generate", "new_cache", "ngram_lookup",
    "parse_skip_set", "skipping", "speculative_generate",
]
