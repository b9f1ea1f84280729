"""Logging: LOG_LEVEL and LOG_FORMAT (text or one JSON object a line), the turn's context on
every line, and known noise from libraries dropped."""

from __future__ import annotations

import logging
import os
import sys
from typing import Literal

from pythonjsonlogger.json import JsonFormatter
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

from bot.process.settings import Settings
from bot.turn.timing import SlotGivenBack
from graph.log_context import LOG_CONTEXT

log = logging.getLogger("tracegate")

CONTEXT_FIELDS = ("team", "channel", "thread", "turn", "correlation_id")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(context)s"
JSON_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# Bolt warns at every start because SLACK_BOT_TOKEN is set and a client is handed in; the
# client carries that very token.
NOISE = frozenset({warning_client_prioritized_and_token_skipped()})


class LogContextFilter(logging.Filter):
    """Adds the bound context (team, channel, thread, turn, correlation id) to a record, and
    drops the known noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() in NOISE:
            return False
        if record.exc_info and isinstance(record.exc_info[1], SlotGivenBack):
            return False  # saq's "Error processing job": a wait, which bot.turn.worker logs
        context = LOG_CONTEXT.get()
        for name in CONTEXT_FIELDS:
            if name in context:
                setattr(record, name, context[name])
        # Text lines carry it as a suffix: " [team=T1 channel=C1 …]".
        bound = " ".join(f"{k}={context[k]}" for k in CONTEXT_FIELDS if k in context)
        record.context = f" [{bound}]" if bound else ""
        return True


def configure_logging(level: str, fmt: Literal["text", "json"]) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(LogContextFilter())
    if fmt == "json":
        handler.setFormatter(
            JsonFormatter(
                JSON_FORMAT,
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                reserved_attrs=[*JsonFormatter().reserved_attrs, "context"],
            )
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Request lines would repeat every URL (and any credentials a URL carries); saq logs
    # every job's start and end, and its worker's repr; redisvl says "Index already exists"
    # once per index at every start, and the checkpointer what kind of Redis client it has.
    for name in ("httpx", "saq", "redisvl", "langgraph.checkpoint.redis"):
        logging.getLogger(name).setLevel(logging.WARNING)


def log_startup(settings: Settings, what: str) -> None:
    """The one start-up line: what runs, and the settings an operator most often gets wrong.
    A warning when actions could be proposed but nobody may approve them."""
    users = settings.actions.approvers
    approvers = [f"{len(users)} users"] if users else []
    if settings.kubernetes.action_approver_group:
        approvers.append(f"group {settings.kubernetes.action_approver_group}")
    nobody = "NONE (set ACTION_APPROVERS or ACTION_APPROVER_GROUP)"
    if settings.kubernetes.kubeconfig:
        kubernetes = (
            f"Kubernetes via KUBECONFIG {settings.kubernetes.kubeconfig.split(os.pathsep)[0]}"
        )
    elif settings.kubernetes_configured:
        kubernetes = "Kubernetes in-cluster (service account)"
    else:
        kubernetes = "Kubernetes not configured (no rollout history, no actions)"
    actions = (
        "actions ENABLED" if settings.actions.actions_enabled else "actions off (ACTIONS_ENABLED)"
    )
    line = (
        f"tracegate {what}; evidence: {', '.join(settings.evidence_sources())}; {kubernetes}; "
        f"{actions}; approvers: "
        + (", ".join(approvers) if approvers else nobody)
        + f"; default rubric {'on' if settings.rubric.checklist else 'off'}; models: agent "
        f"{settings.model.model}, grader {settings.grader_spec().model}, judge "
        f"{settings.judge_spec().model}"
    )
    warn = not approvers and settings.kubernetes_configured
    log.log(logging.WARNING if warn else logging.INFO, line)
