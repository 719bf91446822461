"""The lab on another device: the lossless checks, a benchmark and the calibration in one run, written to
``data/bench/device/<device>.json`` and a Markdown table beside it (the README quotes the GPU's).

``python -m labkit device-bench --device auto`` runs it on whatever accelerator this machine has (a CUDA GPU, Apple's
MPS), or on the CPU. Nothing in the tests needs an accelerator: they run the same code on the CPU at tiny sizes.

Sections (each row names its device and dtype):

- **lossless**: tiny random models of the four supported families in each reduced precision, every drafter under
  every draft policy (:func:`labkit.measure.lossless.check_lossless`) against the plain loop in that precision.
- **bench**: the shipped model in each precision on held-out stdlib prompts and on prompts from the installed
  packages' source (outside the project): the plain loop, transformers' ``generate``, the shipped draft (its own
  weights where the shipped int8 draft weights have no kernel on the device), the draft head, a confidence tree;
  interleaved through :mod:`labkit.measure.harness`.
- **calibration**: c against the fraction of blocks kept, c_v against tokens verified, α and the predicted speedup
  beside the measured one (:func:`labkit.measure.costs.calibration.calibrate`), for the shipped model and for a random
  model of its family at a size where the device's memory traffic, not its launch overhead, may dominate.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import transformers
from tqdm.auto import tqdm

from ...artifacts import arguments
from ...artifacts.models import FAMILIES, family_config, load_draft_head, load_model, model_folder, random_model
from ...artifacts.paths import BENCH_DIR
from ...artifacts.prompts import benchmark_prompts, source_label
from ...artifacts.results import best_config
from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.devices import device_name, resolve_device, resolve_dtype
from ...core.draft_weights import draft_weights as build_draft_weights
from ...core.policies import StaticThreshold
from ...core.tree_shapes import draft_tree
from ..costs.calibration import calibrate
from ..harness import Decoder, Method, run_interleaved, summarise
from ..lossless import check_lossless, first_divergence
from ..machine import cpu_model, machine_info

__all__ = ["DeviceBenchConfig", "family_model", "lossless_section", "bench_section", "device_bench",
           "markdown_table", "export_prompts", "calibration_section", "divergence_section", "SECTIONS", "main"]

@dataclass
class DeviceBenchConfig:
    """What one device run measures (defaults: the full run; :meth:`quick`: a check that the code runs)."""

    device: str = "auto"
    dtypes: tuple = ("fp32", "bf16")              # the benchmark's and the calibration's precisions
    lossless_dtypes: tuple = ("bf16", "fp16")
    lossless_tokens: int = 24
    sources: tuple = ("stdlib", "packages")
    n_prompts: int = 4
    max_new_tokens: int = 96
    repeats: int = 3
    wide: dict = field(default_factory=lambda: {"hidden_size": 5120, "n_layers": 40})   # a 13B-shaped model
    sections: tuple = ("lossless", "bench", "divergence", "calibration")
    seed: int = 0
    out_dir: str = str(BENCH_DIR / "device")

    @classmethod
    def quick(cls, **overrides) -> DeviceBenchConfig:
        base = dict(dtypes=("fp32", "bf16"), lossless_dtypes=("bf16",), lossless_tokens=8, sources=("stdlib",),
                    n_prompts=1, max_new_tokens=12, repeats=1, wide={"hidden_size": 512, "n_layers": 4})
        base.update(overrides)
        return cls(**base)


def family_model(family: str, *, device, dtype, seed: int = 0):
    """A tiny random model of one supported family (4 layers, hidden 32, 97 tokens), its LM head sharpened so that
    greedy paths are rarely near-ties and drafts are sometimes right."""
    model = random_model(family_config(family), device=device, dtype=dtype, seed=seed)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(4.0)
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = None, 0
    return model


def lossless_section(cfg: DeviceBenchConfig, device) -> list[dict]:
    """One row per (family, dtype): drafter × policy runs identical to the plain loop, out of how many, and the
    drafters that could not run on the device (with their error)."""
    rows = []
    for family in tqdm(FAMILIES, desc="lossless"):
        for dtype in cfg.lossless_dtypes:
            model = family_model(family, device=device, dtype=resolve_dtype(dtype), seed=cfg.seed)
            generator = torch.Generator().manual_seed(cfg.seed)
            prompts = [torch.randint(0, 97, (1, n), generator=generator) for n in (5, 17)]
            prompts.append(torch.cat([prompts[0]] * 3, dim=1))                 # repeats: lookup drafts fire
            checked = check_lossless(model, prompts, cfg.lossless_tokens, seed=cfg.seed)
            ran = [r for r in checked if not r["error"]]
            rows.append({"family": family, "dtype": dtype, "drafters": len({r["drafter"] for r in ran}),
                         "runs": sum(r["prompts"] for r in ran), "identical": sum(r["identical"] for r in ran),
                         "mismatched": sorted({r["drafter"] for r in ran if r["identical"] != r["prompts"]}),
                         "not_run": sorted({f"{r['drafter']} ({r['error']})" for r in checked if r["error"]})})
    return rows


def _runnable_weights(model, weights):
    """The shipped draft weights if they run on the model's device, else None (the model's own) and why not."""
    if weights is None:
        return None, ""
    try:
        build_draft_weights(model, weights)
    except RuntimeError as error:
        return None, f"{weights} draft weights have no kernel here ({str(error).splitlines()[0][:120]})"
    return weights, ""


def _decoders(model, note: list) -> list[Decoder]:
    config = best_config("default")
    weights, why = _runnable_weights(model, config.draft_weights)
    if why:
        note.append(why)
    pad = model.generation_config.pad_token_id
    rows = [Decoder(Method("plain", "labkit plain loop", "default", "baseline"),
                    lambda ids, n: autoregressive_generate(model, ids, n)),
            Decoder(Method("generate", "transformers generate", "default", "baseline"),
                    lambda ids, n: model.generate(ids.to(model.device), max_new_tokens=n, do_sample=False,
                                                  pad_token_id=pad))]
    policy = config.make_policy()
    rows.append(Decoder(Method("self-spec", "shipped draft, chain", "default", weights=weights or ""),
                        lambda ids, n: speculative_generate(model, ids, skip=config.skip, draft_weights=weights,
                                                            policy=policy, max_new_tokens=n)))
    tree_policy = config.make_policy()
    rows.append(Decoder(Method("tree", "shipped draft, confidence tree", "default", weights=weights or ""),
                        lambda ids, n: speculative_generate(model, ids, skip=config.skip, draft_weights=weights,
                                                            policy=tree_policy, max_new_tokens=n,
                                                            tree=draft_tree("confidence"))))
    try:
        head = load_draft_head(model_folder("default"))
    except FileNotFoundError:
        head = None
    if head is not None:
        head_policy = StaticThreshold(head.threshold, 12)
        rows.append(Decoder(Method("self-spec", "draft head on its set", "default", weights=weights or ""),
                            lambda ids, n: speculative_generate(model, ids, skip=head.skip, draft_head=head,
                                                                draft_weights=weights, policy=head_policy,
                                                                max_new_tokens=n)))
    return rows


def bench_section(cfg: DeviceBenchConfig, device) -> tuple[list[dict], list[str]]:
    """The shipped model's rows per (dtype, prompt source), and notes (what could not run as shipped)."""
    rows, notes = [], []
    for dtype in cfg.dtypes:
        model, tokenizer = load_model("default", device=device, dtype=dtype)
        note: list[str] = []
        decoders = _decoders(model, note)
        notes += [f"{dtype}: {n}" for n in note]
        for source in cfg.sources:
            prompts = benchmark_prompts(cfg.n_prompts, seed=cfg.seed, source=source)
            ids = [tokenizer(p.text, return_tensors="pt", add_special_tokens=False)["input_ids"] for p in prompts]
            runs = run_interleaved(decoders, ids, max_new_tokens=cfg.max_new_tokens, repeats=cfg.repeats,
                                   desc=f"bench {dtype} {source_label(source)}")
            for row in summarise(runs):
                rows.append({"dtype": dtype, "source": source_label(source),
                             "prompt_tokens": sum(i.shape[1] for i in ids) / len(ids), **row})
    return rows, notes


def divergence_section(cfg: DeviceBenchConfig, device) -> list[dict]:
    """For each reduced precision: where the shipped draft's greedy output first leaves the plain loop's on each
    benchmark prompt, with the target's top-two logit gap there (:func:`labkit.measure.lossless.first_divergence`)."""
    rows, config = [], best_config("default")
    for dtype in [d for d in cfg.dtypes if resolve_dtype(d) != torch.float32]:
        model, tokenizer = load_model("default", device=device, dtype=dtype)
        weights, _ = _runnable_weights(model, config.draft_weights)
        for source in cfg.sources:
            for prompt in benchmark_prompts(cfg.n_prompts, seed=cfg.seed, source=source):
                ids = tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
                rows.append({"dtype": dtype, "source": source_label(source), **first_divergence(
                    model, ids, cfg.max_new_tokens, skip=config.skip, draft_weights=weights,
                    policy=config.make_policy())})
    return rows


def calibration_section(cfg: DeviceBenchConfig, device) -> list[dict]:
    """The calibration (:func:`labkit.measure.costs.calibration.calibrate`) of the shipped model in each precision, with
    its shipped draft set, and of a random model of its family at ``cfg.wide``'s size in the last precision (its
    costs are the point: a random model's agreement says nothing about a trained one's)."""
    rows, texts = [], [p.text for p in benchmark_prompts(2, seed=cfg.seed, source=cfg.sources[0])]
    skip = best_config("default").skip
    for dtype in cfg.dtypes:
        model, tokenizer = load_model("default", device=device, dtype=dtype)
        result = calibrate(model, tokenizer, prompts=texts, skip=skip, skip_source="shipped draft set",
                           model_name="default (trained, 7 M)")
        rows.append(result.to_dict())
    wide = random_model("default", device=device, dtype=cfg.dtypes[-1], seed=cfg.seed, **cfg.wide)
    size = sum(p.numel() for p in wide.parameters())
    label = f"{size / 1e9:.1f} B" if size >= 1e9 else f"{size / 1e6:.0f} M"
    rows.append(calibrate(wide, tokenizer, prompts=texts, model_name=f"random, {label}").to_dict())
    return rows


SECTIONS = ("lossless", "bench", "divergence", "calibration")


def device_bench(cfg: DeviceBenchConfig) -> Path:
    """Run ``cfg.sections`` on ``cfg.device`` and write ``<out_dir>/<device slug>.json`` and ``.md``; returns the
    json. Sections not run keep what an earlier run of the same device wrote there (each section records its own
    configuration and machine under ``runs``), so a short second run adds a section without losing the first's."""
    unknown = set(cfg.sections) - set(SECTIONS)
    if unknown or not cfg.sections:
        raise ValueError(f"sections must be some of {', '.join(SECTIONS)}, got {list(cfg.sections)}")
    device = resolve_device(cfg.device)
    name = cpu_model().get("cpu_model") or "cpu" if device.type == "cpu" else device_name(device)
    slug = "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")
    path = Path(cfg.out_dir) / f"{slug}.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    run = {"config": asdict(cfg), "machine": {**machine_info(), "transformers": transformers.__version__,
                                              "cuda": torch.version.cuda if device.type == "cuda" else None}}
    result.update(device=str(device), device_name=name, **run)
    makers = {"lossless": lossless_section, "bench": bench_section, "divergence": divergence_section,
              "calibration": calibration_section}
    path.parent.mkdir(parents=True, exist_ok=True)
    for section in [s for s in SECTIONS if s in cfg.sections]:
        rows = makers[section](cfg, device)
        if section == "bench":
            rows, result["notes"] = rows
        result[section] = rows
        result.setdefault("runs", {})[section] = run
        path.write_text(json.dumps(result, indent=1, default=_plain) + "\n")     # after each section: an
        path.with_suffix(".md").write_text(markdown_table(result))               # interrupted run keeps it
    return path


def _plain(value):
    return None if isinstance(value, float) and math.isnan(value) else str(value)


def _fmt(value, spec: str = ".2f") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def markdown_table(result: dict) -> str:
    """The run as Markdown: the lossless rows, the benchmark (speedup with its min–max over repetitions), where a
    reduced precision left the plain loop, and the calibration (costs, α, predicted beside measured)."""
    lines = [f"### {result['device_name']} ({result['device']}), torch {result['machine']['torch']}, "
             f"transformers {result['machine']['transformers']}"]
    if result.get("lossless"):
        lines += ["", "| family | dtype | drafters | runs identical to the plain loop | not run on this device |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['family']} | {r['dtype']} | {r['drafters']} | {r['identical']} / {r['runs']} | "
                  f"{'; '.join(r['not_run']) or '–'} |" for r in result["lossless"]]
    if result.get("bench"):
        lines += ["", "| dtype | prompts | method | ms/token | speedup (min–max) | acceptance | tokens/step | "
                  "identical |", "|---|---|---|---|---|---|---|---|"]
        for r in result["bench"]:
            spread = f"{_fmt(r['speedup'])}× ({_fmt(r['speedup_min'])}–{_fmt(r['speedup_max'])})"
            lines.append(f"| {r['dtype']} | {r['source']} | {r['method']} | {_fmt(r['ms_per_token'])} | {spread} | "
                         f"{_fmt(r['acceptance'])} | {_fmt(r['tokens_per_step'])} | {r['identical']} |")
    lines += _divergence_lines(result.get("divergence", []))
    lines += _calibration_lines(result.get("calibration", []))
    lines += [f"\n{n}" for n in result.get("notes", [])]
    return "\n".join(lines) + "\n"


def _divergence_lines(rows: list[dict]) -> list[str]:
    split = [r for r in rows if r["position"] is not None]
    if not rows:
        return []
    lines = ["", f"Reduced precision: {len(split)} of {len(rows)} greedy runs of the shipped draft left the plain "
             "loop's tokens in the same precision."]
    if split:
        lines += ["", "| dtype | prompts | first different new token | plain loop | speculative | one-forward argmax | "
                  "top-2 logit gap | one rounding step |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['dtype']} | {r['source']} | {r['position']} of {r['new_tokens']} | {r['plain_token']} | "
                  f"{r['spec_token']} | {r['prefix_argmax']} | {_fmt(r['top2_gap'], '.3g')} | "
                  f"{_fmt(r['rounding_step'], '.3g')} |" for r in split]
    return lines


def _calibration_lines(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = ["", "| model | dtype | plain ms/token | c at 75 / 50 / 25 % of blocks kept | c_v at γ = 1 / 4 / 8 | "
             "draft set: kept, c, α | γ | predicted | measured (min–max) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = {round(d["kept"], 2): d["c"] for d in r["draft_costs"] if d["label"] != "draft set"}
        c_v = {v["gamma"]: v["c_v"] for v in r["verify_costs"]}
        s = r["summary"]
        lines.append(f"| {r['model']} | {r['dtype']} | {_fmt(r['plain_ms'])} | "
                     f"{' / '.join(_fmt(c.get(k)) for k in (0.75, 0.5, 0.25))} | "
                     f"{' / '.join(_fmt(c_v.get(g)) for g in (1, 4, 8))} | {_fmt(s['kept'])}, {_fmt(s['c'])}, "
                     f"{_fmt(s['alpha'])} | {s['gamma']} | {_fmt(s['predicted_speedup'])}× | "
                     f"{_fmt(s['measured_speedup'])}× ({_fmt(s['measured_min'])}–{_fmt(s['measured_max'])}) |")
    return lines


def export_prompts(folder: str | Path, sources: Sequence[str], n: int, seed: int = 0) -> list[Path]:
    """The benchmark's held-out prompts of each source as ``<folder>/<source>.jsonl``: a machine without this one's
    interpreter and packages (a GPU box) then times the very same prompts (``--sources <folder>/stdlib.jsonl ...``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for source in sources:
        path = folder / f"{source_label(source)}.jsonl"
        chosen = benchmark_prompts(n, seed=seed, source=source)
        lines = [json.dumps({"text": p.text, "source": p.source}) for p in chosen]
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> Path:
    parser = arguments.command_parser(__doc__.split("\n\n")[0])      # prog: how it was called (labkit.cli)
    parser.add_argument("--device", type=arguments.device, default="auto",
                        help="cpu, cuda, cuda:N, mps or auto (default)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that everything runs")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=None,
                        help="run only these sections (default: all); the others keep an earlier run's rows")
    parser.add_argument("--out-dir", type=arguments.output_folder, default=None,
                        help="where to write (default data/bench/device)")
    parser.add_argument("--sources", nargs="+", type=arguments.prompt_source, default=None,
                        help="prompt sources: stdlib, packages, stdlib-long, packages-long or .jsonl/.txt files")
    parser.add_argument("--export-prompts", type=arguments.output_folder, metavar="FOLDER", default=None,
                        help="only write the benchmark's prompts of --sources to FOLDER/<source>.jsonl, then stop")
    args = parser.parse_args(argv)
    sections = tuple(args.sections) if args.sections else SECTIONS
    cfg = (DeviceBenchConfig.quick if args.quick else DeviceBenchConfig)(device=args.device, sections=sections)
    if args.sources:
        cfg.sources = tuple(args.sources)
    if args.out_dir:
        cfg.out_dir = args.out_dir
    if args.export_prompts:
        for path in export_prompts(args.export_prompts, cfg.sources, cfg.n_prompts, cfg.seed):
            print(f"wrote {path}")
        return Path(args.export_prompts)
    if resolve_device(args.device).type == "cpu":
        torch.set_num_threads(1)                            # the lab's CPU timings: one thread
    path = device_bench(cfg)
    print(path.with_suffix(".md").read_text())
    print(f"wrote {path}")
    return path
