"""Which span of OTLP JSON is the root, whatever encoding its IDs arrive in (pure logic)."""

from typing import Any

import pytest

from graph.tools.tempo import parse_spans, summarise_trace

ROOT_B64, ROOT_HEX = "EjRWeJCrze8=", "1234567890ABCDEF"  # the same 8 bytes


def _document(root_id: str, root_parent: str | None) -> dict[str, Any]:
    root = {"spanId": root_id, "name": "GET /", "startTimeUnixNano": "2000", "endTimeUnixNano": "9"}
    if root_parent is not None:
        root["parentSpanId"] = root_parent
    child = {
        "spanId": "/ty6mHZUMhA=",
        "parentSpanId": root_id,
        "name": "SELECT",
        "startTimeUnixNano": "1000",  # before its parent: another host's clock
        "endTimeUnixNano": "3000",
    }
    service = {"key": "service.name", "value": {"stringValue": "shop"}}
    return {
        "batches": [
            {"resource": {"attributes": [service]}, "scopeSpans": [{"spans": [child, root]}]}
        ]
    }


@pytest.mark.parametrize(
    ("root_id", "root_parent"),
    [
        (ROOT_B64, None),
        (ROOT_B64, ""),
        (ROOT_B64, "AAAAAAAAAAA="),  # 8 zero bytes in base64, as Tempo renders them
        (ROOT_HEX, "0000000000000000"),  # in hex, as the OTLP/JSON spec writes them
    ],
    ids=["absent", "empty", "base64 zeros", "hex zeros"],
)
def test_a_span_whose_parent_id_is_absent_empty_or_all_zeros_is_the_root(
    root_id: str, root_parent: str | None
) -> None:
    summary = summarise_trace("ab" * 16, parse_spans(_document(root_id, root_parent)))
    assert "root span: shop GET /" in summary.splitlines()
