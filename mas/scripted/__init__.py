"""The scripted chat model: the deterministic test double, a provider selected by name only (``--model scripted``).

No production module imports it: it registers as the provider ``scripted`` through the entry-point group
``mas_econ.providers`` (:mod:`mas.scripted.provider`). It answers by contract from
:data:`mas.llm.scripting.RESPONDERS`, filled by the modules that own the prompts (the judge's, the personas',
the supervisor's, the orchestrator's plan and critique, and attribution's answers live beside those prompts).
Its own code here is the benchmark players (:mod:`mas.scripted.players`: arith, WorkBench and any benchmark
solved by acting, BrowseComp, SciCode), which answer the agents' turns (``agent.turn``) and BrowseComp's
grading: the runner names the benchmark and hands over the task's structured fields (its record, its
reference actions) as the double's per-run arguments, and the player is picked by that name, never by the
prompt's text. The players stay in this package because a provider's behaviour lives in its package and
``benchmark/`` (a lower stage) cannot hold answers built from the runtime's messages; a responder elsewhere
that needs the task asks the player through a protocol of its own (``ctx.player``, e.g.
:class:`mas.topologies.decomposition.Decomposer`). What a call is about travels as its hints
(``metadata["hints"]``: the roster, the reports, the subtask, the parts, the own and peers' answers, the
grading fields), read instead of the prompt's prose. A test scripts its own instance (``responders=``,
:meth:`ScriptedChatModel.enqueue`, :func:`mas.scripted.provider.scripted_with`) instead of changing a global.
"""

from mas.llm.scripting import ScriptedContext, responder
from mas.scripted.model import InjectionPlan, ScriptedChatModel, ScriptedModelError

__all__ = ["InjectionPlan", "ScriptedChatModel", "ScriptedContext", "ScriptedModelError", "responder"]
