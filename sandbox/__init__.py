"""Wire-level simulators of the outside world: Slack, Gemini, Tempo, Kubernetes, Prometheus
and Loki.

Each simulator is a real HTTP server on a free loopback port that speaks the external
protocol. Nothing here imports tracegate's own packages, so a test that passes against a
simulator proves the product against the protocol, not against itself.
"""

from sandbox.gemini import GeminiRequest, GeminiSimulator, Reply
from sandbox.tempo import TempoSimulator
from sandbox.traces import SimSpan, SimTrace

__all__ = ["GeminiRequest", "GeminiSimulator", "Reply", "SimSpan", "SimTrace", "TempoSimulator"]
