"""Who may ask the bot (and click its buttons), and how often.

By default only full members of the installing workspace (or its Enterprise org) start an
investigation or approve an action: a Slack Connect user (their own workspace is another
company's) and a guest are refused, unless ALLOW_EXTERNAL_USERS / ALLOW_GUEST_USERS lift it.
Who someone is comes from `users.info`, cached; when Slack cannot say, the answer is no
(fail closed). How often a person (and a channel) may start one is counted in Redis, shared
by every process, in clock hours.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

import aiohttp
import redis.asyncio as aioredis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)

STALE_GRACE_S = 60.0  # how long past its TTL an answer of Slack's still decides while it fails
FIRST_BACKOFF_S = 5.0  # a failed lookup is tried again after this, doubling up to
MAX_BACKOFF_S = 300.0
PROFILE_TTL_S = 300.0  # how long users.info's answer about a person is trusted
PROFILES_KEPT = 10_000  # people remembered per process (the oldest lookups go first)
_SLACK_DOWN = (SlackApiError, aiohttp.ClientError, TimeoutError)
T = TypeVar("T")


def retry_after(exc: BaseException) -> float:
    """Slack's Retry-After of a rate-limited answer, in seconds (0 when it gave none)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return float(value) if value else 0.0
    except ValueError:
        return 0.0


@dataclass
class Cached(Generic[T]):
    """One of Slack's answers (users.info about a person, a group's members), asked again
    once `ttl_s` old. It fails closed: while Slack fails, the last answer decides for
    `grace_s` past its TTL, then none does until an ask succeeds. A failed ask is tried
    again after `first_backoff_s` doubling up to MAX_BACKOFF_S, or Slack's Retry-After when
    it is longer — not on every click."""

    ttl_s: float
    grace_s: float = STALE_GRACE_S
    first_backoff_s: float = FIRST_BACKOFF_S
    value: T | None = None
    _fetched_at: float = float("-inf")
    _failures: int = 0
    _retry_at: float = float("-inf")

    async def get(
        self, ask: Callable[[], Awaitable[T]], failed: Callable[[BaseException, float], None]
    ) -> T | None:
        """The answer, asked again when stale (a failure is given to `failed` with the
        seconds until the next try); None when no answer is fresh enough to trust."""
        now = time.monotonic()
        if now - self._fetched_at > self.ttl_s and now >= self._retry_at:
            try:
                self.value = await ask()
            except _SLACK_DOWN as exc:
                self._failures += 1
                doubled = min(MAX_BACKOFF_S, self.first_backoff_s * 2.0 ** (self._failures - 1))
                delay = max(doubled, retry_after(exc))
                self._retry_at = time.monotonic() + delay
                failed(exc, delay)
            else:
                self._fetched_at = time.monotonic()
                self._failures, self._retry_at = 0, float("-inf")
        if time.monotonic() - self._fetched_at > self.ttl_s + self.grace_s:
            return None  # no answer fresh enough to trust: fail closed
        return self.value


@dataclass(frozen=True)
class Asker:
    """A person as Slack's event or click names them."""

    user: str
    team: str  # the workspace the event came from: the installation's
    user_team: str = ""  # the person's own workspace, when Slack says (Slack Connect)
    enterprise: str = ""  # the installation's Enterprise org, if it is in one


@dataclass(frozen=True)
class Profile:
    """What users.info says about a person, as far as access goes."""

    team: str  # their home workspace
    enterprise: str  # their Enterprise org ("" outside Enterprise Grid)
    guest: bool  # is_restricted (multi-channel) or is_ultra_restricted (single-channel)


@dataclass
class People:
    """users.info, cached per person (it is rate-limited, and asked on every turn), failing
    closed as the approver group does (`Cached`)."""

    client: AsyncWebClient
    _looked: dict[str, Cached[Profile]] = field(default_factory=dict)

    async def profile(self, user: str) -> Profile | None:
        """The person as Slack last said, or None when no answer is fresh enough to trust."""
        looked = self._looked.get(user)
        if looked is None:
            looked = self._looked[user] = Cached(PROFILE_TTL_S)
            while len(self._looked) > PROFILES_KEPT:
                del self._looked[next(iter(self._looked))]

        async def look_up() -> Profile:
            person = (await self.client.users_info(user=user)).get("user") or {}
            enterprise_user = person.get("enterprise_user") or {}
            return Profile(
                team=str(person.get("team_id") or ""),
                enterprise=str(enterprise_user.get("enterprise_id") or ""),
                guest=bool(person.get("is_restricted") or person.get("is_ultra_restricted")),
            )

        def failed(exc: BaseException, delay: float) -> None:
            log.warning(
                "users.info for %s failed (%s); refused until it answers, next try in %.0fs",
                user,
                exc,
                delay,
            )

        return await looked.get(look_up, failed)


UNKNOWN = (
    "Slack could not tell me who you are right now (users.info failed), and I only act for "
    "members of this workspace; nothing was looked up. Try again in a minute."
)
EXTERNAL = (
    "You are in another organisation's workspace (Slack Connect), and I only act for members "
    "of this one; nothing was looked up. An admin can allow it with ALLOW_EXTERNAL_USERS=true."
)
GUEST = (
    "Guests of this workspace may not use me; nothing was looked up. An admin can allow it "
    "with ALLOW_GUEST_USERS=true."
)


@dataclass
class Access:
    """Who may start an investigation or click Approve/Reject (ALLOW_EXTERNAL_USERS,
    ALLOW_GUEST_USERS)."""

    people: People
    allow_external: bool = False
    allow_guests: bool = False

    async def refusal(self, asker: Asker) -> str | None:
        """Why `asker` may not, in a sentence that names the setting; None: they may."""
        if self.allow_external and self.allow_guests:
            return None
        elsewhere = bool(asker.user_team) and asker.user_team != asker.team
        if elsewhere and not asker.enterprise and not self.allow_external:
            return EXTERNAL  # Slack's event says so: users.info need not be asked
        profile = await self.people.profile(asker.user)
        if profile is None:
            return UNKNOWN
        home = asker.user_team or profile.team
        same_org = bool(asker.enterprise) and profile.enterprise == asker.enterprise
        if home != asker.team and not same_org and not self.allow_external:
            return EXTERNAL
        if profile.guest and not self.allow_guests:
            return GUEST
        return None


# Counted only when both windows have room, once per turn (a resumed turn is not counted
# again), in one step: two processes cannot both take the last place.
_COUNT = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
if tonumber(redis.call('GET', KEYS[1]) or '0') >= tonumber(ARGV[1]) then return 1 end
if tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[2]) then return 2 end
for i = 1, 2 do
    redis.call('INCR', KEYS[i])
    redis.call('EXPIRE', KEYS[i], ARGV[3])
end
redis.call('SET', KEYS[3], '1', 'EX', ARGV[3])
return 0
"""
WINDOW_TTL_S = 7200  # an hour's counts outlive the hour, then go


@dataclass
class AskingLimits:
    """INVESTIGATIONS_PER_USER_PER_HOUR and INVESTIGATIONS_PER_CHANNEL_PER_HOUR, in clock
    hours (UTC), shared by every process."""

    redis: aioredis.Redis
    per_user: int
    per_channel: int
    prefix: str = "tracegate"

    def __post_init__(self) -> None:
        self._count = self.redis.register_script(_COUNT)

    async def refusal(self, turn_id: str, team: str, channel: str, user: str) -> str | None:
        """Count one investigation `user` starts in `channel`; why not, if a limit is full."""
        now = datetime.now(UTC)
        hour = now.strftime("%Y%m%d%H")
        keys = [
            f"{self.prefix}:asked:user:{team}:{user}:{hour}",
            f"{self.prefix}:asked:channel:{team}:{channel}:{hour}",
            f"{self.prefix}:asked:turn:{turn_id}",
        ]
        limits = [self.per_user, self.per_channel, WINDOW_TTL_S]
        full = int(await self._count(keys=keys, args=limits))
        if full == 0:
            return None
        next_hour = (now + timedelta(hours=1)).strftime("%H:00 UTC")
        if full == 1:
            what = f"You have started {self.per_user} investigations this hour"
            setting = f"INVESTIGATIONS_PER_USER_PER_HOUR={self.per_user}"
        else:
            what = f"This channel has had {self.per_channel} investigations this hour"
            setting = f"INVESTIGATIONS_PER_CHANNEL_PER_HOUR={self.per_channel}"
        return (
            f"{what} ({setting}), so this one was not started (no model call was made). "
            f"The next question is taken from {next_hour}."
        )
