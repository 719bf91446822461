"""``python -m labkit.train``: the older form of ``python -m labkit train``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("train")
