"""``python -m labkit.robustness``: the older form of ``python -m labkit robustness``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("robustness")
