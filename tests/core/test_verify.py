"""labkit.core.verify: the verdict on a draft. Greedy keeps the longest prefix equal to the target's argmax and adds
the target's own token (a replacement, or a bonus after a fully accepted draft); sampling accepts d with probability
min(1, p/q) and redraws from the residual; ``accept`` emits and keeps the cache invariant (the cache holds every
token but the pending one). The distribution of sampled tokens is tested in tests/core/test_sampling.py."""
import pytest
import torch

from labkit import FixedK, SkipSet
from labkit.core.cache import layer_lengths, new_cache
from labkit.core.decoding import prefill
from labkit.core.drafters import Draft, SelfDrafter
from labkit.core.sampling import Warp
from labkit.core.state import DecodingState
from labkit.core.verify import (
    Verdict,
    accept,
    forward_with_hidden_states,
    full_forward,
    target_forward,
    verify,
    verify_greedy,
    verify_sampling,
)

from tiny_models import tiny_model

N_LAYERS, VOCAB = 4, 97


def one_hot_logits(targets, vocab=10):
    """(len(targets), vocab) logits whose argmax at row i is targets[i]."""
    logits = torch.zeros(len(targets), vocab)
    logits[torch.arange(len(targets)), torch.tensor(targets)] = 5.0
    return logits


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=N_LAYERS, vocab_size=VOCAB)


def fresh_state(model, eos=()):
    """A state right after the prompt: every prompt token but the last (pending) in the cache."""
    ids = torch.tensor([[11, 22, 33, 44, 55, 66]])
    state = DecodingState(model, new_cache(model), ids[0].tolist(), ids.shape[1], Warp(), frozenset(eos))
    with torch.inference_mode():
        prefill(model, ids[:, :-1], state.cache)
    return state


def greedy_continuation(model, state, n):
    """The target's next n greedy tokens after state.tokens (by plain full forwards, no cache)."""
    tokens = list(state.tokens)
    with torch.inference_mode():
        for _ in range(n):
            tokens.append(int(model(torch.tensor([tokens])).logits[0, -1].argmax()))
    return tokens[len(state.tokens):]


def test_greedy_accepts_the_longest_matching_prefix():
    logits = one_hot_logits([3, 1, 4, 2])
    assert verify_greedy(logits, [3, 1, 0]) == (2, 4)              # d_3 wrong: the target's 4 replaces it
    assert verify_greedy(logits, [3, 1, 4]) == (3, 2)              # all right: the bonus token from the last row
    assert verify_greedy(logits, [9, 1, 4]) == (0, 3)              # a later match does not count
    assert verify_greedy(logits[:1], []) == (0, 3)                 # nothing drafted: one plain step


def test_sampling_accepts_when_p_equals_q_and_never_redraws_a_rejected_zero_p_token():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(4, 6, generator=g), -1)
    drafted = [int(p[i].argmax()) for i in range(3)]
    for _ in range(50):
        n, _ = verify_sampling(p, [p[i] for i in range(3)], drafted, g)
        assert n == 3                                                  # p == q: r * q < p always
    p_zero = p.clone()
    p_zero[1, drafted[1]] = 0.0
    p_zero[1] /= p_zero[1].sum()
    for _ in range(50):
        n, token = verify_sampling(p_zero, [p[i] for i in range(3)], drafted, g)
        assert n == 1 and token != drafted[1] and p_zero[1, token] > 0  # rejected at d_2, redrawn from the residual


@torch.inference_mode()   # as speculative_generate runs it
def test_verdict_carries_start_hidden_states_and_the_target_confidence(model):
    state = fresh_state(model)
    draft = Draft(tokens=[5, 6])
    logits, hidden = forward_with_hidden_states(state, draft)
    assert len(hidden) == N_LAYERS + 1 and hidden[-1].shape == (3, model.config.hidden_size)
    verdict = verify(state, logits, draft, hidden_states=hidden)
    assert isinstance(verdict, Verdict) and verdict.start == state.position == 6 and verdict.hidden_states is hidden
    n, token = verify_greedy(logits, draft.tokens)
    assert (verdict.n_accepted, verdict.next_token) == (n, token)
    assert verdict.p is None                                  # greedy computes no (γ+1) x V softmax unasked
    full = verdict.probs()
    assert full.shape == (3, VOCAB) and verdict.target_confidence == pytest.approx(float(full[n].max()), rel=1e-5)
    p_drafted = verdict.p_of([0, 1], draft.tokens)            # the trace's p, from the drafted rows alone
    assert p_drafted == pytest.approx([float(full[0, 5]), float(full[1, 6])], rel=1e-5)
    lean = verify(state, logits, draft)
    assert lean.hidden_states is None and lean.target_confidence == verdict.target_confidence


@torch.inference_mode()   # as speculative_generate runs it
def test_full_forward_is_the_target_forward_without_hidden_states(model):
    a, b = fresh_state(model), fresh_state(model)
    draft = Draft(tokens=[7, 8, 9])
    logits, hidden = full_forward(a, draft)
    plain, none = target_forward(b, [7, 8, 9])
    assert hidden is None and none is None and logits.shape == (4, VOCAB)
    torch.testing.assert_close(logits, plain)


@pytest.mark.parametrize("n_right", [0, 2, 4])
@torch.inference_mode()
def test_accept_emits_the_kept_prefix_and_the_target_token_and_keeps_the_cache_invariant(model, n_right):
    state = fresh_state(model)
    truth = greedy_continuation(model, state, 5)
    drafted = truth[:n_right] + ([(truth[n_right] + 1) % VOCAB] if n_right < 4 else [])
    logits, _ = target_forward(state, drafted)
    draft = Draft(tokens=list(drafted))
    verdict = verify(state, logits, draft)
    assert verdict.n_accepted == n_right
    new, kind = accept(state, draft, verdict)
    assert new == truth[:n_right + 1] and kind == ("bonus" if n_right == len(drafted) else "replacement")
    assert state.tokens[-len(new):] == new
    assert layer_lengths(state.cache) == [len(state.tokens) - 1] * N_LAYERS


def test_accept_realigns_a_cache_left_uneven_by_a_skipped_draft(model):
    state = fresh_state(model)
    drafter = SelfDrafter(model, SkipSet(attention=[1, 2], mlp=[3]))
    with torch.inference_mode():
        draft = drafter.draft(state, 4, FixedK(4))
        assert len(set(layer_lengths(state.cache))) > 1                 # skipped attention appended nothing
        logits, _ = (draft.forward or full_forward)(state, draft)
        verdict = verify(state, logits, draft)
        accept(state, draft, verdict)
    assert layer_lengths(state.cache) == [len(state.tokens) - 1] * N_LAYERS


@torch.inference_mode()   # as speculative_generate runs it
def test_an_accepted_eos_ends_the_step_without_a_target_token(model):
    truth = greedy_continuation(model, fresh_state(model), 3)
    state = fresh_state(model, eos={truth[1]})
    drafted = truth[:2]
    logits, _ = target_forward(state, drafted)
    draft = Draft(tokens=list(drafted))
    verdict = verify(state, logits, draft)
    new, kind = accept(state, draft, verdict)
    assert (new, kind) == (truth[:2], "none")
    assert layer_lengths(state.cache) == [len(state.tokens) - 1] * N_LAYERS
