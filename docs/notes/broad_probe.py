"""Issue 16 item 5, an experiment: does a `default` fine-tuned on a broader corpus keep a deeper draft path on
outside prompts? Teacher-forced agreement of the trained 8-block path and a 10-block path, per model and prompt source.

    python docs/notes/broad_probe.py MODEL_OR_CHECKPOINT ...     (a model folder, or a training checkpoint.pt)
"""
import sys
from pathlib import Path

import torch

import labkit
from labkit.artifacts.prompts import benchmark_prompts
from labkit.core.skip import parse_skip_set
from labkit.measure.agreement import AgreementProbe

PATHS = {"8 blocks (trained path)": "attention=1,4,5,7;mlp=1,3,5,6",
         "10 blocks": "attention=1,4,5,6,7;mlp=1,2,3,5,6"}


def load(name):
    if name.endswith(".pt"):                                   # a checkpoint of a run that started from `default`
        model, tokenizer = labkit.load_model("default")
        model.load_state_dict(torch.load(name, weights_only=False)["model"])
        return model.eval(), tokenizer
    return labkit.load_model(name)


def main(names):
    torch.set_num_threads(2)
    for name in names:
        model, tokenizer = load(name)
        for source in ("stdlib", "packages"):
            texts = [p.text for p in benchmark_prompts(16, source=source)]
            probe = AgreementProbe.from_prompts(model, tokenizer, texts, n_tokens=48)
            row = "  ".join(f"{k}: {probe.agreement(parse_skip_set(v)):.3f}" for k, v in PATHS.items())
            print(f"{Path(name).name if name.endswith('.pt') else name:>14} {source:>8} "
                  f"({probe.n_positions} positions)  {row}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["default"])
