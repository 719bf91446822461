"""Bayesian optimisation on toy problems, from a 1-D walkthrough to a made-up skip-set objective (notebook 01),
one module per topic:

- ``forrester_bo``: the loop by hand in one dimension (a GP, EI and LCB, exploration);
- ``branin_samplers``: Optuna's GP, TPE and random samplers on a 2-D function;
- ``skip_problem``: a toy skip-set objective, ARD length-scales, declaring the variables.

The loop, for minimising an expensive f over a box::

    observe a few points  ->  fit a surrogate (a Gaussian process, GP)  ->  maximise an
    acquisition function built from the GP's mean mu(x) and std sigma(x)  ->  evaluate f
    at the chosen x  ->  add (x, f(x)) to the data  ->  repeat

Every name is also importable from here (``from labkit.search import toy; toy.run_bo_1d(...)``).
"""
from .branin_samplers import (
                              BRANIN_BOUNDS,
                              BRANIN_F_MIN,
                              BRANIN_MINIMA,
                              SAMPLERS,
                              branin,
                              optuna_best_so_far,
                              sampler_comparison,
)
from .forrester_bo import (
                              ACQUISITIONS,
                              FORRESTER_F_MIN,
                              FORRESTER_X_MIN,
                              BOHistory,
                              acquisition_comparison,
                              best_so_far_1d,
                              expected_improvement,
                              exploration_table,
                              fit_gp,
                              forrester,
                              lower_confidence_bound,
                              run_bo_1d,
)
from .skip_problem import (
                              ToySkipProblem,
                              ard_hit_rate,
                              ard_relevance,
                              declaration_comparison,
                              make_toy_skip_problem,
                              suggest_skip_mask,
)

__all__ = ["FORRESTER_X_MIN", "FORRESTER_F_MIN", "BRANIN_F_MIN", "BRANIN_MINIMA", "BRANIN_BOUNDS", "SAMPLERS",
           "ACQUISITIONS", "forrester", "branin", "fit_gp", "expected_improvement", "lower_confidence_bound",
           "BOHistory", "run_bo_1d", "best_so_far_1d", "acquisition_comparison", "exploration_table",
           "optuna_best_so_far", "sampler_comparison", "ToySkipProblem", "make_toy_skip_problem",
           "suggest_skip_mask", "ard_relevance", "ard_hit_rate", "declaration_comparison"]
