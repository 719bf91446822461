"""Measuring what the engine does on this machine, grouped by what is measured.

At the top, what every measurement shares: ``machine`` (what it ran on), ``harness`` (the one interleaved timing
protocol and row type), ``agreement`` (α, how often the draft agrees with the target), ``lossless`` (every drafter
under every policy against the plain loop, on any device and precision) and ``strategy_inputs`` (a skip strategy
built from its name and the files it reads: start set, cost model, block importance).

The subpackages: ``costs`` (what a forward costs and what an acceptance pattern buys: c, c_v, the roofline, tree
verify costs, the analytic speedup, the calibration that predicts and then measures it), ``bench`` (the side-by-side
benchmark: what it runs, the run, its reader, the device version), ``grid`` (the playground's precomputed grid: its
cells, the measurement, its reader), ``signals`` (what predicts a rejection or an exit: the stop signal, the
confidence gate, saturation, early exit), ``reference`` (the committed quiet runs every comparative sentence of
the lab reads: the loader with a live run put beside it and the A/A noise floor, what each group measures, the
resumable ``python -m labkit reference``, the README's speed table and notebook 09's decision table) and
``comparisons`` (one method beside the chain and the plain loop:
cascades, drafters, parallel decoding, speed, adaptive skip strategies, speculative sampling, robustness across
prompt sources)."""
