"""Choosing the draft by Bayesian optimisation (Optuna): ``inputs`` (what a search is given, resolved once: the
model as a ``SearchModel``, the study's settings as a ``SearchConfig``), ``samplers`` (GP, TPE, random, seeded),
``space`` (the 2L skip variables, or the whole draft configuration for ``priced``; warm starts, ratio buckets),
``storage`` (studies that survive ``kill -9``; what a study records), ``objectives`` (``modelled``, ``measured``,
``priced``, in ms per token), ``study`` (opening one study: attributes, cost models, warm starts), ``run``
(``run_search``: its trials), ``final`` (the wall-clock final check), ``export`` (the committed results),
``compare`` (checks on the search itself), and ``toy`` (the BO lesson's toy problems). ``python -m labkit search``
is the command line::

    run_search("default", SearchConfig(objective="priced", sampler="gp", seed=0), trials=100)
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
