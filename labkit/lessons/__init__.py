"""Per-notebook glue: widgets, presets, the notebook plumbing (``notebook``; ``notebook_text``: a run's text, two
runs compared), and every sentence a notebook writes from its numbers (``claims``: generic builders;
``reference_claims``: a notebook's comparisons from its committed reference group; ``bayesian_optimization`` 01,
``layer_skip`` and ``draft_search`` 02, ``timeline`` 03, ``playground`` and ``playground_claims`` 04,
``speculative_sampling`` 05, ``parallel_decoding`` and ``lookahead`` 06, ``adaptive_skip`` 07, ``drafters`` 08 and
09, ``drafter_choice`` 09's answer from the reference runs, ``trees`` and ``cascades`` 10, ``regime`` 11, ``width``
12, ``batches`` 13), and the exercises that check themselves (``exercises``, ``solutions``); the ◀ ▶ slider every
stepper shares (``stepper``)."""
