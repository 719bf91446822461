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


def test_repeats_are_found_and_counted():
    from labkit.artifacts.prompts import first_repeat, repeated_share
    assert first_repeat([1, 2, 3, 1, 2, 3], 3) == 5 and first_repeat([1, 2, 3, 4, 5, 6], 2) is None
    assert first_repeat([7, 7, 7], 2) == 2
    assert repeated_share([1, 2, 3], [1, 2, 3, 1], n=2) == 0.75         # (3, 1) is new, the rest repeat
    assert repeated_share([1, 2, 3], [4, 5, 6, 7], n=2) == 0.0
    assert repeated_share([1, 2], [9, 1, 2, 8], n=2) == 0.25


def test_showcase_prompt_follows_its_rule():
    """The chosen prompt's greedy text has no repeated 6-gram in 48 tokens; every earlier candidate's has one."""
    import labkit
    from labkit.artifacts.prompts import benchmark_prompts, first_repeat, showcase_prompt
    model, tokenizer = labkit.load_model("default")
    found = showcase_prompt(model, tokenizer, n=6, window=48)
    candidates = benchmark_prompts(found.index + 1)
    assert candidates[found.index] == found.prompt and "no 6-token n-gram" in found.rule
    for i, prompt in enumerate(candidates):
        ids = tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        new = labkit.autoregressive_generate(model, ids, 48).new_tokens
        assert (first_repeat(new, 6) is None) == (i == found.index), prompt.source
    import pytest
    with pytest.raises(ValueError, match="n_candidates"):
        showcase_prompt(model, tokenizer, n=2, window=48, n_candidates=2)
    with pytest.raises(ValueError, match="n <= window"):
        showcase_prompt(model, tokenizer, n=10, window=5)
