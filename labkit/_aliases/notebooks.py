"""``python -m labkit.notebooks``: the older form of ``python -m labkit notebooks``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("notebooks")
