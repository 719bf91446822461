"""What a search is given, each resolved once: the model (:class:`SearchModel`) and the study's settings
(:class:`SearchConfig`).

A model enters a search as a name (a shipped name, a folder or a hub id). :meth:`SearchModel.resolve` loads it on a
device in a precision (``device``, ``dtype``: as :func:`~labkit.artifacts.models.load_model` takes them; a study
records the precision and the kind of device, :attr:`SearchModel.precision`) and reads its identity (id, key,
folder, weights fingerprint: :func:`~labkit.artifacts.models.identify`) once; everything below
:func:`~labkit.search.run.run_search` reads that record instead of resolving the name again, and ``python -m
labkit.search --per-bucket`` shares one record across its studies (the weights are hashed once).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..artifacts.models import ModelIdentity, identify, load_model
from ..core.checks import check_choice, check_int
from ..core.devices import dtype_name, model_device, model_dtype, resolve_device, resolve_dtype
from ..measure.costs.costmodel import CostModel, measure_cost_model
from .objectives import OBJECTIVES, objective_settings
from .samplers import SAMPLERS
from .space import check_bucket

__all__ = ["SearchModel", "SearchConfig", "model_identity"]

#: The draft weights a ``priced`` search prices (None: the model's own weights).
PRICED_WEIGHTS = (None, "int8")


def _check_cost_model(cost_model):
    """``cost_model`` if it is None, a CostModel or {draft weights: CostModel}; TypeError naming it otherwise."""
    if cost_model is None or isinstance(cost_model, CostModel):
        return cost_model
    if isinstance(cost_model, dict) and all(isinstance(cm, CostModel) for cm in cost_model.values()):
        return dict(cost_model)
    raise TypeError(f"cost_model must be a CostModel or a dict {{draft weights: CostModel}}, got {cost_model!r}")


def _check_placement(model, device, dtype) -> None:
    """ValueError when a model already in memory is not on ``device`` or not in ``dtype`` (None: not asked)."""
    if device is not None:
        want, have = resolve_device(device), model_device(model)
        if want.type != have.type or (want.index is not None and want.index != (have.index or 0)):
            raise ValueError(f"device={device!r}: the model given is on {have}; load it there, or leave device out")
    if dtype is not None and resolve_dtype(dtype) != model_dtype(model):
        raise ValueError(f"dtype={dtype!r}: the model given is in {dtype_name(model_dtype(model))}; load it in that "
                         "precision, or leave dtype out")


@dataclass(frozen=True)
class SearchModel:
    """One model as a search uses it: the loaded model and tokenizer, its :class:`ModelIdentity` (what studies
    record and result folders are named by), and the cost model(s) given for it (None: a study finds its own,
    see :mod:`labkit.search.run`). Build it with :meth:`resolve`."""

    identity: ModelIdentity
    model: object = field(repr=False, compare=False)
    tokenizer: object = field(repr=False, compare=False)
    cost_model: CostModel | dict | None = field(default=None, repr=False, compare=False)

    @classmethod
    def resolve(cls, model="default", *, loaded: tuple | None = None, cost_model=None, device=None,
                dtype=None) -> SearchModel:
        """``model`` (a shipped name, a folder, a hub id, or a SearchModel, returned as is) loaded and identified.

        ``device``, ``dtype``: where and in what precision the model is loaded (None: the CPU, fp32; as
        :func:`~labkit.artifacts.models.load_model` takes them); for a model already in memory (a SearchModel,
        ``loaded``) they are checked against it. ``loaded``: ``(model, tokenizer)`` already in memory (else loaded
        here). ``cost_model``: a CostModel, or {draft weights: CostModel} for a ``priced`` search; it replaces a
        SearchModel's own.
        """
        cost_model = _check_cost_model(cost_model)
        if isinstance(model, SearchModel):
            if loaded is not None:
                raise ValueError("loaded: model is already a SearchModel, which holds its loaded model")
            _check_placement(model.model, device, dtype)
            return model if cost_model is None else replace(model, cost_model=cost_model)
        if loaded is not None and (not isinstance(loaded, tuple) or len(loaded) != 2):
            raise TypeError(f"loaded must be a (model, tokenizer) pair, got {type(loaded).__name__}")
        if loaded is not None:
            _check_placement(loaded[0], device, dtype)
        model_obj, tokenizer = loaded or load_model(model, device=device, dtype=dtype)
        return cls(identify(model), model_obj, tokenizer, cost_model)

    @property
    def precision(self) -> dict:
        """What a study records of where its trials ran: ``{"dtype": "fp32" | "bf16" | "fp16", "device": "cpu" |
        "cuda" | "mps"}`` (the kind of device, not its index: workers on several GPUs share a study)."""
        return {"dtype": dtype_name(model_dtype(self.model)), "device": model_device(self.model).type}

    @property
    def n_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    def given_cost_model(self, objective: str):
        """The given cost model(s) in the form ``objective`` prices with: a CostModel (``modelled``; the model's
        own weights' entry of a dict), {draft weights: CostModel} (``priced``), None (``measured``, or none given)."""
        given = self.cost_model
        if given is None or objective == "measured":
            return None
        if objective == "modelled":
            return given.get(None) if isinstance(given, dict) else given
        if not isinstance(given, dict) or None not in given:
            raise TypeError("cost_model: a priced search needs {draft weights: CostModel} with the model's own "
                            f"weights (key None), got {given!r}")
        return given

    def cost_model_for(self, objective: str):
        """The given cost model(s) for ``objective`` (:meth:`given_cost_model`), else measured now (None for
        ``measured``, which times instead of pricing)."""
        if objective == "measured":
            return None
        given = self.given_cost_model(objective)
        return given if given is not None else self.measure_cost_model(objective)

    def measure_cost_model(self, objective: str):
        """This machine's cost model(s) measured now, in the form ``objective`` prices with (a few seconds each)."""
        if objective == "priced":
            return {w: measure_cost_model(self.model, model_name=self.identity.id, draft_weights=w)
                    for w in PRICED_WEIGHTS}
        return measure_cost_model(self.model, model_name=self.identity.id)


def model_identity(model) -> ModelIdentity:
    """The identity of ``model``: a name or folder (identified here), a ModelIdentity, or a SearchModel's."""
    if isinstance(model, SearchModel):
        return model.identity
    return model if isinstance(model, ModelIdentity) else identify(model)


@dataclass(frozen=True)
class SearchConfig:
    """One study's settings: what it optimises (``objective`` and that objective's settings), how (``sampler``,
    ``seed``, ``warm_start``), where in the space (``ratio_bucket``: skip ratios [lo, hi), None: all) and its
    name (None: ``<model key>-<objective>[-ratio<lo>-<hi>]``). Settings left None take the objective's defaults
    (:data:`~labkit.search.objectives.DEFAULT_SETTINGS`); those the objective has no use for are ignored.
    Checked when built: a bad value raises, naming its field."""

    objective: str = "modelled"
    sampler: str = "gp"
    seed: int = 0
    ratio_bucket: tuple[float, float] | None = None
    study_name: str | None = None
    warm_start: bool = True
    n_prompts: int | None = None         # choosing prompts (per source, for 'priced')
    n_tokens: int | None = None          # modelled: continuation tokens scored per prompt
    max_new_tokens: int | None = None    # measured, priced: tokens generated per prompt
    policy: str | None = None            # measured: 'adaptive' or 'fixed:K'
    prompt_seed: int | None = None       # the order the prompts are taken in
    sources: tuple[str, ...] | None = None   # measured, priced: prompt sources

    def __post_init__(self):
        check_choice("objective", self.objective, OBJECTIVES)
        check_choice("sampler", self.sampler, SAMPLERS)
        check_int("seed", self.seed, 0)
        if self.prompt_seed is not None:
            check_int("prompt_seed", self.prompt_seed)
        if self.study_name is not None and (not isinstance(self.study_name, str) or not self.study_name):
            raise ValueError(f"study_name must be a non-empty string or None, got {self.study_name!r}")
        if not isinstance(self.warm_start, bool):
            raise TypeError(f"warm_start must be True or False, got {self.warm_start!r}")
        if isinstance(self.sources, str):
            raise TypeError(f"sources must be a sequence of source names, got the string {self.sources!r}")
        object.__setattr__(self, "ratio_bucket", check_bucket(self.ratio_bucket))
        object.__setattr__(self, "sources", None if self.sources is None else tuple(self.sources))
        _ = self.settings                                   # the objective's own checks of its settings, now

    @property
    def settings(self) -> dict:
        """The objective's settings (defaults filled in; a new dict each time): what a study records."""
        return objective_settings(self.objective, {
            "n_prompts": self.n_prompts, "n_tokens": self.n_tokens, "max_new_tokens": self.max_new_tokens,
            "policy": self.policy, "prompt_seed": self.prompt_seed, "sources": self.sources})

    @property
    def space(self) -> str:
        """What a trial chooses: "config" (the whole draft configuration, ``priced``) or "mask" (the skip set)."""
        return "config" if self.objective == "priced" else "mask"
