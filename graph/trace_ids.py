"""Finding trace IDs in text, and normalising them the way Tempo stores them.

A trace ID is 16 to 32 hex characters, word-bounded, any case. Tempo stores 32 lower-case
hex characters: shorter IDs (64-bit ones, or ones whose leading zeros a search result
stripped) are left-padded with zeros. Tokens of digits only are left alone: they are
numbers (timestamps, byte counts), and a real 16-hex ID is all digits once in ~2000.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

TRACE_ID_PATTERN = re.compile(r"\b[0-9a-fA-F]{16,32}\b")


def normalise(trace_id: str) -> str:
    """Lower-case and left-pad to 32 hex characters."""
    return trace_id.lower().rjust(32, "0")


def find_trace_ids(text: str) -> list[str]:
    """Every trace-ID-looking token in `text`, normalised, deduplicated, in order of first use."""
    seen: dict[str, None] = {}
    for match in TRACE_ID_PATTERN.finditer(text):
        if not match.group().isdigit():  # a number, not an ID (see above)
            seen.setdefault(normalise(match.group()), None)
    return list(seen)


def rewrite_trace_ids(
    text: str, targets: Iterable[str], rewrite: Callable[[str], str]
) -> tuple[str, int]:
    """Rewrite every token of `text` that normalises to one of `targets`.

    Returns the new text and how many occurrences were rewritten.
    """
    wanted = {normalise(t) for t in targets}
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        if normalise(match.group()) in wanted:
            count += 1
            return rewrite(match.group())
        return match.group()

    return TRACE_ID_PATTERN.sub(replace, text), count
