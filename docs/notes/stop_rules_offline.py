"""When should a draft stop? Stop rules compared offline on the same drafts, so timing noise cannot reorder them
(docs/decisions.md, "The target has the last word", 2026-11-25).

The trained draft path of `default` drafts 12 tokens at every step (FixedK(12)) on the 12 first *choosing* prompts
of each source (never the benchmark's), with fp32 and with int8 draft weights; each step keeps the draft's
confidences (top-1 q) and how many tokens the target accepted. A stop rule picks a draft length k from the
confidences alone; the step then emits min(accepted, k) + 1 tokens and costs k·c + c_v(k) plain steps, with
c = measured draft ms per drafted token / the plain loop's ms per token (same prompts, same process) and
c_v(k) = verify_ms[k] / full_ms from the model's cost model. The score is tokens per plain-step of time: the
analytic speedup each rule would reach on these drafts. Rules: the lab's per-token threshold ("stop after the first
token whose confidence is below t"), a cumulative one ("stop once the product of confidences so far is below t",
the probability that the whole draft survives, if confidences were calibrated) and fixed lengths.

    python docs/notes/stop_rules_offline.py
"""

import math

import torch

import labkit
from labkit.artifacts.prompts import prompts
from labkit.artifacts.results import trained_draft_path
from labkit.core.policies import FixedK
from labkit.measure.strategy_inputs import strategy_cost_model

MAX_DRAFT = 12


def drafts(model, tokenizer, skip, source, weights, n_prompts=12, new_tokens=128):
    """[(confidences, accepted)] of every full-length step, and c measured on the same prompts."""
    steps, draft_s, drafted, plain_s, plain_n = [], 0.0, 0, 0.0, 0
    for prompt in prompts(n_prompts, source=source):
        ids = tokenizer(prompt.text, return_tensors="pt")["input_ids"]
        plain = labkit.autoregressive_generate(model, ids, new_tokens)
        plain_s, plain_n = plain_s + plain.elapsed_s, plain_n + len(plain.new_tokens)
        out = labkit.speculative_generate(model, ids, skip=skip, policy=FixedK(MAX_DRAFT), max_new_tokens=new_tokens,
                                          draft_weights=weights)
        for step in out.trace.steps:
            draft_s, drafted = draft_s + step.draft_s, drafted + len(step.drafted)
            if len(step.drafted) == MAX_DRAFT:
                steps.append((step.confidence, step.n_accepted))
    return steps, (draft_s / drafted) / (plain_s / plain_n)


def rate(steps, c, c_v, stop) -> float:
    tokens = cost = 0.0
    for confidences, accepted in steps:
        k = stop(confidences)
        tokens, cost = tokens + min(accepted, k) + 1, cost + k * c + c_v[k]
    return tokens / cost


def per_token(t):
    return lambda q: next((i + 1 for i, x in enumerate(q) if x < t), len(q))


def cumulative(t):
    return lambda q: next((i + 1 for i in range(len(q)) if math.prod(q[:i + 1]) < t), len(q))


def fixed(k):
    return lambda q: k


if __name__ == "__main__":
    torch.set_num_threads(1)
    model, tokenizer = labkit.load_model("default")
    skip = next(iter(trained_draft_path("default").values()))
    costs = strategy_cost_model(model)
    c_v = [v / costs.verify_ms[0] for v in costs.verify_ms]                  # [0]: a one-token forward, a plain step
    assert len(c_v) > MAX_DRAFT, "the cost model measured verify costs up to fewer drafted tokens"
    rules = {**{f"per-token {t}": per_token(t) for t in (0.3, 0.4, 0.5, 0.6, 0.7)},
             **{f"cumulative {t}": cumulative(t) for t in (0.2, 0.3, 0.4, 0.5)},
             **{f"fixed {k}": fixed(k) for k in (3, 4, 5, 6)}}
    print("c_v(k), k = 0..12:", " ".join(f"{v:.2f}" for v in c_v[:MAX_DRAFT + 1]))
    for source in ("stdlib", "packages"):
        for weights in (None, "int8"):
            steps, c = drafts(model, tokenizer, skip, source, weights)
            scores = {name: rate(steps, c, c_v, stop) for name, stop in rules.items()}
            best = max(scores, key=scores.get)
            print(f"{source}, {weights or 'fp32'} draft: c = {c:.3f}, {len(steps)} steps; best {best}")
            print("  " + "  ".join(f"{name} {v:.3f}" for name, v in scores.items()))
