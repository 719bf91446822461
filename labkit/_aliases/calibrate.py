"""``python -m labkit.calibrate``: the same as ``python -m labkit calibrate``."""
from labkit.cli import alias

if __name__ == "__main__":
    alias("calibrate")
