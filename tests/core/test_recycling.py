"""Token recycling: the template is prefix-closed, the table holds the target's top-k from the prefill and every
verify, greedy output is plain decoding's on the four families (random k, template sizes, prompts of one token,
EOS inside a step), sampling is exact by the chi-square test and a wrong sibling rule is caught."""
import random

import pytest
import torch

import labkit
import labkit.core.tree as tree_module
from labkit import FixedK, autoregressive_generate, speculative_generate
from labkit.core.recycling import TokenRecyclingDrafter, rank_template
from labkit.core.tree_shapes import MEDUSA_CHOICES

from exact_sampling import (
    PROMPT,
    WARPS,
    chi_square_p_value,
    empirical,
    exact_two_token_distribution,
    sharp_tiny_model,
    total_variation,
    tv_bound,
)
from tiny_models import ARCHITECTURES, eos_met_part_way, tiny_model


def test_rank_template_is_the_best_prefix_closed_set():
    template = rank_template(nodes=10, k=3, depth=3, alpha=0.7, beta=0.4)
    assert len(template) == 10 and all(p[:-1] in template for p in template if len(p) > 1)
    assert template[:3] == ((0,), (1,), (2,)) and (0, 0) in template and max(map(len, template)) <= 3
    assert all(r < 3 for p in template for r in p)
    assert rank_template(nodes=3, k=1, depth=9) == ((0,), (0, 0), (0, 0, 0))          # k = 1: a chain


def test_the_table_is_the_target_s_top_k_after_each_token():
    model = tiny_model("llama", n_layers=2)
    prompt = torch.tensor([[5, 9, 14, 20, 7, 30]])
    drafter = labkit.token_recycling(k=3)
    out = speculative_generate(model, prompt, drafter=drafter, policy=FixedK(1), max_new_tokens=2)
    assert 30 not in out.trace.steps[0].drafted                              # so row 30 is the pending token's
    with torch.no_grad():
        logits = model(prompt).logits[0]
    for i, token in enumerate(prompt[0, :-1].tolist()):                     # written by the prefill
        assert drafter.table[token] == torch.topk(logits[i], 3).indices.tolist() and drafter.written[token] == -1
    assert drafter.table[30] == torch.topk(logits[-1], 3).indices.tolist()   # and by the step's verify forward
    assert drafter.written[30] == 0


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("seed", range(2))
def test_greedy_output_is_plain_decoding_s(arch, seed):
    rng = random.Random(seed)
    model = tiny_model(arch, n_layers=3, seed=seed)
    accepted = 0
    for trial in range(5):
        prompt = torch.tensor([[rng.randrange(97) for _ in range(rng.choice([1, rng.randint(2, 12)]))]])
        n_new = rng.randint(1, 40)
        eos = eos_met_part_way(rng, model, prompt, n_new)
        k = rng.randint(1, 5)
        template = (MEDUSA_CHOICES if trial == 4 and k >= 3
                    else rank_template(rng.randint(1, 30), k, rng.randint(1, 6), rng.uniform(0.3, 1), rng.random()))
        drafter = labkit.token_recycling(k=k, template=template)
        out = speculative_generate(model, prompt, drafter=drafter, policy=FixedK(rng.randint(1, 6)),
                                   max_new_tokens=n_new, eos_token_id=eos)
        assert out.sequences.equal(autoregressive_generate(model, prompt, n_new, eos_token_id=eos).sequences), \
            (prompt, n_new, eos, k, template)
        assert all(len(s.origins) == len(s.parents) == s.n_drafted for s in out.trace.steps if s.drafted)
        accepted += sum(s.n_accepted for s in out.trace.steps)
    assert accepted > 0


@pytest.fixture(scope="module")
def target():
    return sharp_tiny_model(n_layers=2, seed=3)


def _sample(target, warp, drafted):
    def one(g):
        out = speculative_generate(target, PROMPT, drafter=TokenRecyclingDrafter(k=3, template=MEDUSA_CHOICES),
                                   policy=FixedK(3), max_new_tokens=3, do_sample=True, generator=g,
                                   temperature=warp.temperature, top_k=warp.top_k, top_p=warp.top_p)
        drafted.append(sum(s.n_drafted for s in out.trace.steps))
        return out.new_tokens
    return one


@pytest.mark.parametrize("warp", WARPS, ids=["t1", "t0.7-topk-topp"])
def test_sampling_draws_exactly_from_p(target, warp):
    dist, drafted = exact_two_token_distribution(target, warp, n_tokens=3), []
    counts = empirical(_sample(target, warp, drafted), 3)
    assert sum(drafted) > 2 * len(drafted)                  # trees of several candidates were verified
    assert chi_square_p_value(counts, dist) > 1e-3
    assert total_variation(counts, dist) < tv_bound(dist)


def test_a_wrong_sibling_rule_fails_the_same_test(target, monkeypatch):
    """Trying the next sibling against p itself (not p with the rejected token removed): caught."""
    monkeypatch.setattr(tree_module, "residual_distribution", lambda p, q: p)
    dist = exact_two_token_distribution(target, WARPS[0], n_tokens=3)
    assert chi_square_p_value(empirical(_sample(target, WARPS[0], []), 3), dist) < 1e-3


def test_clear_errors():
    with pytest.raises(ValueError, match="k"):
        labkit.token_recycling(k=0)
    with pytest.raises(ValueError, match="template rank"):
        labkit.token_recycling(k=2, template=((0,), (2,)))
    with pytest.raises(ValueError, match="prefixes"):
        labkit.token_recycling(k=2, template=((0,), (1, 1)))
    with pytest.raises(TypeError, match="template"):
        labkit.token_recycling(template=5)
