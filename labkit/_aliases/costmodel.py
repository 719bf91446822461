"""``python -m labkit.costmodel``: the older form of ``python -m labkit costmodel``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("costmodel")
