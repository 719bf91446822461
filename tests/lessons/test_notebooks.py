"""Every notebook: clean on disk, runs under papermill in FAST mode, and records sane numbers; its exercises say
"correct" with the reference answers (SOLUTIONS = True) and "not yet" without them; notebook 00's core symbols are
rows of docs/notation.md's table, which it links to.

Executed copies are kept under build/notebooks/ for inspection, metrics under build/metrics/.

One execution per set of parameters: where the browser layer (tests/browser) has run a notebook in JupyterLab in this
worker (FAST, SOLUTIONS = False as committed; the ``shared_runs`` fixture of tests/conftest.py), the checks below
that ask for those same parameters (the "not yet" verdicts; the metrics of a notebook without exercises) read that
run; otherwise, and always for the reference answers (SOLUTIONS = True), they execute the notebook with papermill.
Under xdist, every test here and in the browser layer whose id is a notebook's stem is in that notebook's group
(``notebook-<stem>``, tests/conftest.py): one worker runs them, the browser's first.
"""
import json
import re
import time
from pathlib import Path

import nbformat
import papermill as pm
import pytest

from labkit.artifacts.paths import BUILD_DIR, REPO
from labkit.lessons.notebook import execute_notebook, notebook_paths
from labkit.lessons.notebook_text import differing_lines

NOTEBOOKS = notebook_paths()
SESSION_START = time.time()
#: The notebooks with timings that run a second FAST time, to check that two runs print the same text except outputs
#: that say "this machine" (issue 35). Only those whose one FAST run is cheap (about a minute on the 2-core VM): a
#: second run of every notebook would take the suite past its 20 minutes. The others rely on their sentence
#: builders' tests, each of which checks that a live line says "this machine".
FAST_TWICE = ("06_parallel_decoding", "09_choosing_a_drafter", "11_roofline_and_regimes", "12_width_drafts")
REQUIRED_PARAMETERS = {"FAST", "SEED", "OUTPUT_DIR"}

# Ranges, not exact floats: what each notebook's metrics JSON must satisfy in FAST mode.
EXPECTED = {
    "00_setup_check": {"n_new_tokens": (1, 10_000), "n_layers": (1, 1000), "n_parameters": (1e5, 1e9),
                       "showcase_candidates_tried": (1, 32), "showcase_repeated_share": (0.0, 0.5)},
    "01_bayesian_optimization": {"forrester_best_found": (-6.0208, -5.9), "forrester_gap": (-1e-6, 0.1),
                                 "ei_median_final_gap": (-1e-6, 0.5), "random_median_final_gap": (-1e-6, 10.0),
                                 "exploration_trapped_settings": (1, 6), "branin_median_best_gp": (0.3978, 10.0),
                                 "branin_median_best_tpe": (0.3978, 20.0), "branin_median_best_random": (0.3978, 60.0),
                                 "update_ms": (0.0, 1000.0), "toy_best_speedup": (1.0, 3.0), "ard_hit_rate": (0.5, 1.0),
                                 "toy_skip_nothing_ms": (11.43, 20.0), "toy_skip_everything_ms": (11.43, 30.0)},
    "02_layer_skip_draft": {"agreement_50_default": (0.6, 1.0), "agreement_50_plain": (0.0, 0.95),
                            "agreement_50_gap": (0.05, 1.0), "verify_5_steps": (0.9, 3.0),
                            "speedup_predicted": (0.9, 10.0), "best_alpha": (0.3, 1.0), "n_trials": (20, 20),
                            "token_agreement": (0.2, 1.0), "greedy_identical_to_plain": (1, 1),
                            "speedup_measured_fixed_gamma": (0.2, 20.0), "search_seconds": (0.0, 120.0),
                            "accepted_per_drafted_fixed_gamma": (0.05, 1.0), "exercise_f_ms": (0.1, 100.0),
                            "priced_trials": (12, 12), "priced_best_speedup_predicted": (0.5, 10.0),
                            "held_out_speedup_shipped": (0.5, 10.0), "held_out_speedup_modelled_pick": (0.3, 10.0),
                            "held_out_identical": (1, 1)},
    "03_draft_verify_timeline": {"acceptance_rate_greedy": (0.2, 1.0), "acceptance_rate_sampling": (0.05, 1.0),
                                 "tokens_per_step": (1.2, 13.0), "repeated_share_first_prompt": (0.2, 1.0),
                                 "repeated_share_showcase": (0.0, 0.2), "one_pass_check_ok": (1, 1),
                                 "greedy_identical_to_plain": (1, 1), "ms_per_token": (0.01, 1000.0),
                                 "n_new_tokens": (48, 48), "speedup_self_draft": (0.2, 5.0),
                                 "initial_threshold": (0.05, 0.95), "carried_final_threshold": (0.0, 1.0),
                                 # 4 prompts x 64 tokens: at least one token a step, at most max_draft + 1
                                 "carried_steps": (4 * 64 // 13, 4 * 64)},
    "04_playground": {"update_ms": (0.0, 500.0), "n_cells": (1, 10_000), "best_speedup": (0.5, 10.0),
                      "median_relative_spread": (0.0, 1.0), "live_speedup": (0.05, 20.0), "live_vs_grid": (0.2, 5.0),
                      "live_identical_to_plain": (1, 1), "break_even_alpha": (0.05, 0.999)},
    "07_adaptive_skip_sets": {"n_prompts": (2, 2), "n_new_tokens": (40, 40), "agreement_searched_stdlib": (0.5, 1.0),
                              "agreement_searched_packages": (0.3, 1.0), "acceptance_searched_stdlib": (0.3, 1.0),
                              "acceptance_searched_packages": (0.2, 1.0), "best_speedup_stdlib": (0.5, 5.0),
                              "best_speedup_packages": (0.5, 5.0), "max_select_share": (0.0, 0.3),
                              "identical_to_plain": (1, 1), "n_methods": (6, 6),
                              "int8_c_over_fp32_c_packages": (0.2, 2.0), "int8_acceptance_packages": (0.2, 1.0),
                              "int8_speedup_stdlib": (0.3, 5.0), "int8_speedup_packages": (0.3, 5.0),
                              "head_acceptance_stdlib": (0.3, 1.0), "head_acceptance_packages": (0.3, 1.0),
                              "head_speedup_stdlib": (0.3, 5.0), "head_speedup_packages": (0.3, 5.0),
                              "n_repeats": (3, 3), "knapsack_ms_over_static_packages": (0.5, 3.0),
                              "runtime_s": (0.0, 300.0)},
    "05_speculative_sampling": {"alpha_position": (0.05, 0.999), "alpha_tv_identity_gap": (0.0, 1e-4),
                                "exact_tv_speculative": (0.0, 1e-4), "exact_tv_resample": (1e-3, 1.0),
                                "exact_tv_greedy": (1e-3, 1.0), "mc_p_value_speculative": (0.01, 1.0),
                                "mc_p_value_resample": (0.0, 0.01), "mc_p_value_greedy": (0.0, 0.01),
                                "mc_correct_rule_passes": (1, 1), "mc_wrong_rules_fail": (2, 2),
                                "n_tested_positions": (10, 100), "sweep_max_alpha_gap": (0.0, 0.2),
                                "sweep_measured_alpha_min": (0.2, 1.0), "sweep_measured_alpha_max": (0.3, 1.0),
                                "e_over_measured_mean": (0.7, 1.6), "measured_speedup_median": (0.2, 5.0),
                                "multi_token_exact_pass": (2, 2), "multi_token_wrong_fails": (1, 1),
                                "alpha_min_temperature": (0.4, 1.6)},     # one of FAST's sweep temperatures
    "06_parallel_decoding": {"identical_to_plain": (1, 1), "iterations_never_exceed_tokens": (1, 1),
                             "vanilla_forwards_per_token": (0.8, 1.0), "gs_self_draft_forwards_per_token": (0.2, 1.0),
                             "best_parallel_forwards_per_token": (0.2, 1.0), "self_spec_forwards_per_token": (0.2, 1.0),
                             "vanilla_one_token_share": (0.5, 1.0), "speedup_jacobi_pad": (0.2, 3.0),
                             "speedup_self_spec": (0.3, 5.0), "speedup_prompt_lookup": (0.3, 10.0),
                             "lookahead_identical_to_plain": (1, 1), "lookahead_tokens_per_forward_best": (1.0, 4.0),
                             "lookahead_pool_final": (1, 10_000), "lookahead_section_s": (0.0, 60.0),
                             "draftless_identical_to_plain": (1, 1), "draftless_n": (3, 4),
                             "draftless_best_tokens_per_verify": (1.0, 8.0)},
    "08_saturation_and_early_exit": {"saturated_at_half_default": (0.3, 1.0), "saturated_at_half_plain": (0.0, 0.8),
                                     "saturation_gap": (0.05, 1.0), "auc_softmax_default": (0.55, 1.0),
                                     "auc_classifier_default": (0.55, 1.0), "auc_best_default": (0.55, 1.0),
                                     "hf_over_labkit_first_layer_tokens": (1.3, 3.0),
                                     "labkit_first_equals_last_layer_tokens": (1, 1),
                                     "early_exit_identical_to_plain": (1, 1), "all_drafters_identical_to_plain": (1, 1),
                                     "n_drafters": (4, 4), "early_exit_best_acceptance": (0.3, 1.0),
                                     "early_exit_best_speedup": (0.2, 5.0), "layer_skip_speedup": (0.3, 5.0),
                                     "exit_explorer_update_ms": (0.0, 500.0), "runtime_s": (1.0, 300.0)},
    "09_choosing_a_drafter": {"all_drafters_identical_to_plain": (1, 1), "n_drafters": (7, 7),
                              "best_speedup": (0.5, 10.0), "layer_skip_speedup": (0.3, 5.0),
                              "combo_exit_layer": (1, 15), "gate_control_rows": (6, 6),
                              "gate_over_ungated_max": (0.3, 3.0), "gate_over_random_max": (0.3, 3.0),
                              # the random control turns as many steps plain as the gate, within sampling noise
                              "gated_fraction_gap_max": (0.0, 0.12),
                              "gate_explorer_update_ms": (0.0, 500.0), "runtime_s": (1.0, 300.0)},
    "10_draft_trees": {"drawn_identical_to_plain": (1, 1), "identical_to_plain": (1, 1), "drawn_steps": (1, 4),
                       "n_shapes": (5, 5), "n_prompts": (2, 2), "cv_1_node": (0.7, 3.0), "cv_32_nodes": (1.2, 12.0),
                       "cv_32_over_cv_1": (1.1, 10.0), "cheap_up_to_nodes": (0, 32),
                       "chain_tokens_per_step_stdlib": (1.5, 13.0), "chain_speedup_stdlib": (0.5, 5.0),
                       "chain_speedup_packages": (0.4, 5.0), "best_tree_speedup_stdlib": (0.4, 5.0),
                       "best_tree_speedup_packages": (0.4, 5.0), "dynamic16_nodes_per_verify": (2.0, 16.0),
                       "static_nodes_per_verify": (2.0, 10.0), "stepper_update_ms": (0.0, 500.0),
                       "cascades_identical_to_plain": (1, 1), "n_cascades": (3, 3),
                       "cascade_lookup_speedup_stdlib": (0.4, 5.0), "cascade_aggressive_speedup_stdlib": (0.2, 5.0),
                       "cascade_dynamic_speedup_stdlib": (0.3, 5.0), "aggressive_level_kept": (0.0, 0.5),
                       "lookup_level_kept": (0.05, 1.0), "lookup_ms_per_call": (0.0, 2.0),
                       "runtime_s": (1.0, 150.0)},
    # timings on a shared 2-core machine: ranges that hold on a busy one (the notebook's own sentences say more)
    "11_roofline_and_regimes": {"bandwidth_gbs": (0.5, 10_000.0), "cache_gbs": (0.5, 100_000.0),
                                "gflops": (0.5, 1e6), "ridge": (0.01, 1000.0), "wide_parameters_m": (80.0, 90.0),
                                "shipped_mlp_ms": (0.005, 5.0), "shipped_mlp_time_8_over_1": (0.5, 8.0),
                                "wide_mlp_gbs": (0.5, 1000.0), "wide_mlp_memory_share": (0.05, 2.0),
                                "wide_mlp_compute_share_widest": (0.1, 2.0), "shipped_c_half": (0.3, 1.2),
                                "shipped_c_quarter": (0.1, 1.0), "wide_c_three_quarters": (0.4, 1.1),
                                "wide_c_half": (0.25, 0.9), "wide_c_quarter": (0.1, 0.75),
                                "wide_max_c_minus_kept": (0.0, 0.35), "shipped_fixed_share": (-0.3, 0.8),
                                "wide_fixed_share": (-0.3, 0.6), "shipped_cv_2": (0.5, 3.0), "wide_cv_2": (0.5, 4.0),
                                "anatomy_arithmetic_share": (0.0, 1.0), "anatomy_blocks_draft": (8, 8),
                                "paper_rows": (8, 8),
                                "wide_cv_64": (1.0, 30.0), "wide_last_cv_2": (0.5, 4.0), "wide_last_cv_8": (0.5, 6.0),
                                "n_dtypes": (2, 2), "explorer_update_ms": (0.0, 500.0),
                                "shipped_alpha": (0.5, 1.0), "wide_alpha": (0.3, 1.0), "wide_last_alpha": (0.3, 1.0),
                                "shipped_gamma": (1, 8), "wide_gamma": (1, 8), "wide_last_gamma": (1, 8),
                                "shipped_predicted_speedup": (0.3, 3.0), "shipped_measured_speedup": (0.3, 3.0),
                                "wide_predicted_speedup": (0.2, 3.0), "wide_measured_speedup": (0.2, 3.0),
                                "wide_last_predicted_speedup": (0.3, 3.0), "wide_last_measured_speedup": (0.3, 3.0),
                                "shipped_error": (-0.5, 0.6), "wide_error": (-0.5, 0.6), "wide_last_error": (-0.5, 0.6),
                                "shipped_seconds": (0.0, 60.0), "wide_seconds": (0.0, 90.0),
                                "wide_last_seconds": (0.0, 90.0), "runtime_s": (1.0, 150.0)},
    # agreement, recall and sparsity are deterministic; c and speedups are timings on a shared machine
    "12_width_drafts": {"sparsity_median_fraction": (0.05, 0.95), "recall_predictor_quarter": (0.5, 1.0),
                        "recall_static_quarter": (0.0, 0.8), "alpha_depth": (0.5, 1.0),
                        "alpha_dynamic_half": (0.5, 1.0), "alpha_pruned_half": (0.3, 1.0),
                        "params_depth": (0.4, 0.8), "params_pruned_half": (0.6, 0.8), "c_depth": (0.05, 3.0),
                        "c_dynamic_half": (0.05, 5.0), "c_pruned_half": (0.05, 5.0),
                        "gathered_over_dense_quarter": (0.01, 10.0),
                        "reference_depth_speedup_packages": (0.3, 5.0),
                        "reference_best_width_speedup_packages": (0.3, 5.0), "live_identical_to_plain": (1, 1),
                        "live_best_width_speedup": (0.2, 5.0), "explorer_update_ms": (0.0, 500.0),
                        "runtime_s": (1.0, 150.0)},
    # the reference group 13 (committed) and a small live sweep (batch 1, 4, 8) on a shared machine
    "13_batches": {"reference_batch_sizes": (6, 6), "reference_max_batch": (32, 32),
                   "reference_speedup_batch_1": (0.3, 5.0), "reference_speedup_batch_max": (0.1, 5.0),
                   "reference_plain_tokens_per_s_ratio": (0.5, 64.0), "reference_policy_gap": (0.2, 2.0),
                   "predicted_crossover": (-1.0, 64.0), "measured_crossover": (-1.0, 64.0),
                   "reference_alpha": (0.0, 1.0), "live_batch_sizes": (3, 3), "live_identical": (1, 1),
                   "live_speedup_batch_1": (0.2, 5.0), "live_speedup_batch_max": (0.1, 5.0),
                   "explorer_update_ms": (0.0, 500.0), "runtime_s": (1.0, 150.0)},
}


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/NN_*.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_hygiene(path):
    nb = nbformat.read(str(path), as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "commit without outputs"
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    params = pm.inspect_notebook(str(path))
    assert REQUIRED_PARAMETERS <= set(params), f"parameters cell lacks {REQUIRED_PARAMETERS - set(params)}"
    for name, spec in params.items():   # literals only: papermill can read a type-able default
        assert spec["default"] not in (None, ""), name


def has_exercises(path) -> bool:
    return "SOLUTIONS" in pm.inspect_notebook(str(path))


def shared_run(path, shared_runs, out_dir: Path) -> tuple[Path, dict | None] | None:
    """The browser layer's run of ``path`` in this worker, if there is one: its notebook (outputs as JupyterLab holds
    them) written to ``out_dir`` as an executed copy, and its metrics record (None if it wrote none)."""
    run = shared_runs.get(path.stem)
    if run is None:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    executed = out_dir / path.name
    executed.write_text(json.dumps(run["notebook"]))
    print(f"{path.stem}: checked on the browser layer's run ({run['where']}), not executed again")
    return executed, run["metrics"]


def committed_parameters(path) -> dict:
    return {name: spec["default"] for name, spec in pm.inspect_notebook(str(path)).items()}


def verdicts(executed) -> list[str]:
    """The verdict lines ('correct: ...' / 'not yet: ...') printed by the cells tagged exercise-check."""
    nb = nbformat.read(str(executed), as_version=4)
    lines = []
    for cell in nb.cells:
        if "exercise-check" in cell.get("metadata", {}).get("tags", []):
            text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
            lines += [ln for ln in text.splitlines() if re.match(r"^(correct|not yet): ", ln)]
    return lines


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if has_exercises(p)], ids=lambda p: p.stem)
def test_exercises_have_a_placeholder_a_hidden_hint_and_a_check(path):
    nb = nbformat.read(str(path), as_version=4)
    tags = [c.get("metadata", {}).get("tags", []) for c in nb.cells]
    placeholders = [c for c, t in zip(nb.cells, tags) if "exercise" in t]
    checks = [c for c, t in zip(nb.cells, tags) if "exercise-check" in t]
    assert len(placeholders) == len(checks) >= 1
    for placeholder, check in zip(placeholders, checks):
        assert re.search(r"(return None|= None)", placeholder.source) and "SOLUTIONS" not in placeholder.source
        assert "if SOLUTIONS:" in check.source and "exercises.check_" in check.source
    assert any("<details>" in c.source for c in nb.cells if c.cell_type == "markdown"), "hints are hidden"


def test_core_symbols_of_00_are_rows_of_the_notation_table():
    """00 opens with the few symbols every notebook uses, rows copied from docs/notation.md, and links to the full
    table there (one table to keep, not two)."""
    table = [ln for ln in (REPO / "docs" / "notation.md").read_text().splitlines() if ln.startswith("|")]
    nb = nbformat.read(str(REPO / "notebooks" / "00_setup_check.ipynb"), as_version=4)
    core = next(c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## The core symbols"))
    rows = [ln for ln in core.splitlines() if ln.startswith("|")]
    assert rows[:2] == table[:2], "the same header as docs/notation.md"
    symbols = [r.split("|")[1].strip() for r in rows[2:]]
    assert {"p", "q", "α", "γ", "c", "c_v"} <= set(symbols), symbols
    assert [r for r in rows if r not in table] == [], "rows that differ from docs/notation.md's"
    assert "(../docs/notation.md)" in core, "the full table is linked"


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_records_metrics(path, shared_runs):
    metrics_dir = BUILD_DIR / "metrics"
    target = metrics_dir / f"{path.stem}.json"
    target.unlink(missing_ok=True)
    solutions = {"SOLUTIONS": True} if has_exercises(path) else {}
    shared = None if solutions else shared_run(path, shared_runs, BUILD_DIR / "notebooks")
    if shared is not None:                                 # FAST, no other parameter: the browser's run is this one
        executed, record = shared
        assert record is not None, f"{path.stem} recorded no metrics in the browser layer's run"
        metrics_dir.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(record, indent=2))
    else:
        executed = execute_notebook(path, {"FAST": True, "OUTPUT_DIR": str(metrics_dir), **solutions})
        record = json.loads(target.read_text())
    assert path.stem in EXPECTED, f"add the metric ranges of {path.stem} to EXPECTED"
    for key, (lo, hi) in EXPECTED[path.stem].items():
        value = record["metrics"].get(key)
        assert value is not None and lo <= value <= hi, f"{key}={value!r} outside [{lo}, {hi}]"
    if solutions:                                          # the reference answers pass their own checks
        found = verdicts(executed)
        assert found and all(v.startswith("correct: ") for v in found), found


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if has_exercises(p)], ids=lambda p: p.stem)
def test_exercises_say_not_yet_without_the_solutions(path, tmp_path, shared_runs):
    out_dir = BUILD_DIR / "notebooks-not-yet"
    committed = committed_parameters(path)["SOLUTIONS"] == "False"     # what the browser layer's run used
    shared = shared_run(path, shared_runs, out_dir) if committed else None
    if shared is not None:
        executed, _ = shared
    else:
        executed = execute_notebook(path, {"FAST": True, "OUTPUT_DIR": str(tmp_path), "SOLUTIONS": False},
                                    out_dir=out_dir)
    found = verdicts(executed)
    assert found and all(v.startswith("not yet: ") for v in found), found


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem in FAST_TWICE], ids=lambda p: p.stem)
def test_two_fast_runs_agree_except_this_machine(path, shared_runs, tmp_path):
    """The first run is the one this session already checked (the browser layer's, else the papermill copy that
    test_notebook_runs_and_records_metrics left in build/notebooks), the second a fresh papermill run with the
    same parameters; only outputs that say "this machine" may differ."""
    parameters = {"FAST": True, "OUTPUT_DIR": str(tmp_path), **({"SOLUTIONS": True} if has_exercises(path) else {})}
    shared = None if has_exercises(path) else shared_run(path, shared_runs, tmp_path / "browser")
    checked = BUILD_DIR / "notebooks" / path.name
    if shared is not None:
        first = shared[0]
    elif checked.is_file() and checked.stat().st_mtime >= SESSION_START:
        first = checked
    else:
        first = execute_notebook(path, parameters, out_dir=tmp_path / "first")
    second = execute_notebook(path, parameters, out_dir=tmp_path / "second")
    moved = differing_lines(nbformat.read(str(first), as_version=4), nbformat.read(str(second), as_version=4))
    assert not moved, "lines that differ between two FAST runs without saying 'this machine':\n" + "\n".join(moved)
