"""Shortening long texts without losing what matters in them.

A long tool output keeps its head and tail, and from the middle the lines that look like
errors, stack frames or file locations: a ``ModuleNotFoundError`` at character 4,200 of a
5,300-character test run must reach the summarizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Lines worth keeping from the middle of a long output, most telling first: the error itself
# (pytest's "E   ..." lines, "SomeError: ...", a traceback's start), then where it happened
# (stack frames, path:line), then anything that merely sounds like trouble.
#
# Most of a compaction's time went into these scans (hundreds of kilobytes of tool output), so
# each needle is looked for once, with str.find (C speed), in an ASCII-lowered copy of the text,
# and what it found is judged against the original text in Python only where it occurs.
# Locations are three regexes that each start with a literal (searched at C speed too).
_ERROR, _LOCATION, _TROUBLE = 0, 1, 2
_TROUBLE_WORDS = (  # found in the lowered text, as whole words (assert* as a prefix)
    "exception", "failed", "failure", "warning", "denied", "refused", "not found", "no such",
    "cannot", "can't", "undefined", "timeout", "timed out", "timedout", "time out", "errno",
    "segfault",
)  # fmt: skip
_FOUND_OTHERWISE = ("exception", "failed", "failure", "timed out", "timedout")
"""Trouble words another needle finds (``exception``, ``fail``, ``timed``)."""
_LOCATIONS = (
    re.compile(r'File "[^"]+", line \d'),
    re.compile(r"at \S+ \(\S+:\d"),
    re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,5}:\d"),
)
_PYTEST_E = re.compile(r"\nE[ \t]")
_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}
MAX_LINE = 300
"""Kept lines are cut to this many characters (a minified line must not eat the budget)."""


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line (every run of whitespace one space); past ``limit`` characters,
    cut to ``limit`` with an ellipsis as the last of them. The one rule for a command, a todo
    or a request shown on one line (the ledger, the receipt)."""
    line = " ".join(text.split())
    return line if limit is None or len(line) <= limit else line[: limit - 1] + "…"


def _word_at(text: str, at: int) -> bool:
    """Whether a word character (``\\w``) is at ``at`` (nothing is outside the text)."""
    if 0 <= at < len(text):
        char = text[at]
        return char.isalnum() or char == "_"
    return False


def _whole(text: str, at: int, length: int) -> bool:
    return not _word_at(text, at - 1) and not _word_at(text, at + length)


# One judge per needle: the rank of what it found at ``at`` (None: nothing worth keeping).
Judge = Callable[[str, str, int], "int | None"]


def _error(text: str, lowered: str, at: int) -> int | None:
    if text.startswith("Error:", at) or (text.startswith("ERROR", at) and _whole(text, at, 5)):
        return _ERROR
    if text.startswith(("error:", "error["), at) and not _word_at(text, at - 1):
        return _ERROR
    return None


def _exact(word: str, rank: int, whole: bool) -> Judge:
    """``word`` as written (case and all), as a whole word when ``whole``."""

    def judge(text: str, lowered: str, at: int) -> int | None:
        if text.startswith(word, at) and (not whole or _whole(text, at, len(word))):
            return rank
        return None

    return judge


def _trouble(*words: str) -> Judge:
    """Any of ``words`` (lower case), as a whole word in the lowered text."""

    def judge(text: str, lowered: str, at: int) -> int | None:
        for word in words:
            if lowered.startswith(word, at) and _whole(lowered, at, len(word)):
                return _TROUBLE
        return None

    return judge


def _first(*judges: Judge) -> Judge:
    def judge(text: str, lowered: str, at: int) -> int | None:
        for one in judges:
            rank = one(text, lowered, at)
            if rank is not None:
                return rank
        return None

    return judge


def _assert(text: str, lowered: str, at: int) -> int | None:
    return None if _word_at(lowered, at - 1) else _TROUBLE  # assert* as a prefix


def _traceback(text: str, lowered: str, at: int) -> int | None:
    # a traceback's first line: only blanks before it on its line
    start = text.rfind("\n", 0, at) + 1
    if text.startswith("Traceback (most recent call last)", at) and not text[start:at].strip(" \t"):
        return _ERROR
    return None


_JUDGES: dict[str, Judge] = {
    "error": _error,
    "exception": _first(_exact("Exception:", _ERROR, False), _trouble("exception")),
    "exit:": _exact("Exit:", _ERROR, False),
    "fail": _first(
        _exact("FAILED", _ERROR, True), _exact("FAIL", _ERROR, True), _trouble("failed", "failure")
    ),
    "fatal": _exact("FATAL", _ERROR, True),
    "panic": _first(_exact("panicked", _ERROR, True), _exact("panic", _ERROR, True)),
    "assert": _assert,
    "traceback (most": _traceback,
    **{word: _trouble(word) for word in _TROUBLE_WORDS if word not in _FOUND_OTHERWISE},
    "timed": _trouble("timed out", "timedout"),
}


def rank_lines(middle: str) -> dict[int, int]:
    """``{line index: rank}`` for the lines of ``middle`` (split on newlines) worth keeping:
    0 an error, 1 a location, 2 trouble; lines not in it are ordinary."""
    hits: list[tuple[int, int]] = []  # (position, rank)
    lowered = middle.translate(_ASCII_LOWER)  # same length as middle, unlike str.lower()
    for needle, judge in _JUDGES.items():
        at = lowered.find(needle)
        while at != -1:
            rank = judge(middle, lowered, at)
            if rank is not None:
                hits.append((at, rank))
            at = lowered.find(needle, at + len(needle))
    # pytest's "E   ..." lines
    if middle.startswith(("E ", "E\t")):
        hits.append((0, _ERROR))
    hits.extend((match.start() + 1, _ERROR) for match in _PYTEST_E.finditer(middle))
    for pattern in _LOCATIONS:
        for match in pattern.finditer(middle):
            start = match.start()
            if middle[start] == "a" and _word_at(middle, start - 1):
                continue
            if middle[start] == "." and (start == 0 or middle[start - 1].isspace()):
                continue
            hits.append((start, _LOCATION))
    # Line numbers in one pass: hits are few, so counting newlines between them beats
    # splitting the text or counting from its start for each.
    ranks: dict[int, int] = {}
    line = previous = 0
    for at, rank in sorted(hits):
        line += middle.count("\n", previous, at)
        previous = at
        if rank < ranks.get(line, 3):
            ranks[line] = rank
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
