"""The scripted double as a provider (``provider = "scripted"``), registered through the entry-point group
``mas_econ.providers`` like any installed provider; no production module imports it.

Its own per-run arguments (:class:`mas.llm.models.ModelSet`'s ``provider_args["scripted"]``):
``injection`` (the run's :class:`mas.llm.injection.InjectionPlan`, which it carries out) and
``oracle_actions`` (the task's reference actions on a benchmark solved by acting, which it replays).
"""

from __future__ import annotations

from mas.llm.providers import PROVIDERS, BoundModel, ProviderRequest
from mas.scripted.model import ScriptedChatModel

JUDGING_VARIANTS = ("scripted:judge", "scripted:nojudge")
"""Variants that answer the judge's calls (``scripted`` itself leaves judging to the lexical fallback)."""


@PROVIDERS.register("scripted")
def scripted_provider(req: ProviderRequest) -> BoundModel:
    """The deterministic double; the route's ``model`` picks the variant (see :mod:`mas.scripted.model`)."""
    import mas.scripted.responders  # noqa: F401  (registers every contract's answers)

    route = req.route
    variant = route.model if route.model.startswith("scripted") else "scripted"
    model = ScriptedChatModel(seed=req.seed, variant=variant, latency_ms=route.scripted_latency_ms,
                              injection=req.args.get("injection"), max_concurrent=route.rate_limit.max_concurrent,
                              oracle_actions=req.args.get("oracle_actions"))
    return BoundModel(name=req.route_name, route=route, model=model, model_label=variant,
                      judges=variant in JUDGING_VARIANTS)
