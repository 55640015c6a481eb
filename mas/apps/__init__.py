"""Application systems: a multi-agent LangGraph app the user already has, measured, traced, attributed and rolled
back as a system, with no import of this project in its code.

Name it ``--systems app:MODULE:FACTORY``, declare it in the config (``[systems.<name>] graph = "MODULE:FACTORY"``,
with ``input_key``/``answer_key`` overriding the conventions), or install it behind a ``mas_econ.systems`` entry
point naming the factory. The factory returns a LangGraph ``StateGraph`` or compiled graph; one taking a ``model``
argument gets the route's chat model (:mod:`mas.apps.model`: ``--model``, ``--models``, the cache and budgets
apply), one that does not keeps its own models and is traced all the same (:mod:`mas.apps.handler`). The graph runs
with the run's checkpointer, so a failed run is attributed, labelled and rolled back like a built-in system's.
Conventions: :mod:`mas.apps.topology`; loading and its errors: :mod:`mas.apps.spec`; a worked example:
``examples/langgraph_app/``.
"""

from descriptor.exports import lazy_exports

_EXPORTS = {
    "AppRunHandler": "mas.apps.handler",
    "AppTopology": "mas.apps.topology",
    "RouteChatModel": "mas.apps.model",
    "app_system": "mas.apps.spec",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
