"""Alert notifications as Alertmanager (webhook payload version 4) and Grafana Alerting (its
webhook contact point) send them, read into one `Notification`.

Both payloads share Alertmanager's shape: `groupKey`, `status`, `groupLabels`,
`commonLabels`, `commonAnnotations`, `externalURL` and `alerts[]` with `status`, `labels`,
`annotations`, `startsAt`, `endsAt` (`0001-01-01T00:00:00Z` while firing), `generatorURL`
and `fingerprint`. Grafana adds `title`, `message` and per alert `dashboardURL`/`panelURL`.
A body that is not that shape is refused with the field named (`PayloadError`): the sender
gets a 400 it can log, not a 500 it would retry forever.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic.functional_validators import BeforeValidator

from gates.config import Names

MAX_ALERTS = 1000  # alerts read of one notification (Alertmanager's max_alerts is often 0)
MAX_BODY_BYTES = 1_000_000
MAX_LABEL_CHARS = 500
_NEVER = datetime(1, 1, 1, tzinfo=UTC)  # Alertmanager's endsAt while an alert fires

Source = Literal["alertmanager", "grafana"]


def _strings(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k)[:MAX_LABEL_CHARS]: str(v)[:MAX_LABEL_CHARS] for k, v in value.items()}
    return value


Labels = Annotated[dict[str, str], BeforeValidator(_strings)]  # labels, annotations: bounded


class PayloadError(ValueError):
    """The body is not a notification; the message names the field."""


class Alert(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    status: Literal["firing", "resolved"]
    labels: Labels
    annotations: Labels = Field(default_factory=dict)
    starts_at: datetime = Field(alias="startsAt")
    ends_at: datetime | None = Field(default=None, alias="endsAt")
    generator_url: str = Field(default="", alias="generatorURL")
    fingerprint: str = ""
    dashboard_url: str = Field(default="", alias="dashboardURL")  # Grafana

    @field_validator("starts_at", "ends_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @property
    def resolved_at(self) -> datetime | None:
        if self.status != "resolved" or self.ends_at is None or self.ends_at <= _NEVER:
            return None
        return self.ends_at


class Notification(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    source: Source = "alertmanager"
    group_key: str = Field(alias="groupKey", min_length=1, max_length=2000)
    status: Literal["firing", "resolved"]
    receiver: str = ""
    group_labels: Labels = Field(default_factory=dict, alias="groupLabels")
    common_labels: Labels = Field(default_factory=dict, alias="commonLabels")
    common_annotations: Labels = Field(default_factory=dict, alias="commonAnnotations")
    external_url: str = Field(default="", alias="externalURL")
    title: str = ""  # Grafana
    alerts: list[Alert] = Field(max_length=MAX_ALERTS)

    @property
    def firing(self) -> list[Alert]:
        return [a for a in self.alerts if a.status == "firing"]

    @property
    def resolved(self) -> bool:
        """Every alert of the group has ended."""
        return self.status == "resolved" and not self.firing


class AlertPolicy(BaseModel):
    """Which alerts start investigations, and how many (the ALERT_* and AUTO_* settings)."""

    model_config = ConfigDict(frozen=True, validate_by_name=True)

    webhook_token: SecretStr | None = Field(
        default=None,
        description=(
            "Turns on `POST /alerts/alertmanager` and `POST /alerts/grafana` on `serve`, "
            "authenticated with `Authorization: Bearer <token>`; unset, the routes do not exist."
        ),
    )
    channel: str | None = Field(
        default=None,
        description=(
            "The channel id (`C…`) where each alert group of the webhooks is posted and "
            "investigated; a receiver may name another with `?channel=<id>`."
        ),
    )
    channels: Names = Field(
        default=frozenset(),
        validation_alias="AUTO_INVESTIGATE_CHANNELS",
        description=(
            "Comma-separated channel ids where an alert another app posts (Alertmanager's, "
            "Grafana's or PagerDuty's Slack integration) starts an investigation in its thread."
        ),
    )
    severities: Names = Field(
        default=frozenset({"critical"}),
        validation_alias="AUTO_INVESTIGATE_SEVERITIES",
        description=(
            "Comma-separated `severity` label values that start an investigation; an alert "
            "without a severity label is investigated."
        ),
    )
    per_hour: int = Field(
        default=20,
        ge=0,
        validation_alias="AUTO_INVESTIGATIONS_PER_HOUR",
        description=(
            "Automatic investigations per channel per hour; past it the alert's thread says so "
            "and no model call is made."
        ),
    )

    @field_validator("severities")
    @classmethod
    def _lower_case(cls, value: frozenset[str]) -> frozenset[str]:
        return frozenset(severity.lower() for severity in value)

    @field_validator("channel")
    @classmethod
    def _set_or_none(cls, value: str | None) -> str | None:
        return value or None

    def wants(self, labels: dict[str, str]) -> bool:
        severity = labels.get("severity", "").strip().lower()
        return not severity or severity in self.severities


def parse(body: bytes, source: Source) -> Notification:
    """The notification in a webhook's body; PayloadError names what is wrong."""
    if len(body) > MAX_BODY_BYTES:
        raise PayloadError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError(f"the body is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise PayloadError("the body is not a JSON object")
    if source == "alertmanager" and str(data.get("version", "")) != "4":
        raise PayloadError(
            f"version: {data.get('version')!r} is not Alertmanager's webhook payload version 4"
        )
    try:
        return Notification.model_validate({**data, "source": source})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(the body)"
        raise PayloadError(f"{where}: {first['msg']}") from None
