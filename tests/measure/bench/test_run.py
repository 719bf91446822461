"""The benchmark's machinery on tiny models (its numbers are produced by `python -m labkit.bench`, not here)."""
import json
import math

import pytest
import torch

from labkit import SkipSet
from labkit.artifacts.models import draft_head_folder, load_medusa_heads, medusa_heads_folder
from labkit.artifacts.paths import MODELS_DIR
from labkit.measure.bench import run as bench
from labkit.measure.bench.methods import cascade_methods, heads_methods, skip_strategy_methods
from labkit.measure.bench.results import drafter_rows, format_drafter_table
from labkit.measure.lossless import random_heads
from labkit.viz.bench import bench_figure

from tiny_models import random_draft_head, tiny_model


@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("bench")
    tokenizer = AutoTokenizer.from_pretrained(MODELS_DIR / "default")
    out = {}
    for name, layers, seed in (("target", 3, 0), ("small", 1, 5)):
        model = tiny_model("llama", n_layers=layers, vocab_size=len(tokenizer), hidden_size=32, seed=seed,
                           max_positions=512)
        model.generation_config.pad_token_id = tokenizer.eos_token_id
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        out[name] = str(root / name)
        if name == "target":                                    # a draft head, for the rows that use one
            random_draft_head(model, SkipSet(mlp=[1]), scale=0.1).save(draft_head_folder(root / name))
            random_heads(model, n_heads=4, seed=1).save(medusa_heads_folder(root / name))   # the Medusa rows
    return out


def test_quick_benchmark_runs_every_method_and_checks_identity(tiny_folders, tmp_path):
    cfg = bench.BenchConfig.quick(models=(tiny_folders["target"],), draft_model=tiny_folders["small"],
                                  n_prompts=1, max_new_tokens=12, repeats=1, out_dir=str(tmp_path))
    result = bench.run_benchmark(cfg)
    names = [r["method"] for r in result["greedy"]]
    assert any("HF generate" in n for n in names) and any("early exit" in n for n in names)
    assert any("separate draft model" in n for n in names) and any("prompt lookup" in n for n in names)
    for row in result["greedy"]:
        assert row["identical"] is True, row["method"]                # every greedy method is lossless
        assert row["ms_per_token"] > 0 and row["ms_min"] <= row["ms_per_token"] <= row["ms_max"]
    spec = [r for r in result["greedy"] if r["kind"] == "self-spec"]
    assert all(r["limit"] > 0 and 0 <= r["acceptance"] <= 1 for r in spec)
    assert result["sampling"] and all(math.isnan(r["identical"]) for r in result["sampling"])
    section = result["strategies"]                                     # skip strategies on both prompt sources
    assert set(section["sources"]) == {"stdlib", "packages"} and section["sources"]["packages"]["packages"]
    for source in ("stdlib", "packages"):
        rows = [r for r in section["rows"] if r["prompts"] == source]
        names_here = [r["method"] for r in rows]
        for strategy in ("on-the-fly", "in-context", "knapsack"):
            assert (any(n.endswith(strategy) for n in names_here)
                    and any(strategy + " + prompt lookup" in n for n in names_here))
        assert any(n.endswith(", int8 draft") for n in names_here)                 # the static sets' int8 rows
        assert not any("int8" in n for n in names_here if "static" not in n)
        assert {n.split(": ", 1)[1] for n in names_here if "draft head" in n} == {
            "static: head's set + draft head", "static: head's set + draft head + prompt lookup",
            "static: head's set + draft head, int8 draft",
            "static: head's set + draft head, int8 draft + prompt lookup"}
        assert any(n.endswith("shipped draft, chain") for n in names_here)                    # the trees' baseline
        assert {r["method"].split("shipped draft, ")[1].split(" tree")[0] for r in rows if r["kind"] == "tree"} == {
            "confidence", "dynamic"}
        assert {r["method"].split(": ", 1)[1] for r in rows if r["kind"] == "cascade"} == {
            "cascade: lookup > shipped", "cascade: lookup > aggressive > shipped, dynamic"}
        assert {r["method"].split(": ", 1)[1] for r in rows if r["kind"] == "medusa"} == {
            "Medusa heads, chain (K=4)", "Medusa heads, chain, stop q < 0.3", "Medusa heads, tree (10 nodes)"}
        assert {r["method"].split(": ", 1)[1] for r in rows if r["kind"] in ("lookahead", "recycling")} == {
            "lookahead (W 3, N 4, G 2)", "shipped draft, lookahead (W 3, N 4, G 2) in front",
            "token recycling (k 3, 12 nodes)", "prompt lookup, then token recycling (k 3, 12 nodes)"}
        drafters = drafter_rows(rows)                # the chain, then its trees, cascades, heads, lookahead, recycling
        assert [r["kind"] for r in drafters] == (["strategy"] + ["tree"] * 2 + ["cascade"] * 2 + ["medusa"] * 3
                                                 + ["lookahead"] * 2 + ["recycling"] * 2)
        assert drafters[0]["vs_chain"] == 1.0 and all(r["vs_chain"] > 0 for r in drafters)
        assert all(r["tokens_per_step"] >= 1 and r["c_v"] > 0 and r["limit"] > 0 for r in drafters)
        for row in rows:
            assert row["identical"] is True, (source, row["method"])
        assert all(0 <= r["select_share"] < 1 for r in rows if r["family"] == "labkit")
    assert "select%" in bench.format_strategy_table(section["rows"])
    table = format_drafter_table(section["rows"])
    assert "c_v" in table and "tok/verify" in table and "Medusa heads, tree" in table and "stdlib prompts" in table
    paths = bench.write_results(result, tmp_path)
    assert json.loads(paths[0].read_text())["greedy"][0]["method"] == names[0]
    loaded = bench.load_results(paths[0])["greedy"]                    # NaN written as null, read back as NaN
    assert [r["method"] for r in loaded] == names and math.isnan(loaded[0]["acceptance"])
    assert paths[-1].name == "bench_strategies.csv" and paths[-1].exists()
    fig = bench_figure(result["greedy"])
    assert fig.layout.title.text and fig.layout.xaxis.title.text and len(fig.data) >= 2
    assert ("speedup" in bench.format_table(result["greedy"]).splitlines()[0]
            or "vs gen" in bench.format_table(result["greedy"]))


def test_drafter_rows_are_optional_and_switched_off(tiny_folders, tmp_path):
    """--no-trees / --no-cascades / --no-heads leave those rows out (the chain stays); a model without Medusa heads
    has no heads rows; a file written before the drafter rows reads as none."""
    cfg = bench.config_from_args(bench._parser().parse_args(["--quick", "--no-trees", "--no-cascades", "--no-heads",
                                                             "--no-lookahead", "--no-recycling"]))
    assert cfg.trees == () and cfg.cascades == () and cfg.heads == () and cfg.lookahead == cfg.recycling == ()
    model, tokenizer = bench.load_model(tiny_folders["target"])
    cfg = bench.BenchConfig.quick(models=(tiny_folders["target"],), trees=(), cascades=(), heads=(), lookahead=(),
                                  recycling=(), strategy_names=(), draft_weights=(), draft_head=False)
    kinds = [d.method.kind for d in skip_strategy_methods(cfg, {tiny_folders["target"]: (model, tokenizer)})]
    assert "strategy" in kinds and not {"tree", "cascade", "medusa", "lookahead", "recycling"} & set(kinds)
    assert heads_methods(bench.BenchConfig.quick(), tiny_folders["small"], model) == []          # no heads there
    assert load_medusa_heads(tiny_folders["target"], model).n_heads == 4
    with pytest.raises(ValueError, match="cascade_bench|cascades"):
        cascade_methods(bench.BenchConfig.quick(cascades=("no such cascade",)), tiny_folders["target"], model)
    old = {"strategies": {"rows": [{"prompts": "stdlib", "method": "m: static: searched set", "kind": "strategy",
                                    "ms_per_token": 1.0, "speedup": None}]}}
    assert drafter_rows(old["strategies"]["rows"]) == [] and format_drafter_table([]) == ""


def test_drafter_rows_on_long_prompts_are_the_plain_loops_tokens(tiny_folders):
    """The strategy section on a long source (a few hundred tokens of file text before each function; the tiny
    model has the shipped models' 512 positions): the chain, trees, cascades, heads, lookahead and token recycling
    rows stay identical."""
    model, tokenizer = bench.load_model(tiny_folders["target"])
    cfg = bench.BenchConfig.quick(models=(tiny_folders["target"],), strategy_sources=("stdlib-long",), n_prompts=1,
                                  max_new_tokens=10, repeats=1, strategy_names=(), draft_weights=(), draft_head=False)
    rows = bench.run_strategy_section(cfg, {tiny_folders["target"]: (model, tokenizer)})["rows"]
    drafters = drafter_rows(rows)
    assert {r["kind"] for r in drafters} == {"strategy", "tree", "cascade", "medusa", "lookahead", "recycling"}
    assert len(drafters) == 12
    assert all(r["prompts"] == "stdlib-long" and r["identical"] is True for r in drafters)



def test_summary_arithmetic_per_model():
    import torch

    from labkit.measure.harness import Method, RunRecord, Runs

    seq = torch.tensor([[1, 2, 3]])
    gen, plain, spec = (Method("generate", "m: HF generate", "m", "baseline"),
                        Method("plain", "m: labkit plain loop", "m", "baseline"),
                        Method("self-spec", "m: self-spec", "m"))

    def rec(s, **kw):
        return RunRecord(s, 10, seq, **kw)

    records = {gen: [[rec(0.2)], [rec(0.4)]], plain: [[rec(0.1)], [rec(0.1)]],
               spec: [[rec(0.05, drafted=8, accepted=6, steps=4, emitted=10, draft_s=0.01, verify_s=0.04)]] * 2}
    rows = {r["method"]: r for r in bench.summarise_by_model(Runs([gen, plain, spec], records))}
    assert rows["m: HF generate"]["ms_per_token"] == pytest.approx(30.0)          # median of 20 and 40
    assert rows["m: self-spec"]["speedup"] == pytest.approx(2.0)
    assert rows["m: self-spec"]["speedup_vs_generate"] == pytest.approx(6.0)
    assert rows["m: self-spec"]["acceptance"] == pytest.approx(0.75)
    # limit = (A + 1) / (d c + c_v) with A = 1.5, d = 2, c = 1.25 ms / 10 ms, c_v = 10 ms / 10 ms
    assert rows["m: self-spec"]["limit"] == pytest.approx(2.5 / (2 * 0.125 + 1.0))
    assert math.isnan(rows["m: HF generate"]["acceptance"])                       # does not apply: NaN



def test_jacobi_rows_are_greedy_rows_checked_against_the_plain_loop(tiny_folders, tmp_path):
    cfg = bench.BenchConfig.quick(models=(tiny_folders["target"],), draft_model="absent-draft", n_prompts=1,
                                  max_new_tokens=10, repeats=1, hf_builtins=False, sampling=False, jacobi=True,
                                  jacobi_block=4, out_dir=str(tmp_path))
    rows = {r["method"]: r for r in bench.run_benchmark(cfg)["greedy"]}
    parallel = [r for r in rows.values() if r["kind"] == "jacobi"]
    assert len(parallel) == 6 and all("(block 4)" in r["method"] for r in parallel)
    for r in parallel:
        assert r["identical"] is True, r["method"]
        assert r["greedy"] and 1.0 <= r["tokens_per_step"] <= 4.0 and 0.0 <= r["acceptance"] <= 1.0
    assert not bench.BenchConfig.quick().jacobi and bench.BenchConfig().jacobi       # on by default in full runs



@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """A tiny random Llama with the shipped tokenizer, saved as a folder (as tiny_folders')."""
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
