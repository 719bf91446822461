"""``python -m labkit.stop_signal``: the older form of ``python -m labkit stop-signal``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("stop_signal")
