"""labkit.core.state: what one decoding call carries between steps (the last token is pending)."""
from labkit.core.cache import new_cache
from labkit.core.sampling import Warp
from labkit.core.state import DecodingState

from tiny_models import tiny_model


def test_position_emitted_and_vocabulary():
    model = tiny_model("llama", n_layers=1, vocab_size=61)
    state = DecodingState(model, new_cache(model), [4, 5, 6], 3, Warp(), frozenset({2}))
    assert state.position == 3 and state.n_emitted == 0 and state.vocab_size == 61
    assert state.generator is None and not state.warp.do_sample
    state.tokens.extend([7, 8])
    assert state.position == 5 and state.n_emitted == 2                    # the pending token sits at position - 1
