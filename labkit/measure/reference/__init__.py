"""The committed quiet reference runs every comparative sentence of the lab reads (``data/reference/``): ``loader``
(the runs as typed rows with their machine, a live run put beside its reference row, the A/A noise floor),
``groups`` (what each group measures), ``run`` (``python -m labkit reference``: interleaved, resumable) and
``tables`` (the README's and docs/summary.md's speed table, notebook 09's decision table)."""
