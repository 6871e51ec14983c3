"""A corpus of realistic coding-agent transcripts, written by this project for its tests.

Every builder is deterministic for a ``seed`` and scales with ``size`` (the number of messages,
from about 20 to 600+; a transcript overshoots ``size`` by the few messages it takes to place
its events and end on a user message). Each returns a :class:`Transcript`: Messages-API
``messages`` (plain dicts, valid under the API's rules, ending with the user message a model
call would answer), the agent's ``system`` prompt and ``tools``, and the planted
:class:`Facts` (requests, steering, paths, buried errors, searches, documents, images...).

The sessions are a shop backend's maintenance: reading and editing Python modules, whole-file
writes of 2-20 KB, pytest/ruff/mypy/git output, logs with tracebacks; plus, per builder,
steering typed while tools ran, errors buried in the middle of long outputs, screenshots and
images inside tool results (real PNGs), a vendor PDF (a real multi-page PDF), web searches with
cited answers, thinking and redacted thinking, and interrupted turns.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from transcripts.facts import BuriedError, Document, Facts, Image, Request, Search, Transcript
from transcripts.media import pdf, png, png_size
from transcripts.session import SYSTEM, TOOLS, EventName, Options, write_session

__all__ = [
    "CORPUS",
    "SYSTEM",
    "TOOLS",
    "BuriedError",
    "Document",
    "Facts",
    "Image",
    "Request",
    "Search",
    "Transcript",
    "buried_errors_session",
    "coding_session",
    "corpus",
    "duplicate_tool_use_id",
    "interrupted_session",
    "media_session",
    "pasted_log_session",
    "pdf",
    "png",
    "png_size",
    "research_session",
    "steering_session",
]

Builder = Callable[[int, int], Transcript]


def coding_session(seed: int = 0, size: int = 120) -> Transcript:
    """Everything at once, in the proportions of a long working session: a PDF and a screenshot
    early, buried errors, a web search, steering, an image read by a tool, interruptions, a
    photo, thinking blocks; the agent is mid-task at the end."""
    events: list[tuple[float, EventName]] = [
        (0.03, "pdf_request"), (0.12, "screenshot_request"), (0.22, "module_error"),
        (0.32, "search_request"), (0.42, "traceback"), (0.5, "steering"),
        (0.56, "tool_image"), (0.62, "interrupted_tool"), (0.7, "placeholder"),
        (0.76, "photo_request"), (0.84, "steering"),
    ]  # fmt: skip
    options = Options(events=events, thinking=0.2, redacted_thinking=0.03)
    return write_session("coding", seed, size, options)


def steering_session(seed: int = 0, size: int = 120) -> Transcript:
    """The newest thing the user said is steering typed beside tool results at ~60 % of the
    session; the agent then works on without a newer request (so the steering is old news by
    the end, far from the tail)."""
    events: list[tuple[float, EventName]] = [
        (0.15, "steering"), (0.3, "module_error"), (0.4, "steering"), (0.6, "steering"),
    ]  # fmt: skip
    options = Options(events=events, thinking=0.1, autonomous_after_last_event=True)
    return write_session("steering", seed, size, options)


def buried_errors_session(seed: int = 0, size: int = 120) -> Transcript:
    """Two missing-module errors in verbose pytest runs (~4,200 characters into ~5,300) and two
    worker tracebacks (a ``src/app/db.py`` frame) in the middle of long logs."""
    events: list[tuple[float, EventName]] = [
        (0.15, "module_error"), (0.35, "traceback"), (0.55, "module_error"), (0.7, "traceback"),
    ]  # fmt: skip
    return write_session("buried_errors", seed, size, Options(events=events))


def media_session(seed: int = 0, size: int = 120) -> Transcript:
    """A vendor PDF, a 1280x800 screenshot, 2400x1350 charts read by a tool (the API caps their
    cost) and a small noisy photo whose base64 is large but whose cost is small."""
    events: list[tuple[float, EventName]] = [
        (0.02, "pdf_request"), (0.2, "screenshot_request"), (0.4, "tool_image"),
        (0.6, "photo_request"), (0.75, "tool_image"),
    ]  # fmt: skip
    return write_session("media", seed, size, Options(events=events))


def research_session(seed: int = 0, size: int = 120) -> Transcript:
    """Three requests answered after web searches (server tool blocks, cited text), with
    thinking and redacted thinking blocks."""
    events: list[tuple[float, EventName]] = [
        (0.02, "search_request"), (0.3, "search_request"), (0.55, "search_request"),
    ]  # fmt: skip
    options = Options(events=events, thinking=0.45, redacted_thinking=0.1)
    return write_session("research", seed, size, options)


def interrupted_session(seed: int = 0, size: int = 120) -> Transcript:
    """Tool runs interrupted by the user (an error tool_result and a typed reason) and requests
    interrupted before any answer (the agent's placeholder reply keeps the roles alternating)."""
    events: list[tuple[float, EventName]] = [
        (0.2, "interrupted_tool"), (0.4, "placeholder"), (0.6, "interrupted_tool"),
        (0.8, "placeholder"),
    ]  # fmt: skip
    return write_session("interrupted", seed, size, Options(events=events))


def pasted_log_session(seed: int = 0, size: int = 120, log_chars: int = 100_000) -> Transcript:
    """The newest request is a pasted CI log of ``log_chars`` characters (100,000: ~27k
    tokens) with the question at its head and a remark at its tail; the agent then works on."""
    events: list[tuple[float, EventName]] = [(0.2, "module_error"), (0.45, "pasted_log")]
    options = Options(events=events, autonomous_after_last_event=True, pasted_log_chars=log_chars)
    return write_session("pasted_log", seed, size, options)


CORPUS: dict[str, Builder] = {
    "coding": coding_session,
    "steering": steering_session,
    "buried_errors": buried_errors_session,
    "media": media_session,
    "research": research_session,
    "interrupted": interrupted_session,
    "pasted_log": pasted_log_session,
}
"""Every builder by name (all take ``(seed, size)``)."""


def corpus(seed: int = 0, size: int = 120) -> list[Transcript]:
    """One transcript of each kind."""
    return [build(seed, size) for build in CORPUS.values()]


def duplicate_tool_use_id(transcript: Transcript) -> tuple[list[dict[str, Any]], int]:
    """A copy of the messages made invalid in one way only: a tool_use in the second half
    reuses the id of the first tool_use (its tool_result follows the change). Returns the
    messages and the index of the assistant message holding the duplicate."""
    messages = copy.deepcopy(transcript.messages)
    uses = [
        (index, block)
        for index, message in enumerate(messages)
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]
    first_index, first = uses[0]
    index, block = next((i, b) for i, b in uses if i >= len(messages) // 2 and i > first_index)
    old = block["id"]
    block["id"] = first["id"]
    for result in messages[index + 1]["content"]:
        if result.get("type") == "tool_result" and result.get("tool_use_id") == old:
            result["tool_use_id"] = first["id"]
    return messages, index
