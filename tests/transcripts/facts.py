"""What a transcript planted, for tests to check recall: requests, paths, errors, searches..."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Request:
    """Something the user said: a typed request, or steering typed while tools ran (a text block
    after the tool_result blocks of a user message)."""

    text: str
    message_index: int
    kind: Literal["typed", "steering"]


@dataclass(frozen=True)
class BuriedError:
    """An error planted in the middle of a long tool output."""

    kind: Literal["module_not_found", "traceback"]
    line: str
    """The full line as it stands in the output."""
    needles: tuple[str, ...]
    """What must reach the summarizer (each occurs once in the whole transcript)."""
    offset: int
    """Where ``line`` starts in the output."""
    output_chars: int
    message_index: int
    tool_use_id: str


@dataclass(frozen=True)
class Search:
    """One web search: its query, the results' URLs and titles, the URLs the answer cited."""

    query: str
    urls: tuple[str, ...]
    titles: tuple[str, ...]
    cited_urls: tuple[str, ...]
    message_index: int
    server_tool_use_id: str


@dataclass(frozen=True)
class Document:
    title: str
    pages: int
    base64_chars: int
    message_index: int


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    base64_chars: int
    in_tool_result: bool
    message_index: int


@dataclass(frozen=True)
class Facts:
    """Everything a transcript planted, oldest first."""

    paths: tuple[str, ...]
    """Every file path a tool read, edited or wrote."""
    written_paths: tuple[str, ...]
    """Paths given whole bodies by write_file or changed by edit_file."""
    requests: tuple[Request, ...]
    errors: tuple[BuriedError, ...]
    searches: tuple[Search, ...]
    documents: tuple[Document, ...]
    images: tuple[Image, ...]
    thinking_blocks: int
    redacted_thinking_blocks: int
    interrupted_tool_use_ids: tuple[str, ...]
    placeholder_indexes: tuple[int, ...]
    """Indexes of the agent's placeholder replies to interrupted requests."""

    @property
    def latest_request(self) -> Request:
        """The newest thing the user said (a steering text if that came last)."""
        return self.requests[-1]

    @property
    def steering(self) -> tuple[Request, ...]:
        return tuple(r for r in self.requests if r.kind == "steering")

    @property
    def error_needles(self) -> tuple[str, ...]:
        return tuple(needle for error in self.errors for needle in error.needles)

    @property
    def search_queries(self) -> tuple[str, ...]:
        return tuple(search.query for search in self.searches)

    @property
    def search_urls(self) -> tuple[str, ...]:
        return tuple(url for search in self.searches for url in search.urls)

    @property
    def search_titles(self) -> tuple[str, ...]:
        return tuple(title for search in self.searches for title in search.titles)

    @property
    def document_titles(self) -> tuple[str, ...]:
        return tuple(document.title for document in self.documents)


@dataclass(frozen=True)
class Transcript:
    """A coding-agent conversation as the Messages API takes it, with what it planted.

    ``messages`` alternate roles, start and end with a user message (the state right before the
    next model call), answer every tool_use in the next message and never reuse an id. Treat
    it as read-only (:meth:`copy_messages` for a private copy)."""

    name: str
    seed: int
    messages: list[dict[str, Any]]
    system: str
    tools: list[dict[str, Any]]
    facts: Facts

    def copy_messages(self) -> list[dict[str, Any]]:
        return copy.deepcopy(self.messages)

    def body(
        self,
        model: str = "claude-sonnet-4-6",
        *,
        max_tokens: int | None = 4096,
        messages: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A request body for ``/v1/messages`` (or, with ``max_tokens=None``, for
        ``count_tokens``) carrying this transcript's system prompt and tools."""
        body: dict[str, Any] = {
            "model": model,
            "system": self.system,
            "tools": self.tools,
            "messages": self.messages if messages is None else messages,
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body
