"""Typed policy for the action floor, built by `bot/` from the environment.

Each default, bound and description is written here once: `bot/process/settings.py` reads
`ActionPolicy` from the environment as one of its groups (a field's variable is its
`validation_alias`), and docs/configuration.md is generated from the descriptions.
The small types below (durations, comma-separated names) are shared by every floor's configs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

DEFAULT_PROTECTED_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})
# A config's field that no variable sets (a derived or internal value).
NOT_A_SETTING: dict[str, Any] = {"setting": False}

_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(value: object) -> int | float:
    """Seconds from `900`, `900s`, `15m` or `1h` (bounds are the owner's to check)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return value
    text = str(value).strip().lower()
    unit = _UNITS.get(text[-1:])
    number = text[:-1] if unit else text
    if not number.isdigit():
        raise ValueError(f"{value!r} is not a duration like 900, 900s, 15m or 1h")
    return int(number) * (unit or 1)


def _names(value: object) -> object:
    """`a, b,c` → {a, b, c}: how the environment writes a set of names."""
    if isinstance(value, str):
        return frozenset(item.strip() for item in value.split(",") if item.strip())
    return value


# Seconds, written `900`, `900s`, `15m` or `1h` in the environment.
Duration = Annotated[int, BeforeValidator(parse_duration)]
Seconds = Annotated[float, BeforeValidator(parse_duration)]
# Names, written comma-separated in the environment.
Names = Annotated[frozenset[str], BeforeValidator(_names)]


class SettingsGroup(BaseModel):
    """A group of settings: read once and never changed; a field is set by its name or its
    variable."""

    model_config = ConfigDict(frozen=True, validate_by_name=True)


class ActionPolicy(SettingsGroup):
    actions_enabled: bool = Field(
        default=False,
        description=(
            "Kill switch. Off: proposals are evaluated and shown, and Approve runs a server-side "
            "dry run (`dryRun=All`) only."
        ),
    )
    allowed_namespaces: Names = Field(
        default=frozenset(),
        description=(
            "Comma-separated namespaces actions may touch. Empty: every namespace not protected."
        ),
    )
    protected_namespaces: Names = Field(
        default=DEFAULT_PROTECTED_NAMESPACES,
        description="Comma-separated namespaces never touched.",
    )
    protected_deployments: Names = Field(
        default=frozenset(),
        description="Comma-separated `namespace/name` entries never touched.",
    )
    max_scale_factor: float = Field(
        default=10.0,
        gt=1,
        description="A scale may not exceed this multiple of the current replicas.",
    )
    max_replicas: int = Field(
        default=50,
        ge=1,
        description="Absolute cap for a scale. Scaling to 0 is always refused.",
    )
    breaker_failure_threshold: int = Field(
        default=3,
        ge=1,
        description=(
            "Consecutive failed actions (per Deployment, and cluster-wide) that open the breaker; "
            "it stays open until an approver resets it."
        ),
    )
    breaker_window_minutes: int = Field(
        default=30, ge=1, description="The sliding window for the two caps below."
    )
    breaker_max_per_target: int = Field(
        default=3,
        ge=1,
        validation_alias="BREAKER_MAX_ACTIONS_PER_TARGET",
        description="Executed actions per Deployment per window.",
    )
    breaker_max_global: int = Field(
        default=10,
        ge=1,
        validation_alias="BREAKER_MAX_ACTIONS_GLOBAL",
        description="Executed actions cluster-wide per window.",
    )
    approval_ttl_s: Duration = Field(
        default=900,
        ge=30,
        validation_alias="APPROVAL_TTL",
        description="How long a proposal may wait for approval (`900`, `900s`, `15m`, `1h`).",
    )
    approvers: Names = Field(
        default=frozenset(),
        validation_alias="ACTION_APPROVERS",
        description="Comma-separated Slack user IDs who may approve.",
    )
    allow_self_approval: bool = Field(
        default=False,
        description="Whether the engineer who asked may approve their own request.",
    )
    judge_fail_mode: Literal["closed", "open"] = Field(
        default="closed",
        description=(
            "`closed`: no approval buttons without a judge verdict. `open`: allowed, with a "
            'visible "judge unavailable" warning.'
        ),
    )
    rollout_watch_s: Seconds = Field(
        default=300,
        gt=0,
        validation_alias="ROLLOUT_WATCH_TIMEOUT",
        description=(
            "How long a succeeded action's rollout is followed before the card says it is not "
            "healthy."
        ),
    )
    rollout_poll_s: float = Field(default=2.0, gt=0, json_schema_extra=NOT_A_SETTING)

    def namespace_refusal(self, namespace: str) -> str | None:
        """Why tracegate may not act in (or read pods, events and logs of) `namespace`;
        None when it may."""
        if namespace in self.protected_namespaces:
            return f"namespace {namespace} is protected (PROTECTED_NAMESPACES)"
        if self.allowed_namespaces and namespace not in self.allowed_namespaces:
            return f"namespace {namespace} is not in ALLOWED_NAMESPACES"
        return None

    @field_validator("protected_deployments")
    @classmethod
    def _namespace_slash_name(cls, value: frozenset[str]) -> frozenset[str]:
        for entry in sorted(value):
            if entry.count("/") != 1 or not all(entry.split("/")):
                raise ValueError(f"entry {entry!r} is not namespace/name")
        return value

    @property
    def breaker_window_s(self) -> int:
        return self.breaker_window_minutes * 60
