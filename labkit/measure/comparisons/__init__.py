"""One method beside the chain and the plain loop, interleaved through :mod:`labkit.measure.harness`: ``cascades``,
``drafters`` (every drafter), ``parallel`` (Jacobi and lookup decoding), ``speed`` (a skip set's wall-clock speedup),
``adaptive`` (skip strategies and draft configurations), ``speculative_sampling`` (the acceptance rules while
sampling), ``robustness`` (α and the predicted speedup across prompt sources) and ``batches`` (batched calls as
harness decoders: the plain loop, always on and the load policy at one batch size)."""
