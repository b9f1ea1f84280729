"""Graph nodes: each reads the state and returns a partial update; none of them routes."""

from graph.nodes.agent import make_agent
from graph.nodes.check_action_claims import make_claim_guard
from graph.nodes.check_draft import make_check_draft
from graph.nodes.check_grounding import make_grounding_guard
from graph.nodes.force_answer import make_force_answer
from graph.nodes.tools import make_tools
from graph.nodes.verify_traces import make_trace_guard

__all__ = [
    "make_agent",
    "make_check_draft",
    "make_claim_guard",
    "make_force_answer",
    "make_grounding_guard",
    "make_tools",
    "make_trace_guard",
]
