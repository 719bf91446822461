"""Command line: ``python -m labkit.stop_signal`` runs :mod:`labkit.measure.stop_signal` (the sampling stop signal)."""
from .measure.stop_signal import main

if __name__ == "__main__":
    main()
