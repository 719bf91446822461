"""Device and precision: names resolve or fail naming the argument, and greedy self-speculative decoding in bf16
(fp16 where this CPU computes it) is token-identical to the plain loop in the same precision, on the four families,
for every drafter and draft policy the engine has."""
import pytest
import torch

from labkit import SkipSet, autoregressive_generate, jacobi_generate, speculative_generate
from labkit.core.devices import (
    clock,
    device_name,
    model_device,
    model_dtype,
    resolve_device,
    resolve_dtype,
    synchronize,
)
from labkit.measure.lossless import check_lossless

from tiny_models import ARCHITECTURES, tiny_model

N_LAYERS, VOCAB = 4, 97


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


def test_reduced_precision_greedy_is_identical_to_the_plain_loop_in_that_precision(reduced):
    prompts = [torch.randint(0, VOCAB, (1, n), generator=torch.Generator().manual_seed(n)) for n in (5, 17)]
    prompts.append(torch.cat([prompts[0]] * 3, dim=1))                       # repeats: lookup drafts fire
    rows = check_lossless(reduced, prompts, 20)
    assert len(rows) == 14 * 4 and len({r["drafter"] for r in rows}) == 14
    assert all(not r["error"] and r["identical"] == r["prompts"] == 3 for r in rows), [r for r in rows
                                                                                       if r["identical"] != 3]
    assert model_dtype(reduced) in DTYPES and model_device(reduced).type == "cpu"
    plain = [autoregressive_generate(reduced, ids, 20).sequences for ids in prompts]
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
