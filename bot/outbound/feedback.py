"""👍 / 👎 under every answer: who thought it right or wrong, once per person (a person may
change their mind), in the audit stream and as a metric; 👎 asks what was wrong.

A click counts only for the answer it is under: its value names the answer's run, whose
thread must be the clicked message's thread. What people write is kept as untrusted text,
bounded, and never shown to the model. Answers with a 👎 are listed for the eval suite
(`tracegate eval capture --negative`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.blocks import MAX_REASON_CHARS, reason_view
from bot.outbound.cards import Click
from bot.process.metrics import ANSWER_FEEDBACK
from bot.turn.threads import ThreadMemory, thread_key
from gates.store import ActionStore, as_text

log = logging.getLogger(__name__)

VERDICTS = ("good", "bad")
MAX_NEGATIVE = 1000  # answers with a 👎 kept for the eval suite, newest

# One step: the person's verdict replaces their last one; the answer is listed as having a
# 👎 while anyone's verdict is "bad". Returns 1 when the verdict is new or changed.
_RECORD = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old == ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
local negative = false
local verdicts = redis.call('HVALS', KEYS[1])
for i = 1, #verdicts do
  if verdicts[i] == 'bad' then negative = true end
end
if negative then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -tonumber(ARGV[6]) - 1)
else
  redis.call('ZREM', KEYS[2], ARGV[5])
end
return 1
"""


@dataclass(eq=False)
class Feedback:
    client: AsyncWebClient
    redis: aioredis.Redis
    memory: ThreadMemory
    audit: ActionStore
    prefix: str
    ttl_s: int

    def __post_init__(self) -> None:
        self._record = self.redis.register_script(_RECORD)

    def _key(self, correlation_id: str) -> str:
        return f"{self.prefix}:feedback:{correlation_id}"

    async def clicked(self, value: str, user: str, where: Click, trigger_id: str | None) -> None:
        verdict, _, correlation_id = value.partition(":")
        if verdict not in VERDICTS or not correlation_id:
            log.warning("feedback with a value that is not ours: %.80r", value)
            return
        saved = await self.memory.steps(correlation_id)  # the answer's thread, while kept
        if saved is None or saved[0] != thread_key(where.team, where.channel, where.thread_ts):
            log.warning("feedback on %s from outside its answer's thread", correlation_id)
            return
        thread = saved[0]
        changed = await self._record(
            keys=[self._key(correlation_id), negative_key(self.prefix)],
            args=[
                user,
                verdict,
                self.ttl_s,
                time.time(),
                f"{thread}|{correlation_id}",
                MAX_NEGATIVE,
            ],
        )
        if changed:
            ANSWER_FEEDBACK.labels(verdict).inc()
            await self.audit.audit_event("answer_feedback", user, verdict, thread)
        if verdict == "bad" and trigger_id:
            try:
                view = reason_view(correlation_id)
                await self.client.views_open(trigger_id=trigger_id, view=view)
            except SlackApiError as exc:  # the trigger expired (3 s): the verdict stays
                log.warning("could not ask what was wrong: %s", exc.response.get("error"))

    async def explained(self, user: str, correlation_id: str, text: str) -> None:
        """What a person wrote about a wrong answer: untrusted, bounded, kept with it."""
        saved = await self.memory.steps(correlation_id)
        if saved is None or not text.strip():
            return
        reason = text.strip()[:MAX_REASON_CHARS]
        key = f"{self._key(correlation_id)}:why"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, user, reason)
            pipe.expire(key, self.ttl_s)
            await pipe.execute()
        await self.audit.audit_event("answer_feedback_reason", user, reason[:500], saved[0])

    async def negative(self) -> list[tuple[str, str]]:
        return await negative_answers(self.redis, self.prefix)


def negative_key(prefix: str) -> str:
    return f"{prefix}:feedback:negative"


async def negative_answers(redis: aioredis.Redis, prefix: str) -> list[tuple[str, str]]:
    """(thread key, correlation id) of the answers that have a 👎, newest first."""
    members = await redis.zrange(negative_key(prefix), 0, -1, desc=True)
    listed = [as_text(m) for m in members if isinstance(m, bytes | str)]
    return [(thread, cid) for thread, _, cid in (m.rpartition("|") for m in listed)]
