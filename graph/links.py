"""Where a person can see what a tool saw: Grafana Explore links and kubectl commands.

Each grounded fact cites the tool call that showed it (graph/grounding/evidence.py,
`citation`); these build the link or command of that call. A link shows the same query over
the same window, so what the answer cites is what the engineer opens. Kubernetes has no
browser view of its own: its citation is the read-only kubectl command that shows the same.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

DEFAULT_RANGE = {"from": "now-6h", "to": "now"}


# What a query of each data source type is in an Explore pane.
QUERIES: dict[str, Callable[[str], dict[str, Any]]] = {
    "tempo": lambda traceql: {"queryType": "traceql", "query": traceql},
    "loki": lambda logql: {"expr": logql, "queryType": "range"},
    "prometheus": lambda promql: {"expr": promql, "range": True, "instant": False},
}


def query_link(
    grafana_url: str,
    kind: str,
    uid: str,
    query: str,
    start: float | None = None,
    end: float | None = None,
) -> str:
    """A Grafana Explore URL with one pane: `query` (a trace ID or TraceQL, LogQL, PromQL)
    on the `kind` data source `uid`, over the window (else the last 6 hours)."""
    window = (
        DEFAULT_RANGE
        if start is None or end is None
        else {"from": str(int(start * 1000)), "to": str(int(end * 1000))}
    )
    queries = [{"refId": "A", "datasource": {"type": kind, "uid": uid}, **QUERIES[kind](query)}]
    pane = {"a": {"datasource": uid, "queries": queries, "range": window}}
    return f"{grafana_url.rstrip('/')}/explore?schemaVersion=1&panes=" + quote(
        json.dumps(pane, separators=(",", ":")), safe=""
    )


def kubectl(*args: str) -> str:
    """A read-only kubectl command line, each argument quoted for a shell."""
    return " ".join(["kubectl", *(shlex.quote(a) for a in args)])
