"""Command line: ``python -m labkit.robustness --model default`` measures how well a model tolerates skipping
(:mod:`labkit.measure.robustness`), writes ``robustness.json`` beside the model and refreshes its model card."""
from .measure.robustness import main as measure
from .training.modelcard import write_model_card


def main(argv: list[str] | None = None) -> None:
    path = measure(argv)
    if (path.parent / "training.json").exists():          # a lab-trained model: its card shows the new numbers
        write_model_card(path.parent)


if __name__ == "__main__":
    main()
