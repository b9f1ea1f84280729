"""Reading OTLP JSON spans: IDs in either encoding, and which span is the root (pure logic)."""

from typing import Any

from graph.tools.tempo import parse_spans, summarise_trace

ROOT_B64, CHILD_B64 = "EjRWeJCrze8=", "/ty6mHZUMhA="  # 1234567890abcdef, fedcba9876543210


def _document(root_parent: str | None, root_id: str, child_id: str) -> dict[str, Any]:
    root = {
        "spanId": root_id,
        "name": "GET /",
        "startTimeUnixNano": "2000",
        "endTimeUnixNano": "9000",
    }
    if root_parent is not None:
        root["parentSpanId"] = root_parent
    child = {
        "spanId": child_id,
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


def _root_line(document: dict[str, Any]) -> str:
    summary = summarise_trace("ab" * 16, parse_spans(document))
    return next(line for line in summary.splitlines() if line.startswith("root span"))


def test_an_all_zero_parent_span_id_marks_a_root_span() -> None:
    document = _document("AAAAAAAAAAA=", ROOT_B64, CHILD_B64)  # 8 zero bytes, base64
    assert _root_line(document) == "root span 1234567890abcdef: shop GET /"


def test_hex_ids_as_the_otlp_json_spec_writes_them_are_read_too() -> None:
    document = _document(None, "1234567890ABCDEF", "fedcba9876543210")
    assert _root_line(document) == "root span 1234567890abcdef: shop GET /"
