import json
import statistics

import pytest

from labkit import prompts
from labkit.artifacts.corpus import corpus_files, corpus_stats, split_of, stdlib_root
from labkit.artifacts.prompts import (
    OUTSIDE_PACKAGES,
    PROMPT_OFFSET,
    all_prompts,
    benchmark_prompts,
    read_prompt_file,
    source_info,
    source_label,
)
from labkit.artifacts.prompts import prompts as all_sources


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
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        prompts(0)


# ---------------------------------------------------------------------------------------
# other sources: installed packages (outside prompts) and a user's file
# ---------------------------------------------------------------------------------------


def test_package_prompts_are_deterministic_spread_and_shaped_like_stdlib_prompts():
    a = all_sources(14, source="packages")
    assert a == all_sources(14, source="packages") and all_sources(14, seed=1, source="packages") != a
    packages = [name for _, name in OUTSIDE_PACKAGES]
    assert [p.source.split("/")[0] for p in a] == packages + packages             # one of each package in turn
    for p in a:
        assert p.text.startswith(("def ", "async def ", "@")) and p.text.endswith(('"', "'"))
        assert not {"tests", "test", "testing"} & set(p.source.split(":")[0].split("/")[:-1])
        assert 60 <= len(p.text) <= 600
    assert not {p.text for p in a} & {p.text for p in all_sources(200)}          # not stdlib text
    assert benchmark_prompts(3, source="packages") == all_sources(27, source="packages")[24:]


def test_source_info_names_packages_and_versions(tmp_path):
    import importlib.metadata as md

    info = source_info("packages")
    assert info["packages"] == {dist: md.version(dist) for dist, _ in OUTSIDE_PACKAGES}
    assert source_info("stdlib")["source"] == "stdlib" and source_label("packages") == "packages"
    path = tmp_path / "mine.jsonl"
    path.write_text('{"text": "def f(x):"}\n')
    assert source_info(path)["sha1"] and source_label(str(path)) == "mine.jsonl"


def test_txt_prompt_files(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text('def area(r):\n    """Area of a circle.\n\n    Uses pi.\n    """\n\n---\n\ndef mean(xs):\n'
                    '    """The mean."""\n---\n')
    got = read_prompt_file(path)
    assert [p.text for p in got] == ['def area(r):\n    """Area of a circle.\n\n    Uses pi.\n    """',
                                     'def mean(xs):\n    """The mean."""']      # blank lines inside kept, none after
    assert [p.source for p in got] == ["mine.txt:1", "mine.txt:8"]
    assert all_sources(1, source=str(path)) == got[:1] and benchmark_prompts(2, source=path) == got
    with pytest.raises(ValueError, match=r"only 2 exist in file"):
        all_sources(3, source=path)


@pytest.mark.parametrize("suffix, content, message", [
    (".txt", "", r"empty\.txt holds no prompts"),
    (".txt", "  \n\n", r"holds no prompts"),
    (".txt", "def f():\n---\n\n---\ndef g():\n", r"empty\.txt, line 4: empty prompt"),
    (".jsonl", "", r"holds no prompts"),
    (".jsonl", '{"text": "def f():"}\n{"text": oops}\n', r"empty\.jsonl, line 2: not valid JSON"),
    (".jsonl", '{"prompt": "def f():"}\n', r"line 1: expected an object with a non-empty string \"text\""),
    (".jsonl", '{"text": "   "}\n', r"line 1: expected an object"),
    (".jsonl", '["def f():"]\n', r"line 1: expected an object"),
])
def test_bad_prompt_files_name_the_file_and_line(tmp_path, suffix, content, message):
    path = tmp_path / f"empty{suffix}"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        read_prompt_file(path)


def test_jsonl_prompt_files_and_source_errors(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"text": "def f(x):\n    \"\"\"Double.\"\"\"\n", "id": "dbl"}) + "\n\n" +
                    json.dumps({"text": "def g():"}) + "\n")
    got = read_prompt_file(path)
    assert [p.text for p in got] == ['def f(x):\n    """Double."""', "def g():"]
    assert [p.source for p in got] == ["p.jsonl:1:dbl", "p.jsonl:3"]
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        all_sources(1, source=tmp_path / "nowhere.jsonl")
    with pytest.raises(ValueError,
                       match="must be 'stdlib', 'packages', 'stdlib-long', 'packages-long', 'stubs' or a path"):
        all_sources(1, source="pypi")
    with pytest.raises(ValueError, match=r"expected a \.txt or \.jsonl file"):
        read_prompt_file(tmp_path / "p.csv")


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
    assert found.qualified and found.tried_sentence.endswith(f"the first {found.index} looped")
    import pytest
    with pytest.raises(ValueError, match="n_candidates"):
        showcase_prompt(model, tokenizer, n=2, window=48, n_candidates=2, fallback=False)
    looped = showcase_prompt(model, tokenizer, n=2, window=48, n_candidates=2)    # none qualifies: the longest run
    assert not looped.qualified and looped.n_tried == 2 and "all 2 candidates looped" in looped.tried_sentence
    runs = []
    for prompt in benchmark_prompts(2):
        ids = tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        runs.append(first_repeat(labkit.autoregressive_generate(model, ids, 48).new_tokens, 2))
    assert looped.index == runs.index(max(runs))
    with pytest.raises(ValueError, match="n <= window"):
        showcase_prompt(model, tokenizer, n=10, window=5)


def test_package_files_split_by_file_without_tests():
    import pytest

    from labkit.artifacts.corpus import package_files, package_folder

    every, train, valid = (set(package_files("jinja2", s)) for s in (None, "train", "validation"))
    assert train and valid and train.isdisjoint(valid) and train | valid == every
    assert package_files("jinja2", "train") == package_files("jinja2", "train")
    assert all(p.is_relative_to(package_folder("jinja2")) for p in every)
    assert not any({"tests", "vendor"} & set(p.parts) for p in package_files("networkx"))
    with pytest.raises(ModuleNotFoundError, match="no_such_package_xyz"):
        package_files("no_such_package_xyz")
    with pytest.raises(ValueError, match="split"):
        package_files("jinja2", "dev")


# ---------------------------------------------------------------------------------------
# long sources: the same functions, each after the text of its file just before it
# ---------------------------------------------------------------------------------------

LONG_SOURCES = [("stdlib-long", "stdlib"), ("packages-long", "packages")]


@pytest.fixture(scope="module")
def every_prompt():
    """Every prompt of the four built-in sources (seed 0), built once for this module's tests."""
    return {name: all_prompts(source=name) for pair in LONG_SOURCES for name in pair}


def _by_folder(sources) -> dict[str, list[str]]:
    """Sources in order, per top folder (a package: the packages' prompts are interleaved one of each in turn)."""
    out = {}
    for source in sources:
        out.setdefault(source.split("/")[0], []).append(source)
    return out


@pytest.mark.parametrize("long, short", LONG_SOURCES)
def test_long_prompts_are_the_short_ones_in_the_same_order(every_prompt, long, short):
    """Deterministic; the short source's functions (same held-out files) in its order, a few left out."""
    got, shorts = every_prompt[long], {p.source: p.text for p in every_prompt[short]}
    assert all_sources(10, source=long) == got[:10] and all_sources(10, seed=1, source=long) != got[:10]
    kept = {p.source for p in got}
    assert _by_folder(p.source for p in got) == _by_folder(s for s in shorts if s in kept)   # a few left out
    assert 0.9 * len(shorts) <= len(got) < len(shorts)
    if short == "stdlib":
        assert {split_of(p.source.split(":")[0]) for p in got} == {"validation"}
    else:
        assert {p.source.split("/")[0] for p in got[:7]} == {name for _, name in OUTSIDE_PACKAGES}


@pytest.mark.parametrize("long, short", LONG_SOURCES)
def test_long_prompts_end_with_their_short_prompt_as_the_file_has_it(every_prompt, long, short):
    """The function's lines, dedented, are its short prompt (ending at the docstring's quotes); a method
    keeps its class's indentation after the class text before it."""
    shorts = {p.source: p.text for p in every_prompt[short]}
    indents = []
    for p in every_prompt[long][:30]:
        tail, lines = shorts[p.source].splitlines(), p.text.splitlines()
        indent = len(lines[-len(tail)]) - len(lines[-len(tail)].lstrip(" "))
        assert "\n".join(line[indent:] for line in lines[-len(tail):]) == shorts[p.source]
        assert len(lines) > len(tail) and len(p.text) >= 600 and p.text.endswith(('"', "'"))
        indents.append(indent)
    assert 0 in indents and max(indents) >= 4                                  # functions and methods


@pytest.mark.parametrize("long", [name for name, _ in LONG_SOURCES])
def test_long_prompts_fit_the_models_context(every_prompt, long):
    """A few hundred tokens of the shipped tokenizer, leaving the lab's models (512 positions) room for
    128 new tokens and 12 drafted ones."""
    import labkit
    model, tokenizer = labkit.load_model("default")
    lengths = [len(tokenizer(p.text, add_special_tokens=False)["input_ids"]) for p in every_prompt[long]]
    assert all(150 <= n <= 340 for n in lengths[:30]), lengths[:30]
    assert 200 <= statistics.median(lengths[:30]) and 200 <= statistics.median(lengths) <= 300
    assert max(lengths) <= model.config.max_position_embeddings - 128 - 12


@pytest.mark.parametrize("long", [name for name, _ in LONG_SOURCES])
def test_long_sources_hold_out_the_choosing_prompts_and_say_what_they_are(every_prompt, long):
    bench = benchmark_prompts(6, source=long)
    assert bench == every_prompt[long][PROMPT_OFFSET:PROMPT_OFFSET + 6]
    assert not {p.source for p in bench} & {p.source for p in every_prompt[long][:PROMPT_OFFSET]}
    info, short = source_info(long), source_info(long.removesuffix("-long"))
    assert info["source"] == source_label(long) == long and info["variant"] == "long"
    assert {k: v for k, v in info.items() if k not in ("source", "variant", "of", "chars")} == \
        {k: v for k, v in short.items() if k != "source"}
    assert "variant" not in short


@pytest.fixture(scope="module")
def stubs():
    return all_prompts(source="stubs")


def test_stubs_are_deterministic_held_out_and_each_has_an_example(stubs):
    """Every stub's docstring holds a '>>>' line and ends at its quotes (the body left to write); the stdlib's come
    from validation files only (none from a training file); the first ones spread over the stdlib and packages."""
    assert all_sources(12, source="stubs") == stubs[:12] and all_sources(12, seed=1, source="stubs") != stubs[:12]
    assert len(stubs) >= 100 and len({p.text for p in stubs}) == len(stubs)
    for p in stubs:
        assert any(line.lstrip().startswith(">>>") for line in p.text.splitlines()), p.source
        assert p.text.startswith(("def ", "async def ", "@")) and p.text.endswith(('"', "'")), p.source
    from labkit.artifacts.prompts import STUB_PACKAGES
    packages = {name for _, name in STUB_PACKAGES}
    stdlib = [p.source for p in stubs if p.source.split("/")[0] not in packages]
    assert stdlib and {split_of(s.split(":")[0]) for s in stdlib} == {"validation"}
    assert {"numpy", "packaging"} <= {s.split("/")[0] for s in (p.source for p in stubs[:12])}
    bench = benchmark_prompts(6, source="stubs")
    assert bench == stubs[PROMPT_OFFSET:PROMPT_OFFSET + 6]
    info = source_info("stubs")
    assert info["source"] == "stubs" and "numpy" in info["packages"] and info["stdlib"] == "validation files"


def test_stubs_fit_the_models_context(stubs):
    import labkit
    model, tokenizer = labkit.load_model("default")
    lengths = [len(tokenizer(p.text, add_special_tokens=False)["input_ids"]) for p in stubs]
    assert max(lengths) <= model.config.max_position_embeddings - 128 - 12, max(lengths)
