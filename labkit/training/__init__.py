"""Training the lab's own models (uses only the core and the artifacts): ``config`` (the run's settings), ``data`` (the
text), ``objective`` (each recipe's loss), ``loop`` (the training run), ``draft_head`` (fitting a draft head),
``medusa`` (fitting Medusa heads), ``width`` (fitting
width drafts' neuron predictors, their recall) and ``modelcard`` (the card written from what was recorded)."""
from .config import TrainConfig
from .loop import train

__all__ = ["TrainConfig", "train"]
