"""labkit: the Self-Speculative Decoding Lab's library.

model -> skip -> draft/verify -> trace -> metrics -> plots -> widgets -> notebooks

Layers (imports go one way; see docs/architecture.md): ``core`` (the engine) <- ``artifacts`` (shipped models,
prompts, results) <- ``measure`` <- ``search``; ``training`` uses core and artifacts; ``viz`` draws core and
measure types; ``lessons`` is the notebooks' glue.
"""
from pathlib import Path as _Path

from .artifacts import Prompt, best_config, best_skip_set, load_draft_head, load_model
from .artifacts.prompts import prompts
from .core import (
                   SUPPORTED_ARCHITECTURES,
                   AdaptiveThreshold,
                   DraftConfig,
                   DraftPolicy,
                   EarlyExitDrafter,
                   FixedK,
                   GenerationResult,
                   HeadsDrafter,
                   JacobiTrace,
                   MedusaHeads,
                   SkipSet,
                   SkipStrategy,
                   StaticThreshold,
                   StepRecord,
                   TargetConfidenceGate,
                   Trace,
                   WidthPredictors,
                   WidthSet,
                   autoregressive_generate,
                   draft_tree,
                   jacobi_generate,
                   skipping,
                   speculative_generate,
                   width_drafter,
)
from .core.cascade import cascade
from .core.lookahead import lookahead
from .core.recycling import token_recycling
from .measure.strategy_inputs import skip_strategy

# `python -m labkit.bench` and the other older command forms: labkit/_aliases/<name>.py is the module labkit.<name>
# (each forwards to `python -m labkit <command>`, labkit/cli.py; docs/architecture.md, "command line").
__path__.append(str(_Path(__file__).with_name("_aliases")))
del _Path

__all__ = [
    "AdaptiveThreshold", "DraftConfig", "DraftPolicy", "EarlyExitDrafter", "FixedK", "GenerationResult", "HeadsDrafter",
    "JacobiTrace", "MedusaHeads",
    "Prompt", "SUPPORTED_ARCHITECTURES", "SkipSet", "SkipStrategy", "StaticThreshold", "StepRecord",
    "TargetConfidenceGate", "Trace",
    "autoregressive_generate", "best_config", "best_skip_set", "cascade", "draft_tree", "jacobi_generate",
    "load_draft_head",
    "load_model", "lookahead", "prompts", "skip_strategy", "skipping", "speculative_generate", "token_recycling",
    "WidthPredictors", "WidthSet", "width_drafter",
]
__version__ = "0.1.0"
