"""Posting a message exactly once, when Slack's answer can be lost.

chat.postMessage is not idempotent: if the connection drops (or Slack answers 5xx) after
Slack stored the message, the bot cannot tell, and posting again leaves two placeholders,
two answers or two approval cards in the incident thread. So every message the bot posts
for a turn carries a tag in its message metadata (`event_type` tracegate_post,
`event_payload.tag`), and when a post may or may not have happened — its answer was lost,
or an earlier run of the turn may have posted it — the thread is searched for the tag
before posting again.

slack_sdk retries a dropped connection by itself (and we add 5xx retries); for
chat.postMessage those blind retries are exactly what posts twice, so they are switched
off for it (`NotForPosts`) and this module decides instead.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

log = logging.getLogger(__name__)

EVENT_TYPE = "tracegate_post"
SEARCH_PAGES = 5  # replies since the turn began, 200 a page


# A blind retry of these can post twice, or start a second stream.
NOT_RETRIED = ("/chat.postMessage", "/chat.startStream")


class NotForPosts(AsyncRetryHandler):
    """Wraps a retry handler so it never retries chat.postMessage or chat.startStream
    (see the module doc).

    Only the handler interface slack_sdk's client calls is used (`can_retry_async`,
    `prepare_for_next_attempt_async`): the wrapped handler keeps its own count, interval
    and Retry-After handling."""

    def __init__(self, inner: AsyncRetryHandler) -> None:
        super().__init__(inner.max_retry_count, inner.interval_calculator)
        self.inner = inner
        # Between attempts, the wrapped handler's own wait (a Retry-After, its backoff).
        self.prepare_for_next_attempt_async = inner.prepare_for_next_attempt_async  # type: ignore[method-assign]

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if request.url.rstrip("/").endswith(NOT_RETRIED):
            return False
        return await self.inner.can_retry_async(
            state=state, request=request, response=response, error=error
        )


def _definite(exc: Exception) -> bool:
    """Slack answered and said no (`not_in_channel`, `ratelimited`…): nothing was posted."""
    if not isinstance(exc, SlackApiError):
        return False
    status = getattr(exc.response, "status_code", 0)
    return status < 500 and isinstance(exc.response.data, dict) and "error" in exc.response.data


Message = dict[str, Any]


async def pages(first: AsyncSlackResponse, most: int) -> AsyncIterator[AsyncSlackResponse]:
    """`first` and the pages after it, `most` at the most (slack_sdk follows the cursor)."""
    read = 0
    async for page in first:
        yield page
        read += 1
        if read == most:
            return


async def first_message(
    first: AsyncSlackResponse, matches: Callable[[Message], bool]
) -> str | None:
    """The ts of the first message that `matches` on up to SEARCH_PAGES pages from `first`."""
    async for page in pages(first, SEARCH_PAGES):
        for message in page.get("messages") or []:
            if matches(message):
                return str(message["ts"])
    return None


def tagged(event_type: str, key: str, value: str) -> Callable[[Message], bool]:
    """Whether a message's metadata is `event_type` with `event_payload[key] == value`."""

    def matches(message: Message) -> bool:
        metadata = message.get("metadata") or {}
        payload = metadata.get("event_payload") or {}
        return bool(metadata.get("event_type") == event_type and payload.get(key) == value)

    return matches


async def find_tagged(
    client: AsyncWebClient, channel: str, thread_ts: str, tag: str, since: float
) -> str | None:
    """The ts of the bot's message tagged `tag` in the thread, posted after `since`.

    None when Slack says there is no such thread (`thread_not_found`: nothing can be in
    it); a failure that leaves the question open (a dropped connection, 5xx, 429) raises.
    """
    try:
        first = await client.conversations_replies(
            channel=channel,
            ts=thread_ts,
            oldest=f"{since:.6f}",
            include_all_metadata=True,
            limit=200,
        )
        return await first_message(first, tagged(EVENT_TYPE, "tag", tag))
    except SlackApiError as exc:
        if _definite(exc) and exc.response.data.get("error") != "ratelimited":
            log.info("cannot search %s for %s: %s", thread_ts, tag, exc.response["error"])
            return None
        raise


async def post_once(
    client: AsyncWebClient,
    *,
    channel: str,
    thread_ts: str,
    tag: str,
    since: float,
    look_first: bool = False,
    **message: Any,
) -> str:
    """Post `message` in the thread unless the message tagged `tag` is there; its ts.

    `since`: the earliest time such a message could have been posted (the turn's start),
    which bounds the search. `look_first`: an earlier run may have posted it already.
    """
    if look_first:
        found = await find_tagged(client, channel, thread_ts, tag, since)
        if found is not None:
            log.info("found %s already posted as %s", tag, found)
            return found
    metadata = {"event_type": EVENT_TYPE, "event_payload": {"tag": tag}}
    try:
        posted = await client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, metadata=metadata, **message
        )
    except Exception as exc:
        if _definite(exc):
            raise
        try:  # applied or not? Slack's thread says.
            found = await find_tagged(client, channel, thread_ts, tag, since)
        except Exception:
            log.warning("cannot tell whether %s was posted; it will be tried again", tag)
            raise exc from None
        if found is None:
            raise
        log.info("%s was posted though its answer was lost (%s)", tag, type(exc).__name__)
        return found
    return str(posted["ts"])
