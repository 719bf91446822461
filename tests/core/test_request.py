"""One entry point that takes a draft (labkit.core.request): every ``draft=`` form gives the tokens its older keyword
form gives, the sampling record gives what the older sampling keywords give under the same seed, and the either-or
checks name their arguments."""
import pytest
import torch

from labkit import DraftConfig, FixedK, SkipSet, StaticThreshold, autoregressive_generate, draft_tree, lookahead
from labkit import speculative_generate as generate
from labkit.core.drafters import LookupDrafter, SelfDrafter
from labkit.core.request import make_drafter, resolve_drafter, resolve_sampling
from labkit.core.sampling import Warp
from labkit.core.strategies import StaticStrategy

from tiny_models import tiny_model

IDS = torch.tensor([[5, 9, 14, 3, 5, 9, 14, 3, 7]])
SKIP = SkipSet(attention=[1], mlp=[2])
N = 14


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", n_layers=4)


def tokens(out) -> list[int]:
    return out.sequences[0].tolist()


def test_draft_forms_match_the_keyword_forms(model):
    cases = {
        "a SkipSet": ({"draft": SKIP}, {"skip": SKIP}),
        "skip-set text": ({"draft": "attention=1;mlp=2"}, {"skip": SKIP}),
        "a strategy": ({"draft": StaticStrategy(SKIP)}, {"skip": StaticStrategy(SKIP)}),
        "a drafter": ({"draft": SelfDrafter(model, SKIP)}, {"drafter": SelfDrafter(model, SKIP)}),
        "a name": ({"draft": "lookahead"}, {"drafter": lookahead()}),
        "a set with modifiers": ({"draft": SKIP, "lookup": 3, "draft_weights": "int8"},
                                 {"skip": SKIP, "lookup": 3, "draft_weights": "int8"}),
        "a tree": ({"draft": SKIP, "tree": draft_tree("static")}, {"skip": SKIP, "tree": draft_tree("static")}),
    }
    plain = tokens(autoregressive_generate(model, IDS, N))
    for name, (new, old) in cases.items():
        a = generate(model, IDS, policy=FixedK(3), max_new_tokens=N, **new)
        b = generate(model, IDS, policy=FixedK(3), max_new_tokens=N, **old)
        assert tokens(a) == tokens(b) == plain, name
        assert [s.drafted for s in a.trace.steps] == [s.drafted for s in b.trace.steps], name


def test_a_draft_config_brings_its_weights_and_stop_rule(model):
    config = DraftConfig(skip=SKIP, draft_weights="int8", policy="static", threshold=0.3, max_draft=4)
    a = generate(model, IDS, draft=config, max_new_tokens=N)
    b = generate(model, IDS, max_new_tokens=N, **config.generate_kwargs())
    assert tokens(a) == tokens(b)
    assert [s.drafted for s in a.trace.steps] == [s.drafted for s in b.trace.steps]
    drafter, policy = resolve_drafter(model, config)
    assert isinstance(policy, StaticThreshold) and policy.threshold == 0.3 and policy.max_draft == 4
    assert resolve_drafter(model, config, FixedK(2))[1].max_draft == 2          # a given policy wins
    assert isinstance(resolve_drafter(model, SKIP, lookup=2)[0], LookupDrafter)
    assert isinstance(make_drafter(model, skip=SKIP), SelfDrafter)


def test_sampling_record_matches_the_keywords(model):
    kw = {"do_sample": True, "temperature": 0.8, "top_k": 20, "top_p": 0.9}
    for run in (lambda **a: generate(model, IDS, draft=SKIP, policy=FixedK(3), max_new_tokens=N, **a),
                lambda **a: autoregressive_generate(model, IDS, N, **a)):
        a = run(sampling=Warp(**kw), generator=torch.Generator().manual_seed(3))
        b = run(generator=torch.Generator().manual_seed(3), **kw)
        assert tokens(a) == tokens(b)
    assert resolve_sampling() == Warp() and resolve_sampling(temperature=0.5) == Warp(temperature=0.5)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"draft": SKIP, "skip": SKIP}, ValueError, ["draft", "skip"]),
    ({"draft": SKIP, "drafter": LookupDrafter(2)}, ValueError, ["draft", "drafter"]),
    ({"draft": LookupDrafter(2), "tree": draft_tree("static")}, ValueError, ["draft", "tree"]),
    ({"draft": DraftConfig(skip=SKIP, draft_weights="int8"), "draft_weights": "int8"}, ValueError,
     ["draft", "draft_weights"]),
    ({"drafter": LookupDrafter(2), "skip": SKIP}, ValueError, ["drafter", "skip"]),
    ({"draft_model": "m", "skip": SKIP}, ValueError, ["skip", "draft_model"]),
    ({"draft": 3}, TypeError, ["draft"]),
    ({"draft": "no such draft"}, ValueError, ["draft", "no such draft"]),
    ({"drafter": "a drafter"}, TypeError, ["drafter"]),
    ({"tree": "static"}, TypeError, ["tree"]),
    ({"sampling": Warp(), "do_sample": True}, ValueError, ["sampling", "do_sample"]),
    ({"sampling": {"do_sample": True}}, TypeError, ["sampling"]),
    ({"policy": "fixed"}, TypeError, ["policy"]),
    ({"skp": SKIP}, TypeError, ["skp"]),
])
def test_either_or_errors_name_their_arguments(model, kwargs, error, words):
    with pytest.raises(error) as info:
        generate(model, IDS, max_new_tokens=3, **kwargs)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_unknown_keywords_of_the_plain_loop(model):
    with pytest.raises(TypeError, match="'skip'"):
        autoregressive_generate(model, IDS, 3, skip=SKIP)
    with pytest.raises(ValueError, match="sampling or temperature"):
        autoregressive_generate(model, IDS, 3, sampling=Warp(), temperature=0.5)
