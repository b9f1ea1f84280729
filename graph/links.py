"""Where a person can see what a tool saw: Grafana Explore links and kubectl commands.

Each grounded fact cites the tool call that showed it (graph/grounding/evidence.py,
`citation`); these build the link or command of that call. A link shows the same query over
the same window, so what the answer cites is what the engineer opens. Kubernetes has no
browser view of its own: its citation is the read-only kubectl command that shows the same.
"""

from __future__ import annotations

import json
import shlex
from typing import Any
from urllib.parse import quote

DEFAULT_RANGE = {"from": "now-6h", "to": "now"}


def explore(
    grafana_url: str, kind: str, uid: str, query: dict[str, Any], window: dict[str, str]
) -> str:
    """A Grafana Explore URL with one pane: `query` on the data source `uid` (of `kind`)."""
    pane = {
        "a": {
            "datasource": uid,
            "queries": [{"refId": "A", "datasource": {"type": kind, "uid": uid}, **query}],
            "range": window,
        }
    }
    return f"{grafana_url.rstrip('/')}/explore?schemaVersion=1&panes=" + quote(
        json.dumps(pane, separators=(",", ":")), safe=""
    )


def _window(start: float | None, end: float | None) -> dict[str, str]:
    if start is None or end is None:
        return DEFAULT_RANGE
    return {"from": str(int(start * 1000)), "to": str(int(end * 1000))}


def tempo_link(
    grafana_url: str,
    uid: str,
    traceql: str,
    start: float | None = None,
    end: float | None = None,
) -> str:
    """A trace by its ID, or a TraceQL search, in Explore."""
    query = {"queryType": "traceql", "query": traceql}
    return explore(grafana_url, "tempo", uid, query, _window(start, end))


def loki_link(grafana_url: str, uid: str, logql: str, start: float, end: float) -> str:
    query = {"expr": logql, "queryType": "range"}
    return explore(grafana_url, "loki", uid, query, _window(start, end))


def prometheus_link(grafana_url: str, uid: str, promql: str, start: float, end: float) -> str:
    query = {"expr": promql, "range": True, "instant": False}
    return explore(grafana_url, "prometheus", uid, query, _window(start, end))


def kubectl(*args: str) -> str:
    """A read-only kubectl command line, each argument quoted for a shell."""
    return " ".join(["kubectl", *(shlex.quote(a) for a in args)])
