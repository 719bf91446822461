"""Traces of a tiny random Llama for the timeline tests (tests/viz/test_timeline.py, tests/viz/test_trace.py: figures;
tests/lessons/test_timeline.py: the replayer), with a tokenizer whose tokens are the awkward cases."""
import pytest
import torch

from labkit import FixedK, SkipSet, speculative_generate

from tiny_models import tiny_model

VOCAB = 97


class StubTokenizer:
    """decode([id]) with the awkward cases: spaces, newlines, HTML-special characters."""

    SPECIAL = {0: " x", 1: "\n", 2: "<b>", 3: "a&b", 4: "    ", 5: ""}

    def decode(self, ids):
        return "".join(self.SPECIAL.get(int(i), f"t{int(i)}") for i in ids)


TOK = StubTokenizer()


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4, vocab_size=VOCAB)


@pytest.fixture(scope="module")
def prompt():
    return torch.randint(0, VOCAB, (1, 6), generator=torch.Generator().manual_seed(3))


@pytest.fixture(scope="module")
def greedy(model, prompt):
    # a heavy skip set and a fixed k: rejections *and* discarded tokens appear
    return speculative_generate(model, prompt, skip=SkipSet(attention=[1, 2, 3], mlp=[2, 3]), policy=FixedK(4),
                                max_new_tokens=40)
