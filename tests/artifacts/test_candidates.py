"""Which functions of a file make prompts: short prompts, long prompts and stubs (docstrings with examples)."""
import ast

from labkit.artifacts.candidates import STUB_PROMPT_CHARS, function_candidates, has_examples, hash_order

SOURCE = '''import os


def documented(x):
    """Return x doubled, for the tests of this module: long enough to be a prompt."""
    return 2 * x


def with_examples(x):
    """Return x squared.

    >>> with_examples(3)
    9
    """
    return x * x


def only_a_docstring():
    """Nothing to write: the body is this docstring alone, so no prompt."""
'''


def test_candidates_and_stubs_of_one_file(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    names = [c.short.source for c in function_candidates(path, tmp_path)]
    assert names == ["m.py:4:documented", "m.py:9:with_examples"]
    stubs = function_candidates(path, tmp_path, stubs=True)
    assert [c.short.source for c in stubs] == ["m.py:9:with_examples"]
    assert stubs[0].short.text.endswith('9\n    """') and ">>> with_examples(3)" in stubs[0].short.text
    assert STUB_PROMPT_CHARS[1] > 600


def test_has_examples_reads_doctest_lines_only():
    tree = ast.parse(SOURCE)
    found = {n.name: has_examples(n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert found == {"documented": False, "with_examples": True, "only_a_docstring": False}


def test_hash_order_is_fixed_by_the_seed_and_drops_duplicate_texts(tmp_path):
    (tmp_path / "a.py").write_text(SOURCE)
    (tmp_path / "b.py").write_text(SOURCE)
    both = function_candidates(tmp_path / "a.py", tmp_path) + function_candidates(tmp_path / "b.py", tmp_path)
    texts = [p.text for p in hash_order(both, 0)]
    assert len(texts) == 2 and texts == [p.text for p in hash_order(list(reversed(both)), 0)]
