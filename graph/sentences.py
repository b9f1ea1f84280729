"""Sentences of an answer: where they are, and cutting some out.

The guards remove a sentence that states what failed a check, not a bare word, so the
answer never reads as the claim with a hole in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Sentences end at line breaks and at . ! ? followed by a space (not in "1.42.0").
_SENTENCE = re.compile(r"[^\n]+?(?:[.!?]+(?=\s)|[.!?]*$)", re.MULTILINE)
_BULLET = " \t•*-_>|"


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-blank sentence of `text`, in order."""
    return [(m.start(), m.end()) for m in _SENTENCE.finditer(text) if m.group().strip()]


def _removal(text: str, start: int, end: int) -> tuple[int, int]:
    """The span to cut for a sentence: its whole line when it is all the line says."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    if not text[line_start:start].strip(_BULLET) and not text[end:line_end].strip(_BULLET):
        return line_start, line_end + 1
    return start, end


def cut_sentences(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` without the given sentences; a bullet or table row left empty goes too."""
    kept, cursor = [], 0
    for start, end in sorted({_removal(text, s, e) for s, e in spans}):
        kept.append(text[cursor:start])
        cursor = max(cursor, end)
    kept.append(text[cursor:])
    lines = "".join(kept).split("\n")
    return "\n".join(line for line in lines if not line.strip() or line.strip(_BULLET)).strip()
