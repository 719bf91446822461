"""Command line: ``python -m labkit.train_draft_head`` fits a draft head for a model (:mod:`labkit.training.draft_head`)."""
from .training.draft_head import main

if __name__ == "__main__":
    main()
