"""What the lab ships and where: paths (once), the models and how to load them, the prompts, and the
committed results that say which blocks to skip."""
from .models import SHIPPED_MODELS, load_draft_head, load_model, model_folder
from .prompts import Prompt, benchmark_prompts
from .results import best_config, best_skip_set, skip_set_for

__all__ = ["Prompt", "SHIPPED_MODELS", "benchmark_prompts", "best_config", "best_skip_set", "load_draft_head", "load_model", "model_folder", "skip_set_for"]
