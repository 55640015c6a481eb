"""The topology kit: everything a topology imports, from one place.

A topology is one module: a graph builder ``build(rt) -> StateGraph`` (node functions and ``add_node``), its
roles, its agent graph (who sends what to whom, also the agent picture) and ``register_system(Topology(...))``.
It reads the run from a :class:`RunContext`, keeps its state in a :class:`LoopState` (or :class:`RunState`)
subclass, makes its agents with :func:`make_agents`, lets them speak with :func:`take_turn` (or
:func:`agent_turn` for a turn of its own making), asks the termination controller with :func:`round_decision`
and closes with :func:`finish_loop`, which writes the closing records (the ``finalize`` event to the user, the
stage record). Who a turn or a decision goes to is read from the agent graph (:meth:`AgentGraph.sends`); the
checkpoint each event names is the running node's, which these functions read themselves
(:func:`state_id_of`), so a node passes none. The project's topologies (``mas/topologies/*.py``) and the example
plugin's ``round_robin`` (``examples/plugin``) are built this way.

>>> from mas.topologies import kit
>>> kit.CONTROLLER, kit.ANSWER_RECIPIENT
('system:controller', 'user')
"""

from mas.config import MasSettings
from mas.topologies.agent import (
    AgentSpec,
    Answer,
    RunContext,
    TurnResult,
    agent_step,
    agent_turn,
    opening_messages,
    run_tool_calls,
)
from mas.topologies.declaration import (
    TOOLS_NODE,
    AgentGraph,
    Message,
    Participant,
    Role,
    Topology,
    register_system,
    tool_edges,
)
from mas.topologies.environment import MAIN, changes_text, log_update
from mas.topologies.judge import ANSWER_RECIPIENT, JUDGE_ACTOR, consensus_judge, final_vote
from mas.topologies.loop import StageRecord, finish_loop, round_decision, take_turn
from mas.topologies.node import state_id_of
from mas.topologies.roles import (
    Published,
    artifact_of,
    candidate,
    context_block,
    event_for,
    latest,
    make_agents,
    packet,
    publish_vote,
    round_artifacts,
    sync_step_counter,
    vote_among,
)
from mas.topologies.state import LoopState, RunState
from mas.topologies.termination import (
    CONTROLLER,
    LoopPosition,
    decide,
    emit_decision,
    lexical_groups,
    normalize_artifact,
)
from mas.tracing import current_tracer

__all__ = [
    "ANSWER_RECIPIENT", "CONTROLLER", "JUDGE_ACTOR", "MAIN", "TOOLS_NODE",
    "AgentGraph", "AgentSpec", "Answer", "LoopPosition", "LoopState", "MasSettings", "Message", "Participant", "Published", "Role",
    "RunContext", "RunState", "StageRecord", "Topology", "TurnResult",
    "agent_step", "agent_turn", "artifact_of", "candidate", "changes_text", "consensus_judge", "context_block",
    "current_tracer", "decide", "emit_decision", "event_for", "final_vote", "finish_loop", "latest", "lexical_groups",
    "log_update", "make_agents", "normalize_artifact", "opening_messages", "packet", "publish_vote", "register_system", "round_artifacts",
    "round_decision", "run_tool_calls", "state_id_of", "sync_step_counter", "take_turn", "tool_edges",
    "vote_among",
]
