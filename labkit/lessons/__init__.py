"""Per-notebook glue: widgets, presets, the notebook plumbing, and every sentence a notebook writes from its numbers
(``claims``: generic builders; ``bayesian_optimization`` 01, ``layer_skip`` 02, ``timeline`` 03,
``playground_claims`` 04), and the exercises that check themselves (``exercises``, ``solutions``)."""
