"""Registers every answer and player of the double (imported once, by :mod:`mas.scripted` itself): one module per
family of prompt contracts, named for it, and one per benchmark it plays (:mod:`mas.scripted.players`)."""

import mas.scripted.agents  # noqa: F401  (agent.turn, app.turn; each module registers its answers)
import mas.scripted.arith  # noqa: F401  (the arith player)
import mas.scripted.attribution.chief  # noqa: F401  (attribution.chief.*)
import mas.scripted.attribution.echo  # noqa: F401  (attribution.echo.*)
import mas.scripted.attribution.scorers  # noqa: F401  (attribution.llm_naive.*, attribution.llm_roles.*)
import mas.scripted.attribution.whowhen  # noqa: F401  (attribution.all_at_once/step_by_step/binary_search.*)
import mas.scripted.browsecomp  # noqa: F401  (benchmark.grade; the browsecomp player)
import mas.scripted.judge  # noqa: F401  (judge.consensus, judge.vote)
import mas.scripted.orchestrator  # noqa: F401  (orchestrator.plan, orchestrator.critique)
import mas.scripted.personas  # noqa: F401  (personas.generate)
import mas.scripted.scicode  # noqa: F401  (the scicode player)
import mas.scripted.supervisor  # noqa: F401  (supervisor.route)
import mas.scripted.workbench  # noqa: F401  (the workbench player, also that of any benchmark solved by acting)
