"""What the evidence sources share: an HTTP API reached with httpx.

Prometheus (and Mimir, Thanos) and Loki answer the same way: JSON with a `status`, an error
in the API's own words on 4xx, 5xx when they are in trouble. `SourceRefused` carries the
API's words back to the model (fix the query); `SourceUnavailable` says to try later.
Tempo answers in a shape of its own (graph/tools/tempo.py) over the same client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager, contextmanager
from typing import Any, Generic, Protocol, TypeVar

import httpx
from langchain_core.tools import BaseTool

from graph.grounding.evidence import Fact, citation
from graph.links import query_link
from graph.tools import Bound, ToolFailed
from graph.untrusted import clip

MAX_ERROR = 300  # characters of an API's error text (untrusted, unbounded)


class SourceUnavailable(Exception):
    """The source did not answer usefully: connection error, timeout, 5xx, not its JSON;
    or it refused tracegate itself (401, 403: a tenant or credentials to fix, not retry)."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class SourceRefused(Exception):
    """The source refused the request (4xx): a bad query, in the API's own words."""


class SourceSpec(Protocol):
    """What a source's client is built from (its `…Spec`)."""

    @property
    def url(self) -> str: ...
    @property
    def tenant(self) -> str | None: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def datasource(self) -> str: ...  # its uid in Grafana
    @property
    def grafana_url(self) -> str | None: ...  # for links


Spec = TypeVar("Spec", bound=SourceSpec)
Params = Mapping[str, str | int | float | list[str]]


class HttpSource(Generic[Spec]):
    """One HTTP API over httpx. One instance per process; close with `aclose()`."""

    name: str  # "Prometheus"
    kind: str  # its Grafana data source type, for links
    unavailable: type[SourceUnavailable] = SourceUnavailable  # raised when no answer came
    language: str  # what its queries are written in ("PromQL")
    instead: str  # what the model must not do when it is down ("do not guess values")

    def __init__(self, spec: Spec, connections: int = 16, idle: int = 4) -> None:
        self.spec = spec
        headers = {"X-Scope-OrgID": spec.tenant} if spec.tenant else {}
        self._http = httpx.AsyncClient(
            base_url=spec.url.rstrip("/"),
            headers=headers,
            timeout=spec.timeout_s,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=idle),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def link(self, query: str, start: float | None = None, end: float | None = None) -> str | None:
        """A Grafana Explore URL showing the same query over the same window (GRAFANA_URL)."""
        if not self.spec.grafana_url:
            return None
        return query_link(self.spec.grafana_url, self.kind, self.spec.datasource, query, start, end)

    def cited(self, source: str, query: str, start: float, end: float) -> list[Fact]:
        """The citation of a result of `source` linking to the same query (none: no link)."""
        link = self.link(query, start, end)
        return [citation(source, link)] if link else []

    async def send(self, method: str, path: str, params: Params) -> httpx.Response:
        """The answer, whatever its status; `unavailable` when none came in time."""
        try:
            # httpx's timeout bounds each read; this bounds the whole exchange.
            async with asyncio.timeout(self.spec.timeout_s):
                if method == "POST":
                    return await self._http.post(path, data=params)
                return await self._http.get(path, params=params)
        except TimeoutError as exc:
            raise self.unavailable(f"no answer within {self.spec.timeout_s:g}s") from exc
        except httpx.HTTPError as exc:
            raise self.unavailable(f"{type(exc).__name__}: {exc}") from exc

    async def request(self, method: str, path: str, params: Params) -> Any:
        """The `data` of a successful answer; SourceRefused on 4xx, else SourceUnavailable."""
        response = await self.send(method, path, params)
        try:
            body = response.json()
        except ValueError:
            body = None  # an error in plain text (Loki's), or a proxy's page
        if response.status_code >= 500 or response.status_code in (401, 403, 429):
            words = body.get("error") if isinstance(body, dict) else None
            raise SourceUnavailable(
                f"HTTP {response.status_code}: {clip(words or response.text, MAX_ERROR)}",
                retryable=response.status_code not in (401, 403),
            )
        if response.status_code >= 400:
            if isinstance(body, dict) and body.get("error"):
                kind = f" ({body['errorType']})" if body.get("errorType") else ""
                raise SourceRefused(f"{clip(body['error'], MAX_ERROR)}{kind}")
            raise SourceRefused(clip(response.text, MAX_ERROR) or f"HTTP {response.status_code}")
        if not isinstance(body, dict) or body.get("status") != "success" or "data" not in body:
            raise SourceUnavailable(f"an answer that is not {self.name}'s JSON")
        return body["data"]

    @contextmanager
    def failing(self) -> Iterator[None]:
        """A failed query as the model is told of it: the API's words and to fix the query
        (in `language`), or that the source is down and what not to do `instead` of asking."""
        try:
            yield
        except SourceRefused as exc:
            raise ToolFailed(
                f"{self.name} rejected the query: {exc}. Fix the {self.language} and try again.",
                retryable=False,
            ) from exc
        except SourceUnavailable as exc:
            raise ToolFailed(
                f"{self.name} is unavailable ({exc}). Say so in the answer; {self.instead}.",
                retryable=exc.retryable,
            ) from exc


Client = TypeVar("Client", bound=HttpSource[Any])


def opener(
    client: Callable[[Any], Client], tools: Callable[[Client], Sequence[BaseTool]]
) -> Callable[[Bound], AbstractAsyncContextManager[Sequence[BaseTool]]]:
    """How a tool set over one HTTP API opens: a client from the set's settings, its tools
    bound to it, the client closed with the investigation."""

    @asynccontextmanager
    async def opened(bound: Bound) -> AsyncIterator[Sequence[BaseTool]]:
        async with aclosing(client(bound.settings)) as opened_client:
            yield tools(opened_client)

    return opened
