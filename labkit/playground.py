"""Command line: ``python -m labkit.playground`` measures the playground grid (:mod:`labkit.measure.grid`)."""
from .measure.grid import main

if __name__ == "__main__":
    main()
