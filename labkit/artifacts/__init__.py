"""What the lab ships and where: ``paths`` (every folder, once), ``models`` (loading and identity), ``corpus``,
``candidates`` and ``prompts`` (the text models are trained and evaluated on; held-out, outside and stub prompts),
``results`` (the committed search results that say which blocks to skip), and ``arguments`` (how the command line
names them: every command's argument types, checked before any work)."""
from .models import SHIPPED_MODELS, load_draft_head, load_model, model_folder
from .prompts import Prompt, benchmark_prompts
from .results import best_config, best_skip_set, skip_set_for

__all__ = ["Prompt", "SHIPPED_MODELS", "benchmark_prompts", "best_config", "best_skip_set", "load_draft_head",
           "load_model", "model_folder", "skip_set_for"]
