"""Per-notebook glue: widgets, presets, guiding answers written from the data, and the notebook plumbing."""
