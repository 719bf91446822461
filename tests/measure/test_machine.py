"""machine_info names the CPU a timing ran on: its model and the flags that decide which kernels run."""
from labkit.measure.machine import cpu_model, machine_info

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9999
flags\t\t: fpu sse2 avx2 avx512f avx512_vnni avx512_bf16 rdtscp

processor\t: 1
model name\t: something else
flags\t\t: fpu amx_int8
"""


def test_cpu_model_reads_the_first_processor_and_keeps_kernel_flags(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    assert cpu_model(path) == {"cpu_model": "AMD EPYC 9999", "cpu_flags": ["avx2", "avx512f", "avx512_vnni",
                                                                          "avx512_bf16"]}


def test_cpu_model_without_cpuinfo_is_empty_and_machine_info_still_complete(tmp_path):
    assert cpu_model(tmp_path / "missing") == {}
    info = machine_info()
    assert {"platform", "python", "torch", "torch_threads", "cpu_count"} <= set(info)


def test_machine_info_names_the_accelerators():
    import torch

    info = machine_info()
    assert isinstance(info["accelerators"], list)
    if not torch.cuda.is_available():
        assert all(name == "mps" for name in info["accelerators"])
