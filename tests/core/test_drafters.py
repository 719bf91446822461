"""The drafting seam: any Drafter plugs into the same verify loop, sees every verdict, and can ask for the
target's hidden states; policies see the target's confidence in the token it emitted."""
import math

import pytest
import torch

from labkit import FixedK, SkipSet, StaticThreshold, autoregressive_generate, speculative_generate
from labkit.core.cache import new_cache
from labkit.core.decoding import prefill
from labkit.core.drafters import Draft, Drafter, LookupDrafter, ModelDrafter, SelfDrafter, ngram_lookup, stop_signal
from labkit.core.sampling import Warp
from labkit.core.state import DecodingState
from labkit.core.strategies import StaticStrategy
from labkit.core.verify import forward_with_hidden_states

from tiny_models import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4, vocab_size=97, max_positions=128)


IDS = torch.tensor([[5, 6, 7]])


class Recording(SelfDrafter):
    """A self-drafter that asks for the target's hidden states and keeps every verdict it is shown."""

    def __init__(self, model, skip):
        super().__init__(model, skip)
        self.verdicts = []

    def draft(self, state, budget, policy):
        draft = super().draft(state, budget, policy)
        draft.forward = forward_with_hidden_states
        return draft

    def commit(self, state, draft, verdict):
        self.verdicts.append((verdict.start, verdict))


class ConfidenceLog(FixedK):
    def __init__(self, k):
        super().__init__(k)
        self.seen = []

    def observe_target(self, confidence):
        self.seen.append(confidence)


def test_a_custom_drafter_sees_every_verdict_and_the_hidden_states():
    model = tiny_model("llama", n_layers=4, vocab_size=97)
    ids = torch.tensor([[3, 5, 8, 13]])
    drafter = Recording(model, SkipSet(attention=[3], mlp=[2]))
    policy = ConfidenceLog(3)
    out = speculative_generate(model, ids, drafter=drafter, policy=policy, max_new_tokens=20)
    assert out.sequences.equal(autoregressive_generate(model, ids, 20).sequences)
    steps = out.trace.steps
    assert [s for s, _ in drafter.verdicts] == [st.position for st in steps]
    for (_, verdict), step in zip(drafter.verdicts, steps):
        assert verdict.n_accepted == step.n_accepted
        assert len(verdict.hidden_states) == 4 + 1                     # embeddings + every layer
        assert verdict.hidden_states[-1].shape == (step.n_drafted + 1, model.config.hidden_size)
        # greedy: the target's confidence in its own token is its top probability at that position
        assert math.isclose(verdict.target_confidence, float(verdict.probs()[step.n_accepted].max()), rel_tol=1e-6)
    assert policy.seen == [st.target_confidence for st in steps]


def test_lookup_drafter_copies_and_falls_back():
    tokens = [1, 2, 3, 4, 1, 2]
    assert ngram_lookup(tokens, 3) == [3, 4, 1]
    assert ngram_lookup([1, 2, 3], 3) == []
    model = tiny_model("llama", n_layers=2, vocab_size=97)

    class Never(Drafter):
        def draft(self, state, budget, policy):
            return Draft()

    ids = torch.tensor([[7, 8, 9, 7, 8]])
    out = speculative_generate(model, ids, drafter=LookupDrafter(4, Never()), policy=FixedK(4), max_new_tokens=12)
    assert out.sequences.equal(autoregressive_generate(model, ids, 12).sequences)
    assert out.trace.steps[0].draft_source == "lookup" and out.trace.steps[0].drafted[:1] == [9]


def test_draft_model_with_other_vocabulary(model):
    other = tiny_model("llama", n_layers=1, vocab_size=50)
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_generate(model, IDS, draft_model=other, max_new_tokens=3)
    with pytest.raises(ValueError, match="not both"):
        speculative_generate(model, IDS, draft_model=model, skip=SkipSet(), max_new_tokens=3)


def policy(signal):
    p = StaticThreshold(0.5, 2)
    p.sampling_signal = signal
    return p


def test_the_signals_differ_and_a_bad_name_is_refused():
    state = type("S", (), {"warp": Warp(True, 1.0)})()
    draft = Draft()
    draft.add(2, torch.tensor([0.1, 0.2, 0.3, 0.4]), keep_dist=True)        # drew token 2 (q 0.3), top-1 is 0.4
    assert stop_signal(draft, state, policy("q")) == pytest.approx(0.3)
    assert stop_signal(draft, state, policy("confidence")) == pytest.approx(0.4)
    greedy = type("S", (), {"warp": Warp(False)})()
    assert stop_signal(draft, greedy, policy("q")) == pytest.approx(0.4)  # greedy: always the top-1
    with pytest.raises(ValueError, match="sampling_signal"):
        stop_signal(draft, state, policy("top2"))


# -- added with the mirrored layout: what a Draft carries through the seam -------------------------------------
def fresh_state(model, ids=((3, 5, 8, 13, 21),)):
    ids = torch.tensor(ids)
    state = DecodingState(model, new_cache(model), ids[0].tolist(), ids.shape[1], Warp(), frozenset())
    with torch.inference_mode():
        prefill(model, ids[:, :-1], state.cache)
    return state


class Keeping(SelfDrafter):
    """A self-drafter that remembers every draft it returned and every draft it is asked to commit."""

    def __init__(self, model, skip):
        super().__init__(model, skip)
        self.returned, self.committed = [], []

    def draft(self, state, budget, policy):
        draft = super().draft(state, budget, policy)
        self.returned.append(draft)
        return draft

    def commit(self, state, draft, verdict):
        self.committed.append(draft)
        super().commit(state, draft, verdict)


def test_draft_parents_are_a_chain():
    draft = Draft()
    assert draft.parents == [] and len(draft) == 0
    for token in (4, 1, 7, 7):
        draft.add(token, torch.full((10,), 0.1), keep_dist=False)
    assert draft.parents == [-1, 0, 1, 2] and len(draft) == 4
    assert draft.q == pytest.approx([0.1] * 4) and draft.q_dists == []          # greedy: no distributions kept


@torch.inference_mode()
def test_a_plain_self_draft_knows_its_maker_and_needs_no_forward_of_its_own(model):
    state = fresh_state(model)
    drafter = SelfDrafter(model, SkipSet(attention=[2], mlp=[1]))
    draft = drafter.draft(state, 3, FixedK(3))
    assert draft.drafter is drafter and draft.source == "model" and draft.skip == SkipSet(attention=[2], mlp=[1])
    assert isinstance(draft.select_s, float) and draft.select_s >= 0.0
    assert draft.forward is None                                 # a fixed set: verified by one plain full forward
    assert len(draft) == 3 and draft.parents == [-1, 0, 1]


class Watching(StaticStrategy):
    """A fixed set whose strategy asks to watch the verify forward (as CLaSp's does when it plans)."""

    needs_hidden_states = True


@torch.inference_mode()
def test_a_strategy_that_watches_the_verify_forward_puts_its_own_there(model):
    drafter = SelfDrafter(model, Watching(SkipSet(mlp=[1])))
    draft = drafter.draft(fresh_state(model), 2, FixedK(2))
    assert draft.drafter is drafter and draft.select_s >= 0.0
    assert draft.forward is not None and draft.forward == drafter.strategy.verify_forward
    logits, hidden = draft.forward(fresh_state(model), draft)
    assert logits.shape == (len(draft) + 1, 97) and len(hidden) == 4 + 1


@torch.inference_mode()
def test_model_and_lookup_drafts_know_their_maker(model):
    other = tiny_model("llama", n_layers=1, vocab_size=97, seed=3)
    state = fresh_state(model)
    drafter = ModelDrafter(model, other)
    drafter.prepare(state, torch.tensor([state.tokens[:-1]]))
    draft = drafter.draft(state, 2, FixedK(2))
    assert draft.drafter is drafter and draft.select_s == 0.0 and draft.forward is None
    repeating = fresh_state(model, [[7, 8, 9, 7, 8]])
    inner = SelfDrafter(model, SkipSet(mlp=[1]))
    lookup = LookupDrafter(3, inner)
    copied = lookup.draft(repeating, 3, FixedK(3))
    assert copied.drafter is lookup and copied.source == "lookup" and copied.tokens == [9, 7, 8]
    assert copied.parents == [-1, 0, 1] and copied.q == [1.0, 1.0, 1.0]
    fell_back = lookup.draft(fresh_state(model), 3, FixedK(3))    # nothing repeats: the inner drafter's draft
    assert fell_back.drafter is inner and fell_back.source == "model"


@pytest.mark.parametrize("lookup", [0, 3])
def test_commit_receives_the_very_draft_that_draft_returned(model, lookup):
    drafter = Keeping(model, SkipSet(mlp=[1, 2]))
    ids = torch.tensor([[4, 9, 4, 9, 4]])
    wrapped = LookupDrafter(lookup, drafter) if lookup else drafter
    out = speculative_generate(model, ids, drafter=wrapped, policy=FixedK(3), max_new_tokens=16)
    assert out.sequences.equal(autoregressive_generate(model, ids, 16).sequences)
    assert drafter.returned and len(drafter.committed) == len(out.trace.steps)
    own = [d for d in drafter.committed if d.drafter is drafter]
    assert len(own) == len(drafter.returned) and all(a is b for a, b in zip(own, drafter.returned))
    if lookup:                                   # a wrapper's own drafts reach the inner drafter's commit as they are
        assert all(d.drafter is wrapped and d.source == "lookup" for d in drafter.committed if d.drafter is not drafter)
