"""A real Alertmanager (Debian's `prometheus-alertmanager` 0.25, fetched by
`scripts/fetch-alertmanager`) on loopback, for tests of what it sends to a webhook.

Not a simulator: the real binary groups, waits, retries and resolves; a test posts alerts to
its API (`POST /api/v2/alerts`, as Prometheus does) and watches what reaches the webhook.
Nothing here imports tracegate.

The configuration it writes (`config_yaml()`; the values are the constructor's arguments,
these are its defaults):

```yaml
route:
  receiver: tracegate
  group_by: ["alertname"]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 1h
receivers:
  - name: tracegate
    webhook_configs:
      - url: "http://127.0.0.1:8080/alerts/alertmanager"
        send_resolved: true
        max_alerts: 0
        http_config:
          authorization:
            type: Bearer
            credentials: "<ALERT_WEBHOOK_TOKEN>"
```

One route, one receiver: every alert goes to the webhook, grouped by the `group_by` labels
(`["..."]` groups by all labels); `max_alerts: 0` sends every alert of a group (more would set
`truncatedAlerts`); `send_resolved: true` sends a group's resolution too. `token=None` leaves
`http_config` out (no Authorization header). Production values are larger (Alertmanager's
defaults: group_wait 30s, group_interval 5m, repeat_interval 4h).

It is started as

    prometheus-alertmanager --config.file=<tmp>/alertmanager.yml --storage.path=<tmp>/data
        --web.listen-address=127.0.0.1:<free port> --web.external-url=http://127.0.0.1:<port>
        --cluster.listen-address=

(started again on another port when another process took that one first; the empty cluster
address turns gossip off, which would otherwise bind 9094 on every interface and wait for
peers; the external URL is what notifications carry as `externalURL`), from the
directory that holds the package's templates (see scripts/fetch-alertmanager: Debian's build
reads them from a compiled-in path). Ready when `GET /-/ready` answers 200; stopped with
SIGTERM, then SIGKILL after a bound; its temporary directory is removed.

What 0.25 does with it (tests/test_alertmanager_harness.py shows each but the last but one):
- A group's first notification leaves `group_wait` after its first alert, with every alert
  that arrived by then (40 alerts posted at once in 4 groups: 4 notifications of 10); an alert
  joining the group later is sent, with the whole group, at the next `group_interval` tick;
  an unchanged group is not sent again before `repeat_interval`. Every notification of a
  group has the same `groupKey` (`{}:{alertname="CheckoutErrors"}`).
- A 5xx answer is retried within the same flush with backoff (seen: again after 0.3-0.7 s,
  then about 1, 1, 2.5, 3 s apart) until the flush's deadline, max(group_interval, 10 s),
  then again at the next tick: nothing is lost while the receiver answers 5xx.
- A 4xx answer (a wrong token's 401) is "unrecoverable": no retry within the flush, but the
  notification counts as unsent, so each `group_interval` tick sends it again.
- A receiver that does not answer is abandoned at the flush's deadline (seen: after 10 s with
  these timings, 20 s with group_interval 20s) and the notification is sent again at once:
  the webhook must answer well within it.
- Resolving every alert of a group sends `status: resolved` at the next tick.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp

from sandbox.daemon import LoopbackDaemon

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "alertmanager"
# Debian's binary with its asset path made relative (scripts/fetch-alertmanager), run from
# the package's asset directory.
RELOCATED = CACHE / "tracegate-alertmanager"
DEBIAN_ASSETS = CACHE / "usr" / "share" / "prometheus" / "alertmanager"
ENV_VAR = "TRACEGATE_ALERTMANAGER"
RECEIVER = "tracegate"


class AlertmanagerMissing(RuntimeError):
    """No Alertmanager binary to run."""


def alertmanager_binary() -> Path:
    """The Alertmanager to run: `$TRACEGATE_ALERTMANAGER` when set (e.g. an upstream
    release binary, whose templates are built in), else the one scripts/fetch-alertmanager
    put in .cache/alertmanager."""
    named = os.environ.get(ENV_VAR)
    if named:
        path = Path(named)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise AlertmanagerMissing(f"{ENV_VAR}={named} is not an executable file")
        return path
    if not (RELOCATED.is_file() and os.access(RELOCATED, os.X_OK)):
        raise AlertmanagerMissing(
            f"no Alertmanager at {RELOCATED}: run scripts/fetch-alertmanager (make test runs "
            f"it), or set {ENV_VAR} to an alertmanager binary"
        )
    return RELOCATED


def _workdir(binary: Path) -> Path | None:
    """Where the binary must run from: the relocated Debian build reads its templates from
    its working directory."""
    return DEBIAN_ASSETS if binary.resolve() == RELOCATED.resolve() else None


def duration(value: float | str) -> str:
    """Seconds (or a duration string, as it is) as Alertmanager writes durations:
    0.5 -> "500ms", 2 -> "2s", 300 -> "5m", 3600 -> "1h"."""
    if isinstance(value, str):
        return value
    if value <= 0:
        raise ValueError(f"a duration must be positive, not {value}")
    ms = round(value * 1000)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _q(text: str) -> str:
    """A YAML double-quoted scalar (a JSON string is one)."""
    return json.dumps(text)


def config_yaml(
    webhook_url: str,
    token: str | None,
    *,
    group_by: Sequence[str] = ("alertname",),
    group_wait: float | str = 1,
    group_interval: float | str = 2,
    repeat_interval: float | str = 3600,
) -> str:
    """The Alertmanager configuration: one route to one webhook receiver (module docstring)."""
    lines = [
        "route:",
        f"  receiver: {RECEIVER}",
        f"  group_by: [{', '.join(_q(label) for label in group_by)}]",
        f"  group_wait: {duration(group_wait)}",
        f"  group_interval: {duration(group_interval)}",
        f"  repeat_interval: {duration(repeat_interval)}",
        "receivers:",
        f"  - name: {RECEIVER}",
        "    webhook_configs:",
        f"      - url: {_q(webhook_url)}",
        "        send_resolved: true",
        "        max_alerts: 0",
    ]
    if token is not None:
        lines += [
            "        http_config:",
            "          authorization:",
            "            type: Bearer",
            f"            credentials: {_q(token)}",
        ]
    return "\n".join(lines) + "\n"


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def alert(
    alertname: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    generator_url: str = "http://127.0.0.1:9090/graph",
) -> dict[str, Any]:
    """An alert as `POST /api/v2/alerts` takes it (what Prometheus sends): `alertname` and the
    other labels, annotations, `startsAt` (now when not given), `endsAt` only when given (an
    alert with an `endsAt` in the past is resolved; without one Alertmanager resolves it after
    its resolve_timeout, 5m, unless it is posted again), `generatorURL`."""
    body: dict[str, Any] = {
        "labels": {"alertname": alertname, **(labels or {})},
        "annotations": dict(annotations or {}),
        "startsAt": rfc3339(starts_at or datetime.now(UTC)),
        "generatorURL": generator_url,
    }
    if ends_at is not None:
        body["endsAt"] = rfc3339(ends_at)
    return body


def resolved(alerts: Iterable[Mapping[str, Any]], ago_s: float = 1.0) -> list[dict[str, Any]]:
    """The same alerts (same labels and startsAt) with an `endsAt` `ago_s` in the past."""
    ends = rfc3339(datetime.now(UTC) - timedelta(seconds=ago_s))
    return [{**a, "endsAt": ends} for a in alerts]


class Alertmanager(LoopbackDaemon):
    """`async with Alertmanager(webhook_url, token) as am:` a real Alertmanager whose one
    route sends every alert to `webhook_url` with `Authorization: Bearer <token>`."""

    name = "Alertmanager"
    log_name = "alertmanager.log"  # logfmt; a failed delivery: "unexpected status code 500"

    def __init__(
        self,
        webhook_url: str,
        token: str | None,
        *,
        group_by: Sequence[str] = ("alertname",),
        group_wait: float | str = 1,
        group_interval: float | str = 2,
        repeat_interval: float | str = 3600,
        ready_timeout_s: float = 20.0,
        stop_timeout_s: float = 5.0,
        external_url: str | None = None,
        binary: Path | None = None,
    ) -> None:
        super().__init__(ready_timeout_s, stop_timeout_s)
        self.webhook_url = webhook_url
        self.token = token
        self.config = config_yaml(
            webhook_url,
            token,
            group_by=group_by,
            group_wait=group_wait,
            group_interval=group_interval,
            repeat_interval=repeat_interval,
        )
        self.external_url = external_url
        self.binary = binary

    def prepare(self) -> Path:
        assert self.dir is not None
        config = self.dir / "alertmanager.yml"
        config.write_text(self.config)
        return config

    def spawn(self, config: Path) -> subprocess.Popen[bytes]:
        assert self.dir is not None
        binary = self.binary or alertmanager_binary()
        command = [
            str(binary),
            f"--config.file={config}",
            f"--storage.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            f"--web.external-url={self.external_url or self.url}",
            "--cluster.listen-address=",
        ]
        workdir = _workdir(binary)
        if workdir is not None:
            # Debian's build has no UI; its placeholder page.
            command.append(f"--web.ui-path={workdir / 'no-ui'}/")
        return self.run(command, workdir or self.dir)

    async def post_alerts(self, alerts: Sequence[Mapping[str, Any]]) -> None:
        """`POST /api/v2/alerts`; raises on any answer but 200 (400 names a bad alert)."""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.post(f"{self.url}/api/v2/alerts", json=list(alerts)) as response,
        ):
            if response.status != 200:
                raise RuntimeError(
                    f"POST /api/v2/alerts: HTTP {response.status}: {await response.text()}"
                )

    async def resolve(self, alerts: Iterable[Mapping[str, Any]], ago_s: float = 1.0) -> None:
        """Post the alerts again with an `endsAt` `ago_s` in the past: resolved."""
        await self.post_alerts(resolved(alerts, ago_s))

    async def alerts(self, *, include_resolved: bool = False) -> list[Any]:
        """`GET /api/v2/alerts`: the alerts it holds, the active ones (and the resolved)."""
        params = {"resolved": str(include_resolved).lower()}
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.get(f"{self.url}/api/v2/alerts", params=params) as response,
        ):
            response.raise_for_status()
            held: list[Any] = await response.json()
            return held
