"""The systems' graphs, the termination controller, the judges and the prompts."""

from descriptor.exports import lazy_exports

_EXPORTS = {
    "AgentSpec": "mas.topologies.agent",
    "LoopPosition": "mas.topologies.termination",
    "RunContext": "mas.topologies.agent",
    "STOP_REASONS": "mas.topologies.termination",
    "consensus_judge": "mas.topologies.judge",
    "decide": "mas.topologies.termination",
    "final_vote": "mas.topologies.judge",
    "vote_artifacts": "mas.topologies.judge",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
