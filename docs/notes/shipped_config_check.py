"""Does the shipped search result decode at least as fast as the best hand-made draft, on prompts it never chose on?

Issue 26's check, in one interleaved run on *held-out* prompts (``benchmark_prompts``: never among the choosing
prompts) of every prompt source, greedy, one thread, each draft's stop rule made once per source and carried across
its prompts and repeats (as Draft & Verify's evaluation carries its adaptive threshold):

- ``shipped``: ``labkit.best_config(model)`` (the priced search's pick after its wall-clock final check);
- ``paper's recipe``: the shipped skip set and weights with Draft & Verify's adaptive threshold (starting at the
  shipped threshold), which is the shipped draft itself when the search already chose the adaptive rule;
- ``hand-made``: the model's trained draft path, int8 draft weights, static threshold 0.5;
- ``modelled search (before)``: the skip set the previous, modelled-objective search shipped, with fp32 weights and
  the adaptive threshold (how the notebooks presented it), given by ``--old-skip``.

Each row: speedup over the plain loop (median over repeats) with its min-max, acceptance, token identity.
Writes ``data/bench/shipped_config.json``.

    python docs/notes/shipped_config_check.py --model default          # about 5 minutes on 2 cores
"""
import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch

import labkit
from labkit.artifacts.results import trained_draft_path
from labkit.core.draft_config import DraftConfig
from labkit.core.skip import parse_skip_set
from labkit.measure.comparisons.adaptive import compare_configs
from labkit.measure.machine import machine_info

SOURCES = ("stdlib", "packages", "stdlib-long", "packages-long")
OLD_SKIP = "attention=1,4,5,6,7;mlp=1,2,3,5,6"      # data/search/default/best.json before issue 26 (modelled)


def drafts(model_name: str, old_skip: str | None) -> dict[str, DraftConfig]:
    shipped = labkit.best_config(model_name)
    out = {"shipped": shipped, "paper's recipe": replace(shipped, policy="adaptive")}
    for skip in trained_draft_path(model_name).values():
        out["hand-made"] = DraftConfig(skip, "int8", "static", 0.5, 12)
    if old_skip:
        out["modelled search (before)"] = DraftConfig(parse_skip_set(old_skip), None, "adaptive", 0.6, 12)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default")
    parser.add_argument("--n-prompts", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old-skip", default=OLD_SKIP, help="the previous search's set ('' to leave it out)")
    parser.add_argument("--out", default="data/bench/shipped_config.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    model, tokenizer = labkit.load_model(args.model)
    configs = drafts(args.model, args.old_skip or None)
    frame = compare_configs(model, tokenizer, configs, sources=SOURCES, n_prompts=args.n_prompts,
                            max_new_tokens=args.max_new_tokens, repeats=args.repeats).frame
    info = machine_info()
    print(f"model {args.model}; {info.get('cpu_model')}; held-out prompts: {args.n_prompts} per source, "
          f"{args.max_new_tokens} new tokens, {args.repeats} interleaved repeats, one thread")
    for label, config in configs.items():
        print(f"  {label}: {config.describe(model.config.num_hidden_layers)}")
    cols = ["source", "method", "speedup", "speedup_min", "speedup_max", "acceptance", "tokens_per_step", "identical"]
    print(frame[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    seconds = time.perf_counter() - t0
    print(f"{seconds:.0f} s")
    Path(args.out).write_text(json.dumps({
        "model": args.model, "machine": info, "seconds": seconds,
        "command": "python docs/notes/shipped_config_check.py",
        "settings": {"sources": SOURCES, "n_prompts": args.n_prompts, "max_new_tokens": args.max_new_tokens,
                     "repeats": args.repeats, "prompts": "held-out (benchmark_prompts)"},
        "configs": {label: c.to_dict() for label, c in configs.items()},
        "rows": frame[cols].to_dict("records")}, indent=1))


if __name__ == "__main__":
    main()
