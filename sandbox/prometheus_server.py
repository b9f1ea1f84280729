"""A real Prometheus (Debian's `prometheus` 2.42, fetched by `scripts/fetch-alertmanager`)
that scrapes a target the test serves and sends its alerting rules' alerts to an Alertmanager
(sandbox/alertmanager.py): the whole path an alert takes to tracegate's webhook, with no
alert posted by hand. Nothing here imports tracegate. (sandbox/prometheus.py is a simulator
of Prometheus' query API; this is the real server.)

The configuration it writes (intervals are the constructor's, 1s by default):

```yaml
global:
  scrape_interval: 1s
  evaluation_interval: 1s
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:<alertmanager port>"]
rule_files: ["<tmp>/rules.yml"]
scrape_configs:
  - job_name: "app"
    static_configs:
      - targets: ["127.0.0.1:<target port>"]
```

and `rules.yml`, one group with one alerting rule per `AlertRule` (`alert`, `expr`, `for`,
`labels`, `annotations`). Started as `prometheus --config.file=... --storage.tsdb.path=<tmp>
--web.listen-address=127.0.0.1:<free port> --web.external-url=http://127.0.0.1:<port>
--rules.alert.resend-delay=<resend_delay>`; ready when `GET /-/ready` answers 200; stopped
with SIGTERM, then SIGKILL after a bound; its temporary directory is removed.

What Prometheus sends: each alert's labels are the rule's `alert` (as `alertname`), the
series' labels (with `job` and `instance` of the target) and the rule's `labels`; its
`generatorURL` is Prometheus' graph page for the expression; a firing alert is sent again
every `resend_delay` with `endsAt` a few evaluation intervals ahead, and once the expression
no longer holds it is sent with `endsAt` now (resolved).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from sandbox.alertmanager import duration
from sandbox.daemon import LoopbackDaemon
from sandbox.server import SimulatorServer

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "prometheus"
DEBIAN_BINARY = CACHE / "usr" / "bin" / "prometheus"
ENV_VAR = "TRACEGATE_PROMETHEUS"


class PrometheusMissing(RuntimeError):
    """No Prometheus binary to run."""


def prometheus_binary() -> Path:
    """`$TRACEGATE_PROMETHEUS` when set, else the one scripts/fetch-alertmanager put in
    .cache/prometheus."""
    named = os.environ.get(ENV_VAR)
    path = Path(named) if named else DEBIAN_BINARY
    if not (path.is_file() and os.access(path, os.X_OK)):
        where = f"{ENV_VAR}={named}" if named else str(path)
        raise PrometheusMissing(
            f"no Prometheus at {where}: run scripts/fetch-alertmanager (make test runs it), "
            f"or set {ENV_VAR} to a prometheus binary"
        )
    return path


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule: fires `alert` while `expr` holds for `for_s` seconds."""

    alert: str
    expr: str
    for_s: float = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


def _q(text: str) -> str:
    return json.dumps(text)


def _mapping(values: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{_q(k)}: {_q(v)}" for k, v in values.items()) + "}"


def rules_yaml(rules: Sequence[AlertRule], group: str = "tracegate-tests") -> str:
    lines = ["groups:", f"  - name: {_q(group)}", "    rules:"]
    for rule in rules:
        lines += [
            f"      - alert: {_q(rule.alert)}",
            f"        expr: {_q(rule.expr)}",
            f"        for: {duration(rule.for_s) if rule.for_s else '0s'}",
            f"        labels: {_mapping(rule.labels)}",
            f"        annotations: {_mapping(rule.annotations)}",
        ]
    return "\n".join(lines) + "\n"


def _host_port(url_or_address: str) -> str:
    """ "http://127.0.0.1:9093" or "127.0.0.1:9093" -> "127.0.0.1:9093"."""
    if "//" in url_or_address:
        return urlsplit(url_or_address).netloc
    return url_or_address


def config_yaml(
    alertmanager: str,
    targets: Sequence[str],
    rule_file: Path,
    *,
    job: str = "app",
    scrape_interval: float | str = 1,
    evaluation_interval: float | str = 1,
) -> str:
    """Prometheus' configuration: scrape `targets` as `job`, evaluate `rule_file`, send the
    alerts to `alertmanager` (its URL or host:port)."""
    target_list = ", ".join(_q(_host_port(t)) for t in targets)
    return (
        "\n".join(
            [
                "global:",
                f"  scrape_interval: {duration(scrape_interval)}",
                f"  evaluation_interval: {duration(evaluation_interval)}",
                "alerting:",
                "  alertmanagers:",
                "    - static_configs:",
                f"        - targets: [{_q(_host_port(alertmanager))}]",
                f"rule_files: [{_q(str(rule_file))}]",
                "scrape_configs:",
                f"  - job_name: {_q(job)}",
                "    static_configs:",
                f"      - targets: [{target_list}]",
            ]
        )
        + "\n"
    )


class MetricsTarget(SimulatorServer):
    """A scrape target: `GET /metrics` in Prometheus' text format, gauges set by the test."""

    def __init__(self) -> None:
        super().__init__()
        self.gauges: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self.scrapes = 0

    def set(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        self.gauges[(name, tuple(sorted((labels or {}).items())))] = value

    @property
    def address(self) -> str:
        """host:port, as a scrape config names it."""
        return _host_port(self.url)

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self._metrics)

    async def _metrics(self, request: web.Request) -> web.Response:
        self.scrapes += 1
        lines = []
        for name in sorted({name for name, _ in self.gauges}):
            lines.append(f"# TYPE {name} gauge")
            for (gauge, labels), value in sorted(self.gauges.items()):
                if gauge == name:
                    inner = ",".join(f"{k}={json.dumps(v)}" for k, v in labels)
                    lines.append(f"{name}{{{inner}}} {value!r}" if inner else f"{name} {value!r}")
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")


class PrometheusServer(LoopbackDaemon):
    """`async with PrometheusServer(alertmanager.url, [target.address], rules) as prom:`."""

    name = "Prometheus"
    log_name = "prometheus.log"

    def __init__(
        self,
        alertmanager: str,
        targets: Sequence[str],
        rules: Sequence[AlertRule],
        *,
        job: str = "app",
        scrape_interval: float | str = 1,
        evaluation_interval: float | str = 1,
        resend_delay: float | str = 1,
        ready_timeout_s: float = 30.0,
        stop_timeout_s: float = 10.0,
        binary: Path | None = None,
    ) -> None:
        super().__init__(ready_timeout_s, stop_timeout_s)
        self.alertmanager = alertmanager
        self.targets = list(targets)
        self.rules = list(rules)
        self.job = job
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        self.resend_delay = resend_delay
        self.binary = binary

    def prepare(self) -> Path:
        assert self.dir is not None
        rule_file = self.dir / "rules.yml"
        rule_file.write_text(rules_yaml(self.rules))
        config = self.dir / "prometheus.yml"
        config.write_text(
            config_yaml(
                self.alertmanager,
                self.targets,
                rule_file,
                job=self.job,
                scrape_interval=self.scrape_interval,
                evaluation_interval=self.evaluation_interval,
            )
        )
        return config

    def spawn(self, config: Path) -> subprocess.Popen[bytes]:
        assert self.dir is not None
        binary = self.binary or prometheus_binary()
        command = [
            str(binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            f"--web.external-url={self.url}",
            f"--rules.alert.resend-delay={duration(self.resend_delay)}",
        ]
        if binary.resolve() == DEBIAN_BINARY.resolve():
            command.append(f"--web.local-assets={CACHE / 'usr/share/prometheus/web'}/")
        return self.run(command, self.dir)

    async def _get(self, path: str, **params: str) -> Any:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.get(f"{self.url}{path}", params=params) as response,
        ):
            response.raise_for_status()
            body = await response.json()
            return body["data"]

    async def alerts(self) -> list[Any]:
        """`GET /api/v1/alerts`: its rules' pending and firing alerts."""
        data = await self._get("/api/v1/alerts")
        alerts: list[Any] = data["alerts"]
        return alerts

    async def query(self, expr: str) -> list[Any]:
        """An instant query's result vector."""
        data = await self._get("/api/v1/query", query=expr)
        result: list[Any] = data["result"]
        return result
