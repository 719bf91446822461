"""``python -m labkit.bench``: the older form of ``python -m labkit bench``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("bench")
