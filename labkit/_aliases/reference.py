"""``python -m labkit.reference``: the same as ``python -m labkit reference``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("reference")
