"""What predicts a rejection or an exit: ``stop_signal`` (which draft signal predicts rejection while sampling),
``gate`` (the target-confidence gate against fixed and adaptive drafting), ``saturation`` (when a layer's
prediction stops changing) and ``early_exit`` (profiled exits)."""
