"""Figures (``plotly.graph_objects.Figure`` builders that never show) in one style, by topic."""
