"""Measuring what the engine does on this machine: agreement α, the cost model (c, c_v), the analytic speedup,
skip robustness, wall-clock comparisons, the benchmark, the playground's grid and the sampling stop signal."""
