"""Sentences of an answer: where they are, and cutting some out.

The guards remove a sentence that states what failed a check, not a bare word, so the
answer never reads as the claim with a hole in it. What is left must still render: a list
item, quote or table row left empty goes with its line, emphasis and code marks a cut left
unpaired are dropped, and nothing else of the answer (table rules, other lines) is touched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Sentences end at line breaks and at . ! ? followed by a space (not in "1.42.0").
# (Each ending is tried only where a run of . ! ? begins, so a long run costs one pass.)
_SENTENCE = re.compile(r"[^\n]+?(?:(?<![.!?])[.!?]++(?=\s)|(?<![.!?])[.!?]*+$|$)", re.MULTILINE)
# Words whose dot ends no sentence: "rev. 42", "e.g. checkout", "approx. 1 s"
_ABBREVIATION = re.compile(
    r"(?:\b(?:rev|revs|e\.g|i\.e|approx|vs|etc|cf|no|nr|ver|incl|ca|resp)|\b[A-Za-z])\.$",
    re.IGNORECASE,
)
# What may stand before a sentence on its line without saying anything: list bullets and
# numbers, quote marks, table pipes, emphasis.
_PREFIX = re.compile(r"[ \t]*(?:(?:[-*•+>|]|\d{1,3}[.)])[ \t]*)*[*_~`]*[ \t]*")
_EMPTY_LINE = re.compile(r"[ \t]*(?:(?:[-*•+>|]|\d{1,3}[.)])[ \t]*)*[*_~` \t|]*")
_PAIRED = ("**", "__", "~~", "`", "*", "_")
_FENCE_LINE = re.compile(r"[ \t]*```")
_EMPTY_FENCE = re.compile(r"^[ \t]*```[^\n]*\n[ \t]*```[ \t]*$\n?", re.MULTILINE)
_TABLE_ROW = re.compile(r"^[ \t]*\|[^\n]*", re.MULTILINE)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-blank sentence of `text`, in order. A table row is one
    sentence: its cells say one thing together."""
    rows = [(m.start(), m.end()) for m in _TABLE_ROW.finditer(text)]
    spans: list[tuple[int, int]] = []
    for m in _SENTENCE.finditer(text):
        if not m.group().strip():
            continue
        row = next((r for r in rows if r[0] <= m.start() < r[1]), None)
        if row is not None:
            if not spans or spans[-1] != row:
                spans.append(row)
            continue
        previous = spans[-1] if spans else None
        joined = previous is not None and text[previous[1] : m.start()].strip(" \t") == ""
        if joined and previous and _ABBREVIATION.search(text[previous[0] : previous[1]]):
            spans[-1] = (previous[0], m.end())
        else:
            spans.append((m.start(), m.end()))
    return spans


def _removal(text: str, start: int, end: int) -> tuple[int, int]:
    """The span to cut for a sentence: its whole line when nothing else on it says anything."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    before = text[line_start:start]
    after = text[end:line_end]
    if _PREFIX.fullmatch(before) and _EMPTY_LINE.fullmatch(after):
        return line_start, min(line_end + 1, len(text))
    return start, end


def _balanced(line: str) -> str:
    """`line` without the emphasis or code marks a cut left unpaired (at its ends)."""
    if _FENCE_LINE.match(line):
        return line
    for mark in _PAIRED:
        singles = line.replace(mark * 2, "") if len(mark) == 1 else line
        prefix = _PREFIX.match(singles)
        if mark in "*_" and prefix:  # a bullet is no emphasis
            singles = singles[prefix.end() :] if mark == "*" else singles
        if singles.count(mark) % 2 == 0:
            continue
        body = line.rstrip()
        if body.endswith(mark):
            line = body[: -len(mark)]
            continue
        prefix = _PREFIX.match(line)
        at = line.find(mark, 0, (prefix.end() if prefix else 0) + len(mark))
        if at != -1:
            line = line[:at] + line[at + len(mark) :]
    return line


def cut_sentences(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` without the given sentences. A line a cut left with nothing to say goes, and
    marks a cut left unpaired on its line are dropped; no other line is changed."""
    kept: list[str] = []
    touched: list[int] = []  # positions in the result where something was cut
    cursor = 0
    for start, end in sorted({_removal(text, s, e) for s, e in spans}):
        if end <= cursor:
            continue
        kept.append(text[cursor : max(cursor, start)])
        whole_line = (start == 0 or text[start - 1] == "\n") and (
            end == len(text) or text[end - 1] == "\n"
        )
        if not whole_line:  # a line kept in part: check what the cut left on it
            touched.append(sum(len(k) for k in kept))
        cursor = end
    kept.append(text[cursor:])
    result = "".join(kept)
    lines = result.split("\n")
    hit: set[int] = set()
    offset, index = 0, 0
    for position in touched:
        while index < len(lines) - 1 and offset + len(lines[index]) < position:
            offset += len(lines[index]) + 1
            index += 1
        hit.add(index)
    cleaned = []
    for number, line in enumerate(lines):
        if number in hit:
            line = _balanced(line)
            if _EMPTY_LINE.fullmatch(line):  # nothing left on it but blanks or bullets
                continue
        cleaned.append(line)
    return _EMPTY_FENCE.sub("", "\n".join(cleaned)).strip()
