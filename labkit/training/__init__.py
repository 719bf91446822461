"""Training the lab's own models: the run's settings, the text, the loss of each recipe, the loop, and the
model card written from what was recorded. Uses only the core and the artifacts."""
from .config import TrainConfig
from .loop import train

__all__ = ["TrainConfig", "train"]
