"""Choosing the draft by Bayesian optimisation (Optuna): what a search is given (the model resolved once, the
study's settings), the search space, where studies are stored, the objectives, opening and running a study, the
wall-clock final check, exporting its results, and checks on the search itself. Also the toy problems of the BO
lesson (:mod:`labkit.search.toy`).

    run_search("default", SearchConfig(objective="priced", sampler="gp", seed=0), trials=100)

Search space: 2L binary parameters ``attn_l`` / ``mlp_l`` (``suggest_int(name, 0, 1)``, 1 = skip), and for the
``priced`` objective the whole draft configuration (draft weights and stop rule too); GPSampler by default (TPE
and random selectable), all seeded. ``python -m labkit.search`` is the command line.
"""
from .compare import check_modelled_against_measured, compare_samplers, rank_agreement
from .export import export_results
from .final import FinalConfig, final_check
from .inputs import SearchConfig, SearchModel
from .objectives import OBJECTIVES, MeasuredObjective, ModelledObjective, PricedObjective
from .run import SearchResult, run_search
from .samplers import SAMPLERS, make_sampler
from .space import param_names, params_from_skip, skip_from_params, warm_start_sets
from .storage import DEFAULT_STORAGE, open_storage

__all__ = ["DEFAULT_STORAGE", "OBJECTIVES", "SAMPLERS", "FinalConfig", "MeasuredObjective", "ModelledObjective",
           "PricedObjective", "SearchConfig", "SearchModel", "SearchResult", "check_modelled_against_measured",
           "compare_samplers", "export_results", "final_check", "make_sampler", "open_storage", "param_names",
           "params_from_skip", "rank_agreement", "run_search", "skip_from_params", "warm_start_sets"]
