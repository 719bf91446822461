"""The benchmark on a device in a precision: BenchConfig's and the command line's device and dtype, the models loaded
there, every greedy row identical to the plain loop in that precision."""
import pytest
import torch

from labkit.artifacts.paths import MODELS_DIR
from labkit.measure.bench import run as bench

from tiny_models import tiny_model


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """A tiny random Llama with the shipped tokenizer, saved as a folder (as tests/measure/bench/test_run.py's)."""
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("bench-precision") / "target"
    tokenizer = AutoTokenizer.from_pretrained(MODELS_DIR / "default")
    model = tiny_model("llama", n_layers=3, vocab_size=len(tokenizer), hidden_size=32, max_positions=512)
    model.generation_config.pad_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_a_quick_bf16_benchmark_loads_bf16_models_and_stays_lossless_in_bf16(target, tmp_path):
    cfg = bench.BenchConfig.quick(models=(target,), draft_model="absent-draft", dtype="bf16", n_prompts=1,
                                  max_new_tokens=8, repeats=1, sampling=False, strategies=False,
                                  early_exit_and_gate=False, hf_builtins=False, out_dir=str(tmp_path))
    loaded = bench._load(cfg)
    assert {next(m.parameters()).dtype for m, _ in loaded.values()} == {torch.bfloat16}
    result = bench.run_benchmark(cfg)
    assert (result["device"], result["dtype"], result["config"]["dtype"]) == ("cpu", "bf16", "bf16")
    assert {r["kind"] for r in result["greedy"]} >= {"generate", "plain", "self-spec"}
    assert all(r["identical"] is True for r in result["greedy"]), [r["method"] for r in result["greedy"]]
    assert "models on cpu in bf16" in bench.report(result, cfg)


def test_the_command_line_takes_device_and_dtype():
    args = bench._parser().parse_args(["--quick", "--device", "cpu", "--dtype", "bf16"])
    cfg = bench.config_from_args(args)
    assert (cfg.device, cfg.dtype) == ("cpu", "bf16") and cfg.models == ("default",)
    assert (bench.BenchConfig().device, bench.BenchConfig().dtype) == ("cpu", "fp32")
    with pytest.raises(ValueError, match="dtype must be one of"):
        bench._load(bench.BenchConfig.quick(dtype="int4"))
