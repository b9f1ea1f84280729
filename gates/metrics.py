"""What the action floor decides, for Prometheus (exposed on /metrics by `bot.process.health`)."""

from prometheus_client import Counter


def counter(name: str, documentation: str, *labels: str) -> Counter:
    """`tracegate_<name>_total` in prometheus_client's default registry, which /metrics
    serves. On the lowest floor, so that every floor can declare its counters this way."""
    return Counter(f"tracegate_{name}_total", documentation, labels)


GATE_DECISIONS = counter(
    "gate_decisions", "Rule gate and judge decisions (allowed | refused)", "gate", "decision"
)
ACTION_REQUESTS = counter(
    "action_requests",
    "Action requests entering each state (created, then every transition)",
    "state",
)
