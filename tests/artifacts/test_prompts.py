from labkit import prompts
from labkit.artifacts.corpus import corpus_files, corpus_stats, split_of, stdlib_root


def test_split_is_by_file_and_deterministic():
    stats = corpus_stats()
    assert stats["train"]["files"] > 10 * stats["validation"]["files"] > 0
    assert split_of("json/decoder.py") == split_of("json/decoder.py")
    root = stdlib_root()
    for path in corpus_files():
        rel = path.relative_to(root)
        assert not {"test", "tests", "idle_test", "site-packages"} & set(rel.parts[:-1])


def test_prompts_are_deterministic_and_held_out():
    a, b = prompts(6, seed=0), prompts(6, seed=0)
    assert a == b and len({p.source for p in a}) == 6
    assert prompts(6, seed=1) != a
    train_text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in corpus_files("train"))
    for p in a:
        assert split_of(p.source.split(":")[0]) == "validation"
        assert p.text.startswith(("def ", "async def ", "@"))
        assert p.text.endswith(('"', "'"))   # ends at the docstring's quotes: the next token is "\n" + indentation
        body = p.text.strip().splitlines()
        assert "\n".join(body[:2]) not in train_text or len(body[0]) < 20   # not a copy of a training file


def test_prompt_count_errors():
    import pytest
    with pytest.raises(ValueError, match="positive"):
        prompts(0)
