"""The worker's terms, apart from the worker (and saq): how fast a dead worker's turns are
taken up and how a worker stops (read by the settings), and the wait for model capacity
(known to the logs). Light to import: a process that only reads its settings needs no queue."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

ABORT_WAIT_S = 5  # saq's sweep waits this long for a stuck job's abort before retrying it


class SlotGivenBack(Exception):
    """The job gives its worker slot back: saq runs it again after the job's retry delay
    (not a failure: logged by the worker, not by saq)."""


class WaitingForModel(SlotGivenBack):
    """The turn waits for model capacity: saq runs its job again at the next try (the job's
    retry delay), and the worker slot is free meanwhile."""


class WorkerTiming(BaseModel):
    """How fast a dead worker's turns are taken up, and how a worker stops. Lease,
    heartbeat and sweep derive from RECOVERY: heartbeat + two sweeps + saq's abort wait
    stay within it."""

    model_config = ConfigDict(frozen=True, validate_by_name=True)

    shutdown_grace_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        validation_alias="SHUTDOWN_GRACE",
        description=(
            "Seconds a stopping process (SIGTERM) lets its running turns finish before handing "
            "them back to the queue; keep it inside Kubernetes' `terminationGracePeriodSeconds` "
            "(the shipped manifests: 45)."
        ),
    )
    recovery_budget_s: float = Field(
        default=30.0,
        ge=10,
        le=600,
        validation_alias="RECOVERY",
        description=(
            "Seconds within which a dead worker's turns are taken up by another: the thread lease "
            "is `RECOVERY/3`, the sweep `RECOVERY/10`, the job heartbeat what is left after two "
            "sweeps and saq's 5 s abort wait."
        ),
    )
    # Jobs waiting for their thread hold at most all slots but one (no CPU), so a head turn's
    # job always finds one.
    concurrency: int = Field(
        default=32,
        ge=1,
        le=1000,
        validation_alias="WORKER_CONCURRENCY",
        description=(
            "Turns a worker (or an inline `serve`) holds at once. Turns waiting behind their "
            "thread's earlier turn hold at most all slots but one (no CPU); one beyond that "
            "gives its slot back and is tried again about once a second."
        ),
    )

    @property
    def lease_s(self) -> float:
        """A dead holder's thread is free again after this."""
        return self.recovery_budget_s / 3

    @property
    def sweep_s(self) -> int:
        """How often a worker's sweep looks for jobs whose heartbeat stopped …"""
        return max(1, int(self.recovery_budget_s / 10))

    @property
    def heartbeat_s(self) -> int:
        """… and retries one not touched for this long."""
        return max(3, int(self.recovery_budget_s - 2 * self.sweep_s - ABORT_WAIT_S))

    @property
    def recovery_s(self) -> float:
        """The longest a dead worker's turn waits before another worker resumes it."""
        return self.heartbeat_s + 2 * self.sweep_s + ABORT_WAIT_S
