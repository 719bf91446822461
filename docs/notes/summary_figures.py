"""Writes the figures of docs/summary.md: the "why it is lossless" schematic (docs/img/lossless_schematic.png).

    .venv/bin/python docs/notes/summary_figures.py

Needs kaleido (``pip install -e ".[export]"``) and a Chromium. The figure is labkit.viz.sampling.lossless_schematic,
the same one notebook 05 shows (a made-up p and q over five tokens).
"""
from pathlib import Path

from labkit.viz.sampling import lossless_schematic

OUT = Path(__file__).resolve().parents[1] / "img" / "lossless_schematic.png"

if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    lossless_schematic(width=900, height=430).write_image(str(OUT), width=900, height=430, scale=2)
    print(f"wrote {OUT}")
