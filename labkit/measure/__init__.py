"""Measuring what the engine does on this machine: ``machine`` (what it ran on), ``harness`` (the one interleaved
timing protocol and row type), ``agreement`` (α), ``costmodel`` (c, c_v), ``analytic`` (what an acceptance pattern
buys), ``robustness``, ``speed``, ``strategies`` and ``adaptive`` (skip strategies and draft configurations compared),
the benchmark (``bench_methods`` what it runs, ``bench`` the run, ``bench_results`` its reader), the playground grid
(``grid_cells``, ``grid`` the measurement, ``grid_results`` its reader), ``saturation`` and ``early_exit`` (exit
signals, profiled exits), ``drafter_comparison``, ``gate``, ``speculative_sampling``, ``parallel``,
``stop_signal``, ``lossless`` (every drafter under every policy against the plain loop, on any device and
precision), ``device_bench`` (the lossless checks, a benchmark and the calibration on a GPU or any device),
``tree_costs`` (c_v against tree nodes, tree shapes against the chain), ``cascades`` (cascades
against the chain, each level's part per step), ``roofline`` (bytes, FLOPs and time of a block against the
machine's roofs; c against the blocks kept, c_v against the tokens verified), ``step_anatomy`` (one decoding step
taken apart: arithmetic against per-call work) and ``calibration`` (the speedup self-drafting will reach here,
predicted and then measured); the reference runs: ``reference`` (the committed runs every comparative sentence reads,
a live run put beside them, the A/A noise floor), ``reference_groups`` (what each group measures),
``reference_run`` (``python -m labkit reference``, resumable) and ``reference_tables`` (the speed table of the README
and docs/summary.md, the decision table of notebook 09)."""
