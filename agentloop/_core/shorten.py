"""Shortening long texts without losing what matters in them.

A long tool output keeps its head and tail, and from the middle the lines that look like
errors, stack frames or file locations: a ``ModuleNotFoundError`` at character 4,200 of a
5,300-character test run must reach the summarizer.
"""

from __future__ import annotations

import re
from typing import Any

# Lines worth keeping from the middle of a long output, most telling first: the error itself
# (pytest's "E   ..." lines, "SomeError: ...", a traceback's start), then where it happened
# (stack frames, path:line), then anything that merely sounds like trouble.
_ERROR = re.compile(
    r"^E\s|^\s*Traceback \(most recent call last\)|\b\w*(Error|Exception|Exit)\b:"
    r"|\b(FAILED|FAIL|ERROR|FATAL|panic(ked)?)\b|\berror(\[\w+\])?:"
)
_LOCATION = re.compile(
    r'File "[^"]+", line \d+'  # Python stack frames
    r"|\bat \S+ \(\S+:\d+"  # JavaScript / Java stack frames
    r"|\S+\.[A-Za-z][A-Za-z0-9]{0,5}:\d+"  # path.py:88 or file.ts:12:5
)
_TROUBLE = re.compile(
    r"\b(exception|failed|failure|warning|denied|refused|not found|no such|cannot|can't"
    r"|undefined|timed? ?out|assert\w*|errno|segfault)\b",
    re.IGNORECASE,
)

MAX_LINE = 300
"""Kept lines are cut to this many characters (a minified line must not eat the budget)."""


def _rank(line: str) -> int | None:
    if _ERROR.search(line):
        return 0
    if _LOCATION.search(line):
        return 1
    if _TROUBLE.search(line):
        return 2
    return None


def omitted(count: int) -> str:
    return f"[... {count:,} characters omitted ...]"


def shorten(text: str, limit: int) -> str:
    """``text`` within about ``limit`` characters: head, tail, and the salient middle lines.

    Without salient lines it is head (70 %) and tail (30 %) around an omission marker.
    """
    if len(text) <= limit:
        return text
    limit = max(limit, 40)
    head_len = int(limit * 0.45)
    tail_len = int(limit * 0.25)
    middle = text[head_len : len(text) - tail_len]
    budget = limit - head_len - tail_len
    ranked = [
        (rank, index, line.strip()[:MAX_LINE])
        for index, line in enumerate(middle.splitlines())
        if (rank := _rank(line)) is not None
    ]
    chosen: list[tuple[int, str]] = []
    for _, index, line in sorted(ranked):  # the most telling lines first, then in order
        if len(line) + 1 > budget:
            continue
        chosen.append((index, line))
        budget -= len(line) + 1
    kept = [line for _, line in sorted(chosen)]
    if not kept:
        head_len = int(limit * 0.7)
        tail_len = limit - head_len
        gone = len(text) - head_len - tail_len
        return f"{text[:head_len]}\n{omitted(gone)}\n{text[-tail_len:]}"
    gone = len(middle)
    lines = "\n".join(kept)
    return (
        f"{text[:head_len]}\n[... {gone:,} characters omitted; the lines among them that look "
        f"like errors or locations: ...]\n{lines}\n[... end of the kept lines ...]\n"
        f"{text[len(text) - tail_len :]}"
    )


def shorten_values(value: Any, limit: int) -> Any:
    """A tool input with every long string in it shortened (structure and short values kept)."""
    if isinstance(value, str):
        return shorten(value, limit)
    if isinstance(value, dict):
        return {key: shorten_values(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [shorten_values(item, limit) for item in value]
    return value


def cut_middle(text: str, limit: int, note: str) -> str:
    """Head (60 %) and tail (40 %) of ``text`` around ``note`` (``{count}`` is filled in)."""
    if len(text) <= limit:
        return text
    head_len = int(limit * 0.6)
    tail_len = limit - head_len
    gone = len(text) - head_len - tail_len
    return f"{text[:head_len]}\n{note.format(count=gone)}\n{text[len(text) - tail_len :]}"
