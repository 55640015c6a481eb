"""Registers the double's own responders (imported once, when a scripted route is built): the agents' turns
and BrowseComp's grading. The orchestrator's plan and critique are registered beside their prompts
(:mod:`mas.topologies.decomposition`)."""

import mas.scripted.agents  # noqa: F401  (each registers)
import mas.scripted.browsecomp  # noqa: F401
