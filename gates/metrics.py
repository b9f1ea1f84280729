"""What the action floor decides, for Prometheus (exposed on /metrics by `bot.health`)."""

from prometheus_client import Counter

GATE_DECISIONS = Counter(
    "tracegate_gate_decisions_total", "Rule gate decisions", ["gate", "decision"]
)  # decision: allowed | refused
ACTION_REQUESTS = Counter(
    "tracegate_action_requests_total",
    "Action requests entering each state (created, then every transition)",
    ["state"],
)
