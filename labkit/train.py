"""Command line: ``python -m labkit.train`` trains a lab model (:mod:`labkit.training.loop`)."""
from .training.loop import main

if __name__ == "__main__":
    main()
