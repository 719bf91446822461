"""The device benchmark runs end to end on the CPU at tiny sizes (a GPU runs the same code at full size): every
drafter lossless in bf16 on the four families, the benchmark's rows identical to the plain loop, a table written."""
import json

import pytest

from labkit.measure.bench.device import DeviceBenchConfig, device_bench, family_model


def test_quick_run_on_the_cpu_writes_its_tables(tmp_path):
    path = device_bench(DeviceBenchConfig.quick(device="cpu", out_dir=str(tmp_path)))
    result = json.loads(path.read_text())
    assert result["device"] == "cpu" and result["machine"]["transformers"]
    assert [r["family"] for r in result["lossless"]] == ["llama", "mistral", "qwen2", "gemma2"]
    for row in result["lossless"]:
        assert row["drafters"] == 14 and row["identical"] == row["runs"] == 14 * 4 * 3 and not row["mismatched"]
    methods = {r["method"] for r in result["bench"]}
    assert {"labkit plain loop", "transformers generate", "shipped draft, chain"} <= methods
    assert all(r["identical"] is True for r in result["bench"] if r["dtype"] == "fp32")
    assert {r["dtype"] for r in result["divergence"]} == {"bf16"} and len(result["divergence"]) == 1
    assert "greedy runs of the shipped draft left the plain loop's tokens" in path.with_suffix(".md").read_text()
    calibrated = result["calibration"]
    assert len(calibrated) == 3 and "random" in calibrated[-1]["model"]
    assert all(r["summary"]["predicted_speedup"] > 0 and r["summary"]["measured_speedup"] > 0 for r in calibrated)
    assert set(result["runs"]) == {"lossless", "bench", "divergence", "calibration"}
    table = path.with_suffix(".md").read_text()
    assert "| llama | bf16 | 14 | 168 / 168 |" in table and "shipped draft, chain" in table


def test_a_second_run_of_one_section_keeps_the_others(tmp_path):
    first = device_bench(DeviceBenchConfig.quick(device="cpu", out_dir=str(tmp_path), sections=("divergence",),
                                                 dtypes=("bf16",)))
    before = json.loads(first.read_text())
    second = device_bench(DeviceBenchConfig.quick(device="cpu", out_dir=str(tmp_path), sections=("lossless",),
                                                  lossless_dtypes=("fp16",), lossless_tokens=4))
    after = json.loads(second.read_text())
    assert after["divergence"] == before["divergence"] and {r["dtype"] for r in after["lossless"]} == {"fp16"}
    assert set(after["runs"]) == {"divergence", "lossless"}
    with pytest.raises(ValueError, match="sections"):
        device_bench(DeviceBenchConfig.quick(device="cpu", out_dir=str(tmp_path), sections=("speed",)))


def test_family_models_are_small_and_sharp():
    model = family_model("gemma2", device="cpu", dtype=None)
    assert type(model).__name__ == "Gemma2ForCausalLM" and model.config.num_hidden_layers == 4
    assert model.generation_config.eos_token_id is None
