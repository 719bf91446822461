"""Where the lab's shipped and generated things live: defined once, relative to the repository."""
from __future__ import annotations

from pathlib import Path

__all__ = ["REPO", "DATA_DIR", "MODELS_DIR", "TOKENIZER_DIR", "CHECKPOINTS_DIR", "SEARCH_DIR", "PLAYGROUND_DIR",
           "BENCH_DIR", "RESULTS_DIR", "NOTEBOOK_DIR", "BUILD_DIR"]

REPO = Path(__file__).resolve().parents[2]
DATA_DIR = REPO / "data"                   # committed: models, search results, grids, benchmark
MODELS_DIR = DATA_DIR / "models"           # one Hugging Face folder per shipped model
TOKENIZER_DIR = DATA_DIR / "tokenizer"     # the byte-level BPE every shipped model shares
CHECKPOINTS_DIR = DATA_DIR / "checkpoints"  # training state (not committed)
SEARCH_DIR = DATA_DIR / "search"           # exported skip-set searches: <model>/best.json, trials.csv
PLAYGROUND_DIR = DATA_DIR / "playground"   # precomputed playground grids: <model>.json
BENCH_DIR = DATA_DIR / "bench"             # the side-by-side benchmark
RESULTS_DIR = REPO / "results"             # working results (Optuna storage, cost models): not committed
NOTEBOOK_DIR = REPO / "notebooks"
BUILD_DIR = REPO / "build"                 # executed notebooks, metrics, HTML, screenshots
