"""labkit.search.compare: GP vs TPE vs random (best-so-far curves and their summary), the rank agreement of
modelled and measured costs, and the check that names a missing study."""
import pytest

from labkit.search import SearchConfig

from tiny_search import CM, FAST, QUIET, tiny  # noqa: F401 (fixtures)


def test_compare_samplers_and_rank_agreement(tiny):
    from labkit.search import compare_samplers, rank_agreement

    cmp = compare_samplers(tiny, SearchConfig(**FAST), seeds=(0, 1), trials=5, **QUIET)
    for sampler in ("gp", "tpe", "random"):
        assert len(cmp["curves"][sampler]) == 2
        for curve in cmp["curves"][sampler]:
            assert len(curve) == 5 and all(b <= a for a, b in zip(curve, curve[1:]))     # best so far
    summary = cmp["summary"]
    assert summary["best_any_ms_per_token"] == min(min(v) for v in cmp["final"].values())
    assert isinstance(summary["target_gp_within_5pct"], bool) and "target_gp_median_beats_random" in summary

    rank = rank_agreement(tiny, n_sets=4, modelled_settings={"n_prompts": 1, "n_tokens": 6},
                          measured_settings={"n_prompts": 1, "max_new_tokens": 6}, progress=False, cost_model=CM)
    assert rank["n_sets"] == 4 and -1 <= rank["spearman_rho"] <= 1 or rank["spearman_rho"] != rank["spearman_rho"]
    assert len(rank["rows"]) == 4 and {"modelled_ms", "measured_ms", "ratio", "skip", "alpha"} <= set(rank["rows"][0])


def test_check_names_the_missing_study(tmp_path):
    from labkit.search import check_modelled_against_measured

    with pytest.raises(LookupError, match=r"default-modelled.*python -m labkit.search --model default"):
        check_modelled_against_measured("default", storage=str(tmp_path / "empty.db"))
