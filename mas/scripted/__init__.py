"""The scripted chat model: the deterministic test double, a provider selected by name only (``--model scripted``).

No production module imports it: it registers as the provider ``scripted`` through the entry-point group
``mas_econ.providers`` (:mod:`mas.scripted.provider`; a test session registers it with a fixture). Everything
the double knows lives here, in modules named for the prompt contracts they answer, registered by contract
name in :data:`mas.scripted.scripting.RESPONDERS` (:mod:`mas.scripted.responders` imports them all):

- the runtime's: ``agent.turn`` and ``app.turn`` (:mod:`.agents`), ``judge.*`` (:mod:`.judge`),
  ``supervisor.route`` (:mod:`.supervisor`), ``personas.generate`` (:mod:`.personas`), ``orchestrator.*``
  (:mod:`.orchestrator`), ``benchmark.grade`` (BrowseComp's grading, :mod:`.browsecomp`);
- attribution's, ``attribution.<method>.<stage>`` (:mod:`.attribution`), which know a case only by the call's
  hints: this package imports nothing of ``attribution`` (a higher stage);
- the benchmark players (:mod:`.players`, a registry by benchmark name: arith, WorkBench and any benchmark solved
  by acting, BrowseComp, SciCode), which answer the agents' turns and BrowseComp's grading: the runner names the
  benchmark and hands over the task's structured fields (its record, its reference actions) as the double's
  per-run arguments, and the player is picked by that name, never by the prompt's text. A responder elsewhere
  that needs the task asks the player through a protocol of its own (``ctx.player``, e.g.
  :class:`mas.scripted.orchestrator.Decomposer`).

What a call is about travels as its metadata and hints (``metadata["hints"]``: the roster, the reports, the
subtask, the parts, the own and peers' answers, the grading fields, an attribution case's shown log lines),
read instead of the prompt's prose. What still comes from the messages, as a model would take it: the
conversation's own tool calls and their results (:mod:`.replies`; the text tool protocol's results have no
other channel), SciCode's function header, copied from the step's prompt (:mod:`.scicode`), and, on a task no
player plays, whether the system prompt asks for code (:func:`mas.scripted.replies.unplayed_turn`). A test scripts its own instance (``responders=``,
:meth:`ScriptedChatModel.enqueue`, :func:`mas.scripted.provider.scripted_with`) instead of changing a global.
"""

import mas.scripted.responders  # noqa: F401  (every answer registered wherever the double is used)
from mas.scripted.model import InjectionPlan, ScriptedChatModel, ScriptedModelError
from mas.scripted.scripting import ScriptedContext, responder

__all__ = ["InjectionPlan", "ScriptedChatModel", "ScriptedContext", "ScriptedModelError", "responder"]
