"""labkit: the Self-Speculative Decoding Lab's library.

model -> skip -> draft/verify -> trace -> metrics -> plots -> widgets -> notebooks
"""
from .corpus import Prompt, prompts
from .decoding import GenerationResult, autoregressive_generate, speculative_generate
from .models import SUPPORTED_ARCHITECTURES, load_model
from .policies import AdaptiveThreshold, DraftPolicy, FixedK, StaticThreshold
from .search import best_skip_set
from .skip import SkipSet, skipping
from .trace import StepRecord, Trace

__all__ = [
    "AdaptiveThreshold", "DraftPolicy", "FixedK", "GenerationResult", "Prompt", "SUPPORTED_ARCHITECTURES",
    "SkipSet", "StaticThreshold", "StepRecord", "Trace", "autoregressive_generate", "best_skip_set", "load_model",
    "prompts", "skipping", "speculative_generate",
]
__version__ = "0.1.0"
