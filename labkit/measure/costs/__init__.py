"""What a forward costs and what an acceptance pattern buys: ``costmodel`` (c and c_v measured on this machine),
``roofline`` (bytes, FLOPs and time of a block against the machine's roofs; c against the blocks kept, c_v against
the tokens verified), ``tree_costs`` (c_v against tree nodes, tree shapes against the chain), ``analytic`` (the
speedup an acceptance pattern buys, from :mod:`labkit.core.expectation`) and ``calibration`` (the speedup
self-drafting will reach here, predicted and then measured), ``batch_costs`` (c and c_v per batch size, the load
policy that drafts less as the batch grows) and ``step_anatomy`` (one decoding step taken apart: where its time
goes)."""
