"""Figures: ``plotly.graph_objects.Figure`` builders that never show, in one style (``style``), one module per topic:
``agreement``, ``costs``, ``trace``, ``timeline``, ``bo`` and ``search``, ``playground``, ``bench``, ``strategies``,
``saturation``, ``drafters``, ``sampling``, ``jacobi``, ``lookahead``, ``trees``, ``cascades``, ``regime``, ``width``,
``batches``;
``widgets`` wires figures to controls."""
