"""The playground's precomputed grid: ``cells`` (one cell's timing and row), ``run`` (the measurement,
``python -m labkit grid``) and ``results`` (its reader)."""
