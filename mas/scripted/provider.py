"""The scripted double as a provider (``provider = "scripted"``), registered through the entry-point group
``mas_econ.providers`` like any installed provider; no production module imports it.

Its own per-run arguments (:class:`mas.llm.models.ModelSet`'s ``provider_args["scripted"]``):
``injection`` (the run's :class:`mas.llm.injection.InjectionPlan`, which it carries out), ``benchmark`` (the
benchmark's name, which picks the player) and ``task`` (the task's structured fields, ``Task.metadata``: arith's
chain, ...), ``oracle_actions`` (the task's reference actions on a benchmark solved by acting, which it
replays), and ``responders`` (contract -> answer: a test's own script for this run's models, ahead of the
registered ones).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from mas.llm.providers import PROVIDERS, BoundModel, Provider, ProviderRequest
from mas.scripted.scripting import Answer
from mas.scripted.model import ScriptedChatModel
from mas.scripted.players import player_for

JUDGING_VARIANTS = ("scripted:judge", "scripted:nojudge")
"""Variants that answer the judge's calls (``scripted`` itself leaves judging to the lexical fallback)."""


@PROVIDERS.register("scripted")
def scripted_provider(req: ProviderRequest) -> BoundModel:
    """The deterministic double; the route's ``model`` picks the variant (see :mod:`mas.scripted.model`)."""
    route = req.route
    variant = route.model if route.model.startswith("scripted") else "scripted"
    model = ScriptedChatModel(seed=req.seed, variant=variant, latency_ms=route.scripted_latency_ms,
                              injection=req.args.get("injection"), max_concurrent=route.rate_limit.max_concurrent,
                              player=player_for(req.args.get("benchmark"), req.args.get("task"),
                                                req.args.get("oracle_actions")),
                              responders=dict(req.args.get("responders") or {}))
    # A run with an injection plan is not cached: its wrong step is the plan's, not the request's, so a reply
    # stored by a clean run would answer it honestly (and one of its own would replay without firing the plan).
    return BoundModel(name=req.route_name, route=route, model=model, model_label=variant,
                      judges=variant in JUDGING_VARIANTS, cacheable=req.args.get("injection") is None)


def scripted_with(responders: Mapping[str, Answer]) -> Provider:
    """A scripted provider whose models answer ``responders`` (contract -> answer) ahead of the registered
    answers: a test registers it under a name of its own and names that in its route, scripting whole runs
    without touching any global answer."""

    def provider(req: ProviderRequest) -> BoundModel:
        own = {**responders, **(req.args.get("responders") or {})}
        return scripted_provider(dataclasses.replace(req, args={**req.args, "responders": own}))

    provider.args_of = "scripted"  # type: ignore[attr-defined]  (the run's task and injection, as the double's)
    return provider
