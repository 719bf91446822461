"""labkit.viz.style: colours with transparency, whitespace made visible, and token labels decoded one at a time."""
import pytest

from labkit.viz.style import MODEL_COLORS, PALETTE, rgba, token_labels, visible


def test_rgba_reads_the_hex_colour():
    assert rgba("#2ca25f", 0.5) == "rgba(44,162,95,0.5)" and rgba("#000000", 1) == "rgba(0,0,0,1)"


def test_every_colour_is_a_six_digit_hex():
    for colour in [*PALETTE.values(), *MODEL_COLORS]:
        assert len(colour) == 7 and colour[0] == "#" and int(colour[1:], 16) >= 0, colour


@pytest.mark.parametrize("text, compact, shown", [
    (" a\tb\n", True, "␣a⇥b⏎"),
    ("x" + " " * 6 + "y", True, "x␣×6y"),
    ("x" + " " * 6 + "y", False, "x" + "␣" * 6 + "y"),
    ("   z", True, "␣␣␣z"),                         # runs under 4 stay as they are
    ("", True, "∅"),                                # a token that decodes to nothing on its own
])
def test_visible_shows_whitespace(text, compact, shown):
    assert visible(text, compact) == shown


def test_token_labels_decode_each_token_alone():
    class Tokenizer:
        def decode(self, ids):
            return {1: " if", 2: "\n", 3: ""}[ids[0]]

    assert token_labels(Tokenizer(), [1, 2, 2, 3, -1]) == {1: "␣if", 2: "⏎", 3: "∅", -1: "∅"}
