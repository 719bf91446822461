"""``python -m labkit.playground``: the older form of ``python -m labkit grid``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("playground")
