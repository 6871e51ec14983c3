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
#
# Most of a compaction's time went into these scans (hundreds of kilobytes of tool output), so
# the error and trouble words are found with str.find (C speed) and their boundaries checked in
# Python only where they occur; locations keep a regex that starts with a literal.
_ERROR_WORDS: tuple[tuple[str, bool, bool], ...] = (
    # (text, needs a non-word character before it, needs one after it)
    ("Error:", False, False),
    ("Exception:", False, False),
    ("Exit:", False, False),
    ("FAILED", True, True),
    ("FAIL", True, True),
    ("ERROR", True, True),
    ("FATAL", True, True),
    ("panicked", True, True),
    ("panic", True, True),
    ("error:", True, False),
    ("error[", True, False),
)
_TROUBLE_WORDS = (  # found in the lowered text, as whole words (assert* as a prefix)
    "exception", "failed", "failure", "warning", "denied", "refused", "not found", "no such",
    "cannot", "can't", "undefined", "timed out", "timedout", "time out", "timeout", "errno",
    "segfault",
)  # fmt: skip
_LOCATION = re.compile(r'File "[^"]+", line \d|at \S+ \(\S+:\d|\.[A-Za-z][A-Za-z0-9]{0,5}:\d')
_WORD = re.compile(r"\w")
MAX_LINE = 300
"""Kept lines are cut to this many characters (a minified line must not eat the budget)."""


def _word_at(text: str, at: int) -> bool:
    return 0 <= at < len(text) and _WORD.match(text, at) is not None


def rank_lines(middle: str) -> dict[int, int]:
    """``{line index: rank}`` for the lines of ``middle`` (split on newlines) worth keeping:
    0 an error, 1 a location, 2 trouble; lines not in it are ordinary."""
    ranks: dict[int, int] = {}

    def line_of(at: int) -> int:
        return middle.count("\n", 0, at)  # hits are few: counting beats indexing every line

    def mark(text: str, word: str, rank: int, before: bool, after: bool, offset: int = 0) -> None:
        at = text.find(word)
        while at != -1:
            if (not before or not _word_at(text, at - 1)) and (
                not after or not _word_at(text, at + len(word))
            ):
                # offset: where ``text`` starts in ``middle`` (-1: a "\n" was put in front)
                ranks.setdefault(line_of(max(0, at + offset + (1 if word[0] == "\n" else 0))), rank)
            at = text.find(word, at + len(word))

    # pytest's "E   ..." lines, and a traceback's first line (only blanks before it)
    for marker in ("\nE ", "\nE\t"):
        mark("\n" + middle, marker, 0, False, False, offset=-1)
    at = middle.find("Traceback (most recent call last)")
    while at != -1:
        line = line_of(at)
        if not middle[middle.rfind("\n", 0, at) + 1 : at].strip(" \t"):
            ranks.setdefault(line, 0)
        at = middle.find("Traceback (most recent call last)", at + 1)
    for word, before, after in _ERROR_WORDS:
        mark(middle, word, 0, before, after)
    for match in _LOCATION.finditer(middle):
        found = match.group()
        if found.startswith("at ") and _word_at(middle, match.start() - 1):
            continue
        if found[0] == "." and (match.start() == 0 or middle[match.start() - 1].isspace()):
            continue
        ranks.setdefault(line_of(match.start()), 1)
    lowered = middle.lower()
    for word in _TROUBLE_WORDS:
        mark(lowered, word, 2, True, True)
    mark(lowered, "assert", 2, True, False)
    return ranks


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
    middle_lines = middle.split("\n")
    ranked = sorted(
        (rank, index, middle_lines[index].strip()[:MAX_LINE])
        for index, rank in rank_lines(middle).items()
    )
    chosen: list[tuple[int, str]] = []
    for _, index, line in ranked:  # the most telling lines first, then in order
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
