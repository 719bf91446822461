"""Command line: ``python -m labkit.bench`` runs :mod:`labkit.measure.bench` (the side-by-side benchmark)."""
from .measure.bench import main

if __name__ == "__main__":
    main()
