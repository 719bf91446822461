"""The drafting seam: any Drafter plugs into the same verify loop, sees every verdict, and can ask for the
target's hidden states; policies see the target's confidence in the token it emitted."""
import math

import torch

from labkit import FixedK, SkipSet, autoregressive_generate, speculative_generate
from labkit.core.drafters import Draft, Drafter, LookupDrafter, SelfDrafter, ngram_lookup
from labkit.core.verify import forward_with_hidden_states
from tiny_models import tiny_model


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
        assert math.isclose(verdict.target_confidence, float(verdict.p[step.n_accepted].max()), rel_tol=1e-6)
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
