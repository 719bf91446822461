"""Figures and the widget plumbing they share (``labkit.viz.widgets``: FigureWidgets whose data reach plotly.js intact)."""
