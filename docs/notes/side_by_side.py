"""What the side-by-side scripts of docs/notes share (tree_bench, cascade_bench, medusa_bench): the run's size from
the command line, the shipped model with one thread, and for each prompt source the decoders timed interleaved with
the plain loop (labkit.measure.harness), each greedy row checked token for token against it."""
from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from labkit import load_model
from labkit.artifacts.prompts import benchmark_prompts
from labkit.measure.harness import Runs, run_interleaved, summarise
from labkit.measure.machine import machine_info

SOURCES = ("stdlib", "packages")


@dataclass(frozen=True)
class Size:
    prompts: int
    tokens: int
    repeats: int

    def describe(self) -> str:
        return f"{self.prompts} prompts per source, {self.tokens} new tokens, {self.repeats} interleaved repeats"


def parse_size(description: str, quick: Size) -> Size:
    """The run's size: --prompts / --tokens / --repeats (4 x 96 x 3), or ``quick`` with --quick (a smoke run)."""
    parser = argparse.ArgumentParser(description=description.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=96)
    args = parser.parse_args()
    return quick if args.quick else Size(args.prompts, args.tokens, args.repeats)


def shipped_model():
    """``default`` and its tokenizer, torch on one thread (a command-line main's setting), the machine printed."""
    torch.set_num_threads(1)
    print(machine_info())
    return load_model("default")


def by_source(tokenizer, size: Size, make_decoders: Callable[[], list]) -> Iterator[tuple[str, list, Runs, list]]:
    """For each prompt source: (source, decoders, runs, rows), the decoders (fresh per source) timed interleaved on
    that source's held-out prompts; prints the source's header and fails if a greedy row changed the output."""
    for source in SOURCES:
        ids = [tokenizer(p.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
               for p in benchmark_prompts(size.prompts, source=source)]
        decoders = make_decoders()
        with torch.inference_mode():
            runs = run_interleaved(decoders, ids, max_new_tokens=size.tokens, repeats=size.repeats, desc=source)
        rows = summarise(runs)
        for d, row in zip(decoders, rows):
            assert row["identical"] in (True, 1.0) or d.method.kind == "plain", f"{d.method.label} changed the output"
        print(f"\n{source} prompts (median length {statistics.median(x.shape[1] for x in ids):.0f} tokens)")
        yield source, decoders, runs, rows


def speedup_cells(row: dict) -> str:
    """ms per token, then the speedup over the plain loop with its min-max over the repeats."""
    return (f"{row['ms_per_token']:9.2f} {row['speedup']:8.2f}× "
            f"({row['speedup_min']:.2f}-{row['speedup_max']:.2f})")
