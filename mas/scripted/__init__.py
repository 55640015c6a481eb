"""The scripted chat model: the deterministic test double, selected by name only (``--model scripted``).

Its behaviour lives here and nowhere else: the model (:mod:`mas.scripted.model`) and its answers per
prompt contract (agents, judges, supervisor routing, attribution prompts), registered by importing
:mod:`mas.scripted.responders`.
"""

from mas.scripted.model import (
    InjectionPlan,
    ScriptedChatModel,
    ScriptedContext,
    ScriptedModelError,
    responder,
)

__all__ = ["InjectionPlan", "ScriptedChatModel", "ScriptedContext", "ScriptedModelError", "responder"]
