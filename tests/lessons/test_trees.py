"""Notebook 10's glue: which steps it draws, the tree stepper's stages, and every sentence turning with its data
(inside and outside the noise)."""
import pytest

from labkit.core.trace import StepRecord, Trace
from labkit.lessons import trees as lt

from tiny_models import ToyTokenizer


def step(parents, path, next_kind="replacement", next_token=7):
    n = len(parents)
    return StepRecord(position=5, drafted=[10 + i for i in range(n)], q=[0.5] * n, confidence=[0.6] * n,
                      p=[0.4] * n, n_accepted=len(path), next_token=next_token, next_kind=next_kind, threshold=None,
                      draft_s=0.0, verify_s=0.0, parents=parents, path=path)


PARENTS = [-1, -1, 0, 0, 2]


def test_left_top1_only_when_a_sibling_is_accepted():
    assert not lt.left_top1(step(PARENTS, [0, 2]))
    assert lt.left_top1(step(PARENTS, [0, 3]))
    assert lt.left_top1(step(PARENTS, [1]))
    assert not lt.left_top1(step(PARENTS, []))


def test_pick_steps_labels_are_distinct_and_name_the_detour():
    trace = Trace(prompt_length=3, sampling=False,
                  steps=[step(PARENTS, [0, 2]), step(PARENTS, [1]), step(PARENTS, []), step([-1], [0], "bonus")])
    picked = lt.pick_steps(trace)
    assert len(picked) == len(set(picked)) >= 3
    assert any("off the top-1 path" in label for label in picked)
    with pytest.raises(ValueError):
        lt.pick_steps(Trace(prompt_length=3, sampling=False, steps=[]))


def test_off_top1_sentence_counts():
    trace = Trace(prompt_length=3, sampling=False, steps=[step(PARENTS, [0, 3]), step(PARENTS, [0, 2])])
    text = lt.off_top1_sentence([trace])
    assert text.startswith("In 1 of the 2 tree steps (50%")


def test_stepper_walks_every_stage_and_resets_on_a_new_step():
    steps = {"a": step(PARENTS, [0, 2]), "b": step([-1, -1], [], next_token=3)}
    s = lt.TreeStepper(steps, ToyTokenizer())
    assert s.slider.max == 3
    seen = []
    for stage in range(4):
        s.slider.value = stage
        seen.append((s.readout.value, [list(t.x or []) for t in s.figure.data[2:8]]))
    assert len({r for r, _ in seen}) == 4 and len({str(f) for _, f in seen}) == 4
    assert "1 accepted" in seen[1][0] and "2 accepted" in seen[3][0] and list(s.figure.data[7].x) == [3]
    s.step_by(-1)
    assert s.slider.value == 2
    s.step_choice.value = "b"
    assert s.slider.value == 0 and s.slider.max == 1 and len(s.figure.data[8].z) == 3
    assert list(s.figure.layout.xaxis2.ticktext) == ["t₀", "0", "1"]


COST = [{"nodes": 1, "c_v": 1.1, "c_v_min": 1.0, "c_v_max": 1.2}, {"nodes": 4, "c_v": 1.4, "c_v_min": 1.3,
                                                                    "c_v_max": 1.5},
        {"nodes": 16, "c_v": 2.2, "c_v_min": 2.0, "c_v_max": 2.4}]


def test_width_sentence_says_where_a_verify_stops_being_cheap():
    assert lt.cheap_up_to(COST, 1.5) == 4
    text = lt.width_sentence(COST, 1.5)
    assert "up to N = 4 nodes" in text and "per extra node" in text
    assert "through all N measured" in lt.width_sentence(COST, 3.0)
    assert "already above 1.0" in lt.width_sentence(COST, 1.0)
    flat = [dict(r, c_v_min=1.0, c_v_max=2.5) for r in COST]
    assert "within the noise" in lt.width_sentence(flat, 1.5)


def row(method, kind, speedup, lo, hi, tps=3.0, limit=1.5, acceptance=0.8, source="stdlib", nodes=3.0, c_v=1.2):
    return {"method": method, "kind": kind, "speedup": speedup, "speedup_min": lo, "speedup_max": hi,
            "tokens_per_step": tps, "limit": limit, "acceptance": acceptance, "source": source,
            "nodes_per_verify": nodes, "c_v": c_v}


def rows(tree_speedup, lo, hi, tree_tps=3.6, tree_limit=1.6, source="stdlib", acceptance=0.8):
    return [row("plain loop", "plain", 1.0, 1.0, 1.0, source=source),
            row("chain", "chain", 1.5, 1.45, 1.55, source=source, acceptance=acceptance),
            row("dynamic (top 2, 8 nodes)", "tree", tree_speedup, lo, hi, tps=tree_tps, limit=tree_limit,
                source=source, nodes=8.0),
            row("static (Medusa, 10 nodes)", "tree", 0.9, 0.85, 0.95, source=source, nodes=10.0)]


def test_shapes_sentence_turns_with_the_noise():
    faster = lt.shapes_sentence(rows(1.8, 1.7, 1.9), "stdlib")
    assert "the tree faster beyond the noise (the min–max ranges do not overlap)" in faster
    within = lt.shapes_sentence(rows(1.6, 1.5, 1.7), "stdlib")
    assert "within the noise of each other (the min–max ranges overlap)" in within and "beyond" not in within
    slower = lt.shapes_sentence(rows(1.2, 1.1, 1.3), "stdlib")
    assert "the tree slower beyond the noise" in slower and slower.startswith("On this machine, on stdlib prompts")
    assert all(len(s.split()) <= 50 and "this machine" in s for s in (faster, within, slower))


def test_trade_sentence_compares_tokens_with_step_cost():
    # tree: 3.6 tokens per step / limit 1.6 = 2.25 plain steps; chain 3.0 / 1.5 = 2.0: x1.2 tokens, x1.125 cost
    paid = lt.trade_sentence(rows(1.8, 1.7, 1.9), "stdlib")
    assert "the extra tokens paid for" in paid and "agrees beyond the noise" in paid
    unpaid = lt.trade_sentence(rows(1.6, 1.5, 1.7, tree_tps=3.1, tree_limit=1.2), "stdlib")
    assert "did not pay for" in unpaid and "cannot tell them apart" in unpaid
    assert "about paid for" in lt.trade_sentence(rows(1.6, 1.5, 1.7, tree_tps=3.0, tree_limit=1.5), "stdlib")
    contradicted = lt.trade_sentence(rows(1.2, 1.1, 1.3), "stdlib")
    assert "says otherwise" in contradicted


def test_unsure_sentence_follows_where_the_draft_was_less_sure():
    sure = rows(1.6, 1.5, 1.7, tree_tps=3.2, acceptance=0.9)
    unsure = rows(1.6, 1.5, 1.7, tree_tps=4.0, source="packages", acceptance=0.6)
    assert "so the tree won more tokens where the draft was less sure (packages)" in lt.unsure_sentence(sure + unsure)
    reversed_ = rows(1.6, 1.5, 1.7, tree_tps=4.0, acceptance=0.9) + rows(1.6, 1.5, 1.7, tree_tps=3.2,
                                                                        source="packages", acceptance=0.6)
    assert "did not win more tokens" in lt.unsure_sentence(reversed_)
    same = rows(1.6, 1.5, 1.7, acceptance=0.8) + rows(1.6, 1.5, 1.7, source="packages", acceptance=0.8)
    assert "about as sure" in lt.unsure_sentence(same)
    # 10's FAST run: extra tokens 1.05 on both sources read "about the same", so the verdict may not say "more"
    even = rows(1.6, 1.5, 1.7, tree_tps=3.6, acceptance=0.9) + rows(1.6, 1.5, 1.7, tree_tps=3.6, source="packages",
                                                                    acceptance=0.6)
    text = lt.unsure_sentence(even)
    assert "about as many tokens where the draft was less sure" in text and "won more" not in text


def test_reference_labels_name_rows_group_10_measured():
    from labkit.lessons.reference_claims import live_lines
    from labkit.measure.reference.loader import load_reference

    ref = load_reference("10")
    for source in ("stdlib", "packages"):
        for label in lt.REFERENCE_LABELS.values():
            assert ref.row(label, source, "10")                      # each mapped label is a reference row
    chain = ref.row("chain (shipped)", "stdlib", "10").speedup
    rows = [{"source": "stdlib", "method": "chain", "speedup": chain.median, "speedup_min": chain.low,
             "speedup_max": chain.high},
            {"source": "stdlib", "method": "static (Medusa, 10 nodes)", "speedup": 1.0, "speedup_min": 0.9,
             "speedup_max": 1.1}]
    lines = live_lines(rows, ref, "10", ["stdlib"], lt.REFERENCE_LABELS.get)
    assert len(lines) == 1 and lines[0].startswith("On this machine chain measured")
    assert "agrees within the noise" in lines[0]
