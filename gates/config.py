"""Typed policy for the action floor, built by `bot/` from the environment.

Each default and bound is written here once; `bot/process/settings.py` takes its defaults from
these fields and reports a value out of bounds under the environment variable's name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_PROTECTED_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})


class ActionPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    actions_enabled: bool = False  # ACTIONS_ENABLED: off = Approve runs a server-side dry run
    allowed_namespaces: frozenset[str] = frozenset()  # ALLOWED_NAMESPACES: empty = all unprotected
    protected_namespaces: frozenset[str] = DEFAULT_PROTECTED_NAMESPACES  # PROTECTED_NAMESPACES
    protected_deployments: frozenset[str] = frozenset()  # PROTECTED_DEPLOYMENTS: "ns/name"
    max_scale_factor: float = Field(default=10.0, gt=1)  # MAX_SCALE_FACTOR
    max_replicas: int = Field(default=50, ge=1)  # MAX_REPLICAS
    breaker_failure_threshold: int = Field(default=3, ge=1)  # BREAKER_FAILURE_THRESHOLD
    breaker_window_minutes: int = Field(default=30, ge=1)  # BREAKER_WINDOW_MINUTES
    breaker_max_per_target: int = Field(default=3, ge=1)  # BREAKER_MAX_ACTIONS_PER_TARGET
    breaker_max_global: int = Field(default=10, ge=1)  # BREAKER_MAX_ACTIONS_GLOBAL
    approval_ttl_s: int = Field(default=900, ge=30)  # APPROVAL_TTL
    approvers: frozenset[str] = frozenset()  # ACTION_APPROVERS: Slack user IDs
    allow_self_approval: bool = False  # ALLOW_SELF_APPROVAL
    judge_fail_mode: Literal["closed", "open"] = "closed"  # JUDGE_FAIL_MODE
    rollout_watch_s: float = Field(default=300, gt=0)  # ROLLOUT_WATCH_TIMEOUT
    rollout_poll_s: float = Field(default=2.0, gt=0)  # between rollout status reads

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
