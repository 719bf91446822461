import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)   # tiny models: one thread is fastest and leaves the other core free
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: needs the shipped models or runs notebooks")
    config.addinivalue_line("markers", "browser: drives a real Chromium (tests/browser; skipped without one)")
