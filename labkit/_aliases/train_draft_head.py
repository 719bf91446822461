"""``python -m labkit.train_draft_head``: the older form of ``python -m labkit train-draft-head``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("train_draft_head")
