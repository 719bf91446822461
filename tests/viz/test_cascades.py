"""The cascade levels figure: one panel per cascade, three bars per level, the top marked."""
import pytest

from labkit.viz import cascades as vc


def test_level_parts_figure_draws_each_cascade():
    parts = [{"cascade": c, "level": name, "is_top": top, "proposed": 5.0, "accepted": 2.0, "own": 1.0,
              "kept": 0.4, "ms_per_forward": 1.0, "used": 1.0}
             for c in ("a", "b") for name, top in (("lookup", False), ("skip 8/16", True))]
    fig = vc.level_parts_figure(parts)
    assert len(fig.data) == 2 * 3
    assert list(fig.data[0].x) == ["lookup", "skip 8/16 → target"]
    assert [a.text for a in fig.layout.annotations][:2] == ["a", "b"]
    assert sum(t.showlegend is not False for t in fig.data) == 3
    with pytest.raises(ValueError):
        vc.level_parts_figure([])
