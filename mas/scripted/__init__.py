"""The scripted chat model: the deterministic test double, a provider selected by name only (``--model scripted``).

No production module imports it: it registers as the provider ``scripted`` through the entry-point group
``mas_econ.providers`` (:mod:`mas.scripted.provider`). It answers by contract from
:data:`mas.llm.scripting.RESPONDERS`, filled by the modules that own the prompts (the judge's, the personas',
the supervisor's and attribution's answers live beside those prompts); the agents' turns (``agent.turn``, which
plays arith, WorkBench and BrowseComp) and the orchestrator's plan and critique are still registered here, by
:mod:`mas.scripted.responders`. What a call is about travels as its hints (``metadata["hints"]``: the roster,
the reports, the subtask, the parts), read instead of the prompt's prose; discussion turns (own and peers'
answers) and BrowseComp's grading are still read from the prompt. A test scripts its own instance
(``responders=``, :meth:`ScriptedChatModel.enqueue`) instead of changing a global.
"""

from mas.llm.scripting import ScriptedContext, responder
from mas.scripted.model import InjectionPlan, ScriptedChatModel, ScriptedModelError

__all__ = ["InjectionPlan", "ScriptedChatModel", "ScriptedContext", "ScriptedModelError", "responder"]
