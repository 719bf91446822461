"""labkit.measure.bench.methods: what the benchmark runs. The plain loop's and transformers' rows decode what the
plain loop decodes, labelled by model; quick and full configurations differ where the README says."""
import torch

from labkit import autoregressive_generate
from labkit.measure.bench.methods import BenchConfig, hf_method, plain_method

from tiny_models import tiny_model


@torch.inference_mode()
def test_plain_and_generate_rows_decode_the_plain_loops_tokens():
    model = tiny_model("llama", n_layers=2, vocab_size=97)
    model.generation_config.pad_token_id = 0
    ids = torch.tensor([[1, 5, 9]])
    expected = autoregressive_generate(model, ids, 8).sequences
    plain, hf = plain_method("tiny", model), hf_method("HF generate", "tiny", model)
    assert plain.method.kind == "plain" and plain.method.label == "tiny: labkit plain loop"
    assert hf.method.family == "baseline" and hf.method.label == "tiny: HF generate"
    assert torch.equal(plain.run(ids, 8).sequences, expected) and torch.equal(hf.run(ids, 8), expected)
    assert hf_method("lookup", "tiny", model, prompt_lookup_num_tokens=3).method.family == "transformers"


def test_quick_configuration_is_smaller_than_the_full_one():
    quick, full = BenchConfig.quick(), BenchConfig()
    assert quick.n_prompts <= full.n_prompts and quick.max_new_tokens <= full.max_new_tokens
    assert not quick.jacobi and full.jacobi
