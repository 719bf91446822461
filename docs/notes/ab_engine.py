"""A/B of the decoding engine across two checkouts (issue 14: did the restructure slow decoding?).

    python docs/notes/ab_engine.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 6]

Each round runs one fresh process per checkout, in alternating order (A B, B A, ...), so a slow patch of the shared
machine hits both alike. A process loads the shipped `default` model and the search's best skip set of its own
checkout, warms up, then decodes 4 held-out stdlib prompts x 128 new tokens with the plain loop and with adaptive
self-speculative decoding (one thread), and prints ms per token. The medians over rounds are printed last.
"""
import argparse
import json
import statistics
import subprocess
import sys

CHILD = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
import labkit
model, tok = labkit.load_model(sys.argv[1] + "/data/models/default")
skip = labkit.best_skip_set("default")
ids = [tok(p.text, return_tensors="pt")["input_ids"] for p in labkit.prompts(30, seed=0)[24:28]]
labkit.speculative_generate(model, ids[0], skip=skip, max_new_tokens=16)
labkit.autoregressive_generate(model, ids[0], 16)
out = {}
for name, run in (("plain", lambda x: labkit.autoregressive_generate(model, x, 128)),
                  ("spec", lambda x: labkit.speculative_generate(model, x, skip=skip, max_new_tokens=128,
                                                                 policy=labkit.AdaptiveThreshold()))):
    t0, n = time.perf_counter(), 0
    for x in ids:
        n += run(x).sequences.shape[1] - x.shape[1]
    out[name] = 1e3 * (time.perf_counter() - t0) / n
out["labkit"] = labkit.__file__
print(json.dumps(out))
'''


def one(checkout: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, checkout], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    results = {"old": [], "new": []}
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for which in order:
            results[which].append(one(getattr(args, which)))
            if not results[which][-1]["labkit"].startswith(getattr(args, which)):
                raise SystemExit(f"{which}: imported {results[which][-1]['labkit']}, not the checkout's labkit")
            print(f"round {r} {which}: {results[which][-1]}", flush=True)
    for which, runs in results.items():
        plain = statistics.median(x["plain"] for x in runs)
        spec = statistics.median(x["spec"] for x in runs)
        print(f"{which}: plain loop {plain:.3f} ms/token, self-spec adaptive {spec:.3f} ms/token, "
              f"speedup {plain / spec:.3f}x")


if __name__ == "__main__":
    main()
