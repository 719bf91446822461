"""Command line: ``python -m labkit.costmodel`` measures a model's forward costs (:mod:`labkit.measure.costmodel`)."""
from .measure.costmodel import main

if __name__ == "__main__":
    main()
