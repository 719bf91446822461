"""Device and precision: names resolve or fail naming the argument, and greedy self-speculative decoding in bf16
(fp16 where this CPU computes it) is token-identical to the plain loop in the same precision, on the four families,
for every drafter and draft policy the engine has."""
import random

import pytest
import torch

import labkit
from labkit import (
    AdaptiveThreshold,
    DraftConfig,
    EarlyExitDrafter,
    FixedK,
    HeadsDrafter,
    MedusaHeads,
    SkipSet,
    StaticThreshold,
    TargetConfidenceGate,
    autoregressive_generate,
    jacobi_generate,
    speculative_generate,
)
from labkit.core.devices import (
    clock,
    device_name,
    model_device,
    model_dtype,
    resolve_device,
    resolve_dtype,
    synchronize,
)
from labkit.core.drafters import LookupDrafter, ModelDrafter, SelfDrafter
from labkit.core.strategies import InContextStrategy, KnapsackStrategy, OnTheFlyStrategy

from tiny_models import ARCHITECTURES, random_draft_head, tiny_model

N_LAYERS, VOCAB = 4, 97
COSTS = {"attention_ms": [0.3] * N_LAYERS, "mlp_ms": [0.1] * N_LAYERS, "fixed_ms": 0.3,
         "verify_ms": [1.9 + 0.1 * k for k in range(13)]}


def test_names_resolve():
    assert resolve_device(None) == torch.device("cpu") == resolve_device("CPU")
    assert resolve_device("auto").type in ("cpu", "cuda", "mps")
    assert resolve_dtype(None) is torch.float32
    assert resolve_dtype("bf16") is torch.bfloat16 is resolve_dtype("torch.bfloat16")
    assert resolve_dtype(torch.float16) is torch.float16 is resolve_dtype("half")
    assert device_name("cpu") == "cpu"
    synchronize("cpu")
    assert clock() <= clock("cpu")


@pytest.mark.parametrize("bad", ["gpu", "tpu", 3.5, "cuda:x"])
def test_bad_device_names_the_argument(bad):
    with pytest.raises(ValueError, match="device"):
        resolve_device(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_missing_accelerator_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA device"):
        resolve_device("cuda")


@pytest.mark.parametrize("bad", ["int8", "fp64", torch.int64, torch.float64, 16])
def test_bad_dtype_names_the_argument(bad):
    with pytest.raises(ValueError, match="dtype"):
        resolve_dtype(bad)


def _fp16_works() -> bool:
    try:
        x = torch.ones(4, 4, dtype=torch.float16)
        return bool(torch.isfinite(torch.nn.functional.linear(x, x)).all())
    except RuntimeError:
        return False


DTYPES = [torch.bfloat16] + ([torch.float16] if _fp16_works() else [])


@pytest.fixture(scope="module", params=[(a, d) for a in ARCHITECTURES for d in DTYPES],
                ids=lambda p: f"{p[0]}-{str(p[1]).removeprefix('torch.')}")
def reduced(request):
    arch, dtype = request.param
    return tiny_model(arch, n_layers=N_LAYERS, vocab_size=VOCAB).to(dtype)


def _heads(model):
    heads = MedusaHeads(model.config.hidden_size, 2)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for block in heads.blocks:
            block.weight.copy_(0.3 * torch.randn(block.weight.shape, generator=generator))
    return heads.eval().requires_grad_(False)


def _drafters(model, rng: random.Random):
    """(name, keyword arguments of speculative_generate) for every way the engine drafts."""
    skip = SkipSet(attention=[1], mlp=[2])
    other = tiny_model(model.config.model_type if model.config.model_type in ARCHITECTURES else "llama",
                       n_layers=2, vocab_size=VOCAB, seed=1).to(model.dtype)
    yield "static set", {"skip": skip}
    yield "int8 draft weights", {"skip": skip, "draft_weights": "int8"}
    yield "draft head", {"skip": skip, "draft_head": random_draft_head(model, skip)}
    yield "lookup", {"skip": skip, "lookup": 3}
    yield "on the fly", {"skip": OnTheFlyStrategy(skip, every=1, window=4, budget=1.0, seed=0)}
    yield "in context", {"skip": InContextStrategy(skip, n_skipped=3, every=1, budget=1.0, redo_below=1.0)}
    yield "knapsack", {"skip": KnapsackStrategy(COSTS, [rng.random() for _ in range(2 * N_LAYERS)], anchor=skip,
                                                anchor_alpha=0.5, min_tokens=1)}
    yield "draft model", {"drafter": ModelDrafter(model, other)}
    yield "early exit", {"drafter": LookupDrafter(3, EarlyExitDrafter(model, 2))}
    yield "medusa heads", {"drafter": HeadsDrafter(model, _heads(model))}
    for shape in ("static", "confidence", "dynamic"):
        yield f"{shape} tree", {"drafter": SelfDrafter(model, skip, tree=labkit.draft_tree(shape))}
    yield "cascade", {"drafter": labkit.cascade(["lookup", DraftConfig(SkipSet(attention=[0, 1], mlp=[1, 2])),
                                                 skip], controller="dynamic")}


def _policies():
    return [FixedK(4), StaticThreshold(0.3, 6), AdaptiveThreshold(max_draft=8),
            TargetConfidenceGate(AdaptiveThreshold(max_draft=8), 0.5)]


def test_reduced_precision_greedy_is_identical_to_the_plain_loop_in_that_precision(reduced):
    rng = random.Random(0)
    prompts = [torch.randint(0, VOCAB, (1, n), generator=torch.Generator().manual_seed(n)) for n in (5, 17)]
    prompts.append(torch.cat([prompts[0]] * 3, dim=1))                       # repeats: lookup drafts fire
    plain = [autoregressive_generate(reduced, ids, 20).sequences for ids in prompts]
    for name, kwargs in _drafters(reduced, rng):
        for policy in _policies():
            for ids, expected in zip(prompts, plain):
                out = speculative_generate(reduced, ids, policy=policy, max_new_tokens=20, **kwargs)
                assert torch.equal(out.sequences, expected), (name, policy)
    assert model_dtype(reduced) in DTYPES and model_device(reduced).type == "cpu"
    for ids, expected in zip(prompts, plain):
        assert torch.equal(jacobi_generate(reduced, ids, 20, block_size=4).sequences, expected)


def test_plain_loop_in_bf16_is_transformers_generate_in_bf16():
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB).to(torch.bfloat16)
    ids = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(3))
    expected = model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=0)
    assert torch.equal(autoregressive_generate(model, ids, 24).sequences, expected)


def test_sampling_in_bf16_follows_a_cpu_generator():
    """The draws follow the caller's generator: the same seed, the same sampled tokens, twice."""
    model = tiny_model("qwen2", n_layers=N_LAYERS, vocab_size=VOCAB).to(torch.bfloat16)
    ids = torch.randint(0, VOCAB, (1, 6), generator=torch.Generator().manual_seed(4))
    runs = [speculative_generate(model, ids, skip=SkipSet(mlp=[1]), do_sample=True, max_new_tokens=16,
                                 generator=torch.Generator().manual_seed(7)).sequences for _ in range(2)]
    assert torch.equal(runs[0], runs[1])
