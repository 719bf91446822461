"""Notebook 10's figures: the tree's layout, each node's status at each stage of the verdict's walk, the mask's
lit rows, and the cost and shape charts drawing what their rows say."""
from labkit.core.trace import StepRecord
from labkit.core.tree import ancestry
from labkit.viz import trees as vt

from tiny_models import ToyTokenizer

PARENTS = [-1, -1, 0, 0, 2]


def step(parents=PARENTS, path=(0, 2), next_kind="replacement"):
    n = len(parents)
    return StepRecord(position=5, drafted=[10 + i for i in range(n)], q=[0.5] * n, confidence=[0.6] * n,
                      p=[0.4] * n, n_accepted=len(path), next_token=7, next_kind=next_kind, threshold=None,
                      draft_s=0.0, verify_s=0.0, parents=list(parents), path=list(path))


def test_layout_puts_depth_on_x_and_parents_between_their_children():
    x, y = vt.tree_layout(PARENTS)
    assert x == [0, 1, 1, 2, 2, 3]
    assert y[1] == (y[3] + y[4]) / 2 and y[3] == y[5] and len(set(y[2:])) == 3


def test_statuses_follow_the_walk():
    s = step()
    assert vt.n_stages(s) == 4 and vt.n_stages(step(next_kind="none")) == 3
    assert vt.node_status(s, 0) == ["drafted"] * 5
    assert vt.node_status(s, 1) == ["accepted", "rejected", "drafted", "drafted", "drafted"]
    assert vt.node_status(s, 2) == ["accepted", "rejected", "accepted", "rejected", "drafted"]
    assert vt.node_status(s, 3) == ["accepted", "rejected", "accepted", "rejected", "rejected"]
    assert vt.node_status(step(path=[1]), 1) == ["rejected", "accepted", "not reached", "not reached",
                                                 "not reached"]


def test_mask_is_the_ancestry_with_the_accepted_rows_lit():
    z = vt.mask_z(PARENTS, [0])
    assert [[v > 0 for v in r] for r in z] == ancestry(PARENTS).tolist()
    assert {v for v in z[0] + z[1] if v} == {2} and {v for v in z[2] if v} == {1}


def test_tree_view_and_figure_draw_the_stage():
    labels = {10 + i: f"t{i}" for i in range(5)} | {7: "x"}
    final = vt.tree_view(step(), labels, 3)
    assert final["target"]["x"] == [3] and final["path"]["x"] == [0, 1, 2, 3] and "replacement" in final["title"]
    assert vt.tree_view(step(), labels, 99)["stage"] == 3
    fig = vt.tree_step_figure(step(), ToyTokenizer(), stage=2)
    names = [t.name for t in fig.data]
    assert names[2:6] == list(vt.STATUSES) and names[8] == "mask"
    assert list(fig.data[3].x) == [1, 2] and list(fig.data[7].x) == []      # two accepted, no target token yet
    assert len(fig.data[8].z) == 6 and fig.layout.title.text.startswith("stage 2")
    ex, ey = vt.tree_edges(PARENTS)
    assert len(ex) == 15 and ex[2] is None


def test_verify_width_and_shapes_figures_draw_their_rows():
    cost = [{"nodes": n, "c_v": 1 + n / 10, "c_v_min": 1 + n / 12, "c_v_max": 1 + n / 8} for n in (1, 4, 16)]
    fig = vt.verify_width_figure(cost)
    assert list(fig.data[0].x) == [1, 4, 16] and list(fig.data[0].y) == [1.1, 1.4, 2.6]
    assert fig.data[0].error_y.array[2] == 1 + 16 / 8 - 2.6
    rows = [{"source": s, "method": m, "kind": k, "speedup": v, "speedup_min": v - 0.1, "speedup_max": v + 0.1,
             "tokens_per_step": 3.0 + v, "nodes_per_verify": n}
            for s in ("stdlib", "packages") for m, k, v, n in (("plain loop", "plain", 1.0, float("nan")),
                                                                ("chain", "chain", 1.5, 3.0),
                                                                ("dynamic (top 2, 8 nodes)", "tree", 1.2, 8.0))]
    fig = vt.shapes_figure(rows)
    assert len(fig.data) == 4 and list(fig.data[0].x) == ["chain", "dynamic (top 2, 8 nodes)"]
    assert list(fig.data[1].text) == ["chain", "dynamic 2/8"] and list(fig.data[1].y) == [4.5, 4.2]
    assert (fig.data[1].textposition, fig.data[3].textposition) == ("top center", "bottom center")   # never stacked
