"""What full-text search sees of a message, and what it shows of a match: the pure half of
:mod:`sessions._sql_search` (no SQL, no I/O).

A message's content blocks become *pieces* of text: a text block's text, a thinking block's
reasoning, a tool call's name and the string values of its input, a tool result's text, and the
strings of any other block (server tool results, compaction blocks...) except what is not text
for a reader (ids, signatures, base64 data). The index gets the pieces' words, lowercased and
split the same way for every backend; a match is shown as an excerpt of the piece around the
query's first word found in it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

MAX_INDEXED_CHARS = 200_000
"""Per message: the words past this many characters of its text are not indexed (a tsvector
holds at most 1 MB; a giant tool output keeps its first 200k characters searchable)."""
MAX_WORD_CHARS = 100
"""Longer runs of letters and digits (base64, hashes of hashes) are not words anyone types."""
MAX_TERMS = 16

_WORD = re.compile(r"[^\W_]+")
_QUERY_WORD = re.compile(r"[^\W_]+\*?")
_ASCII_SEPARATORS = {code: " " for code in range(128) if not chr(code).isalnum()}
"""Every ASCII character that is not a letter or digit, as a space: what :data:`_WORD`
separates, for :meth:`str.translate`."""
_NOT_TEXT = frozenset(
    {
        "type",
        "id",
        "tool_use_id",
        "signature",
        "data",
        "media_type",
        "encrypted_content",
        "encrypted_index",
        "cache_control",
        "citations",
    }
)
"""Keys whose string values are identifiers or encodings, never words a reader looks for."""
_TOOL_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


@dataclass(frozen=True, slots=True)
class Piece:
    """A searchable part of a message: the text of one block."""

    text: str
    tool_name: str | None = None
    """The tool of a tool call (known from the block itself)."""
    tool_use_id: str | None = None
    """A tool result's call id: its tool's name is on the call, in an earlier message."""


@dataclass(frozen=True, slots=True)
class Term:
    """One word of a query; ``prefix`` matches every word that starts with it (``deploy*``)."""

    word: str
    prefix: bool = False


def _strings(value: Any, *, text_source: bool = False) -> Iterator[str]:
    """The string leaves of a JSON value, without the keys of :data:`_NOT_TEXT` (a document's
    plain-text source keeps its ``data``: that is its text)."""
    if isinstance(value, str):
        if value:
            yield value
    elif isinstance(value, dict):
        plain = text_source or value.get("type") == "text"
        for key, item in value.items():
            if key in _NOT_TEXT and not (key == "data" and plain):
                continue
            yield from _strings(item, text_source=plain)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, text_source=text_source)


def pieces(content: Sequence[Any]) -> list[Piece]:
    """The searchable pieces of a message's content blocks, in order."""
    found: list[Piece] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if isinstance(text, str) and text:
                found.append(Piece(text))
        elif kind in _TOOL_CALLS:
            name = block.get("name")
            name = name if isinstance(name, str) else None
            found.append(Piece("\n".join(_strings(block.get("input"))), tool_name=name))
        elif kind == "tool_result":
            call = block.get("tool_use_id")
            text = "\n".join(_strings(block.get("content")))
            found.append(Piece(text, tool_use_id=call if isinstance(call, str) else None))
        else:
            text = "\n".join(_strings(block))
            if text:
                found.append(Piece(text))
    return found


def index_words(content: Sequence[Any]) -> list[str]:
    """What the index holds of a message: its words, lowercased, in order (every backend then
    sees the same words; a path like ``src/app.py`` is three of them), from its first
    :data:`MAX_INDEXED_CHARS` characters of text."""
    texts: list[str] = []
    left = MAX_INDEXED_CHARS
    for piece in pieces(content):
        for text in (piece.tool_name, piece.text):
            if text and left > 0:
                texts.append(text[:left])
                left -= len(text) + 1
    text = " ".join(texts).lower()
    # ASCII (most code and tool output) splits at C speed; other text by the regex.
    words: list[str] = (
        text.translate(_ASCII_SEPARATORS).split() if text.isascii() else _WORD.findall(text)
    )
    if words and max(map(len, words)) > MAX_WORD_CHARS:
        words = [word for word in words if len(word) <= MAX_WORD_CHARS]
    return words


def parse_query(query: str) -> list[Term]:
    """The words of ``query`` (at most :data:`MAX_TERMS`, duplicates dropped); a trailing
    ``*`` makes a word a prefix. Punctuation separates words, as in the index."""
    terms: list[Term] = []
    for raw in _QUERY_WORD.findall(query.lower()):
        word = raw.rstrip("*")
        term = Term(word, prefix=raw.endswith("*"))
        if len(word) <= MAX_WORD_CHARS and term not in terms:
            terms.append(term)
    return terms[:MAX_TERMS]


def _pattern(terms: Sequence[Term]) -> re.Pattern[str]:
    alternatives = [re.escape(term.word) + ("" if term.prefix else r"(?![^\W_])") for term in terms]
    return re.compile(r"(?<![^\W_])(?:" + "|".join(alternatives) + ")", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Excerpt:
    """The part of a message shown for a match."""

    text: str
    piece: Piece
    found: int
    """How many of the query's words the piece holds (0: none, e.g. after redaction)."""


def best_excerpt(
    found: Sequence[Piece],
    terms: Sequence[Term],
    width: int,
    redact: Callable[[str], str] | None = None,
) -> Excerpt | None:
    """The excerpt of the piece holding most of the query's words, about ``width`` characters
    on one line around the first of them; ``redact`` is applied to the whole piece first, so
    that a cut never leaves half a secret showing. None when there is no piece."""
    pattern = _pattern(terms)
    best: tuple[int, int, str, Piece] | None = None
    for piece in found:
        text = " ".join((redact(piece.text) if redact is not None else piece.text).split())
        matches = list(pattern.finditer(text))
        words = {m.group(0).lower() for m in matches}
        count = sum(
            1
            for term in terms
            if any(w == term.word or (term.prefix and w.startswith(term.word)) for w in words)
        )
        if best is None or count > best[0]:
            best = (count, matches[0].start() if matches else 0, text, piece)
    if best is None:
        return None
    count, at, text, piece = best
    return Excerpt(cut_around(text, at, width), piece, count)


def cut_around(text: str, at: int, width: int) -> str:
    """About ``width`` characters of ``text`` with position ``at`` a third of the way in, cut
    at spaces where one is near, ``…`` marking what was left out."""
    if len(text) <= width:
        return text
    start = max(0, min(at - width // 3, len(text) - width))
    end = start + width
    if start > 0:
        space = text.find(" ", start, min(at, start + 20))
        start = space + 1 if space != -1 else start
    if end < len(text):
        space = text.rfind(" ", max(end - 20, at), end)
        end = space if space > at else end
    return ("…" if start > 0 else "") + text[start:end].strip() + ("…" if end < len(text) else "")


def loads_content(raw: Any) -> list[Any]:
    """A stored content column (JSON text) as its list of blocks ([] if it is not one)."""
    value = json.loads(raw) if isinstance(raw, str) else raw
    return value if isinstance(value, list) else []
