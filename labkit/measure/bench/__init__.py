"""The side-by-side benchmark: ``methods`` (what it runs), ``run`` (the run, ``python -m labkit bench``),
``results`` (its reader and tables) and ``device`` (the lossless checks, a benchmark and the calibration on a GPU or
any device)."""
