"""Building the structured summary: what the summarizer sees, how it is chunked, and the
deterministic digest used when no model can be had. Pure functions plus one generator that
yields model requests (so one code path serves the sync and the async compacter)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentloop._core.compaction.effects import CallModel, Steps, perform
from agentloop._core.values.blocks import (
    Block,
    BlockRenderer,
    is_tool_result,
    is_tool_use,
    media_description,
    source_kind,
    to_json,
    tool_result_text,
)
from agentloop._core.values.messages import ContentBlock, Message, Usage
from agentloop._core.values.model import AsyncModel, Model, ModelRequest, ModelResponse
from agentloop._core.values.shorten import shorten, shorten_values

SECTIONS = (
    "Goal",
    "Constraints and decisions",
    "Progress",
    "Files read and modified",
    "Open todos",
    "Errors and their state",
    "Next steps",
)

_KEEP = (
    "Keep every concrete fact the agent will need: the user's requests and constraints in "
    "their own words, decisions and their reasons, exact file paths, commands, identifiers, "
    "numbers, error messages and whether they were fixed. Never invent anything. Write 'none' "
    "under a section with nothing to say."
)

SUMMARIZER_SYSTEM = (
    "You compact the history of a coding agent's conversation so that the agent can continue "
    "the work without the original messages. You write a precise, dense summary in markdown "
    "with exactly these sections: " + ", ".join(f"'## {name}'" for name in SECTIONS) + ". " + _KEEP
)
"""The system prompt of the fallback summary request over a rendered transcript (used where
the conversation does not fit the summarizer, or another model summarizes)."""

TextCount = Callable[[str], int]

SUMMARY_REQUEST_OPENING = "[compaction request]"
"""How the instruction of a summary request that continues the conversation begins."""


class NotASummary(Exception):
    """The summarizer answered something that is not a summary (it called a tool)."""


SEARCH_TOOL = "search_history"
"""The coding agent's tool over the whole lineage (``_agent/search_history.py``)."""


def summary_instruction(
    instructions: str,
    *,
    updates_previous: bool,
    so_far: str | None = None,
    searchable: bool = False,
) -> str:
    """The user text that asks the model, at the end of the conversation itself, for its
    summary (the request then shares the conversation's cached prefix)."""
    parts = [
        f"{SUMMARY_REQUEST_OPENING} Stop here: do not call any tool and do not continue the "
        "task. The conversation above is being compacted to fit the context window: everything "
        "before this message will be replaced by the summary you write now, and the agent will "
        "continue from that summary (the newest messages are kept verbatim after it). Write a "
        "precise, dense summary of the whole conversation in markdown with exactly these "
        "sections: " + ", ".join(f"'## {name}'" for name in SECTIONS) + ". " + _KEEP
    ]
    if updates_previous:
        parts.append(
            "The conversation opens with the summary of an earlier compaction: fold it in, "
            "keeping what still holds and correcting what changed."
        )
    if searchable:
        parts.append(
            f"Details you leave out stay available to the agent through its {SEARCH_TOOL} "
            "tool (the whole conversation is kept): keep what it needs to continue, and name "
            "what it can look up there when needed."
        )
    if so_far:
        parts.append(
            "A summary of the conversation up to an earlier point was written already (below): "
            "bring it up to date with what happened after that point, keeping what still "
            f"holds.\n<summary-so-far>\n{so_far.strip()}\n</summary-so-far>"
        )
    if instructions.strip():
        parts.append(f"Instructions for this summary:\n{instructions.strip()}")
    parts.append("Output only the summary.")
    return "\n\n".join(parts)


def continuing_summary_request(
    messages: Sequence[Message],
    *,
    model_name: str,
    system: str,
    tools: Sequence[dict[str, Any]],
    max_tokens: int,
    instructions: str = "",
    so_far: str | None = None,
    background: bool = False,
) -> ModelRequest:
    """The summary request that continues the conversation: the same model, system, tools and
    messages as its requests, byte for byte, with the instruction appended to the end as a user
    message (joined to the last one when the history ends with a user turn, so the roles keep
    alternating and every tool_result stays beside its tool_use). It reads the conversation
    from the prompt cache and writes nothing of its own (``cache_newest=False``)."""
    updates = bool(messages) and messages[0].summary is not None
    ask: ContentBlock = {
        "type": "text",
        "text": summary_instruction(
            instructions,
            updates_previous=updates,
            so_far=so_far,
            searchable=any(tool.get("name") == SEARCH_TOOL for tool in tools),
        ),
    }
    history = list(messages)
    if history and history[-1].role == "user":
        last = history[-1]
        history[-1] = Message("user", (*last.content, ask), pinned=last.pinned)
    else:
        history.append(Message("user", (ask,)))
    return ModelRequest(
        model=model_name,
        messages=tuple(history),
        system=system,
        tools=tuple(tools),
        max_tokens=max_tokens,
        metadata={
            "purpose": "summary",
            "part": 1,
            "parts": 1,
            "continues": True,
            "background": background,
        },
        cache_newest=False,
    )


def summary_text(response: ModelResponse) -> str:
    """The summary a reply holds; :class:`NotASummary` for a reply that calls a tool or is
    empty (it is never stored as a summary)."""
    if response.tool_uses:
        raise NotASummary("the summarizer called a tool instead of writing a summary")
    text = response.text.strip()
    if not text:
        raise NotASummary("the summarizer returned an empty summary")
    return text


def continuing_summary_steps(
    messages: Sequence[Message],
    *,
    model_name: str,
    system: str,
    tools: Sequence[dict[str, Any]],
    max_tokens: int,
    instructions: str = "",
    model: Model | AsyncModel | None = None,
    spent: list[Usage] | None = None,
) -> Steps[str]:
    """One summarizer call over the whole conversation (:func:`continuing_summary_request`).
    The usage of the call is appended to ``spent``."""
    request = continuing_summary_request(
        messages,
        model_name=model_name,
        system=system,
        tools=tools,
        max_tokens=max_tokens,
        instructions=instructions,
    )
    response = yield from perform(CallModel(request, model=model))
    if spent is not None:
        spent.append(response.usage)
    return summary_text(response)


def condense_steps(
    summary: str,
    *,
    model_name: str,
    target_tokens: int,
    max_tokens: int,
    model: Model | AsyncModel | None = None,
    spent: list[Usage] | None = None,
) -> Steps[str]:
    """A second call, only for a summary too long to fit: the same summary, shorter."""
    prompt = (
        f"This summary of a coding agent's conversation is too long. Rewrite it in at most "
        f"about {target_tokens:,} tokens with the same sections, dropping detail before "
        f"dropping facts.\n\n<summary>\n{summary.strip()}\n</summary>\n\n"
        "Output only the shorter summary."
    )
    request = ModelRequest(
        model=model_name,
        messages=(Message.user(prompt),),
        system=SUMMARIZER_SYSTEM,
        max_tokens=max_tokens,
        metadata={"purpose": "summary", "part": 1, "parts": 1, "condense": True},
        cache_newest=False,
    )
    response = yield from perform(CallModel(request, model=model))
    if spent is not None:
        spent.append(response.usage)
    return summary_text(response)


class _TranscriptRenderer(BlockRenderer[str]):
    """Blocks as transcript lines for the summarizer. Long outputs and inputs are shortened
    keeping their error and location lines; searches keep their queries, URLs and titles."""

    def __init__(self, speaker: str, tool_output_chars: int) -> None:
        self.speaker = speaker
        self.limit = tool_output_chars

    def text(self, text: str, block: Block) -> str:
        line = f"{self.speaker}: {text}"
        for citation in block.get("citations") or ():
            if isinstance(citation, dict):
                where = (citation.get("title"), citation.get("url"), citation.get("document_title"))
                line += f"\n  [cited: {' '.join(str(part) for part in where if part)}]"
        return line

    def tool_use(self, name: str, tool_input: Any, call_id: str, block: Block) -> str:
        what = "called tool" if is_tool_use(block) else "ran server tool"
        arguments = to_json(shorten_values(tool_input, self.limit))
        return f"{self.speaker} {what} {name} [{call_id}]: {arguments}"

    def tool_result(self, items: list[Block], call_id: str, is_error: bool, block: Block) -> str:
        status = "error" if is_error else "result"
        return f"Tool {status} [{call_id}]:\n{shorten(tool_result_text(block), self.limit)}"

    def server_tool_result(self, kind: str, call_id: str, block: Block) -> str:
        content = block.get("content")
        lines = [f"Server tool result ({kind}) [{call_id}]:"]
        entries = content if isinstance(content, list) else [content]
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            if entry.get("url") or entry.get("title"):
                age = f" ({entry['page_age']})" if entry.get("page_age") else ""
                lines.append(f"- {entry.get('title', '')} — {entry.get('url', '')}{age}")
            elif entry.get("error_code"):
                lines.append(f"- error: {entry['error_code']}")
            else:
                visible = {k: v for k, v in entry.items() if "encrypted" not in k}
                lines.append(f"- {shorten(to_json(visible), self.limit)}")
        return "\n".join(lines)

    def thinking(self, text: str, block: Block) -> str:
        return f"{self.speaker} (thinking): {shorten(text, self.limit)}"

    def image(self, block: Block) -> str:
        return f"{self.speaker}: [image: {_source_kind(block)}]"

    def document(self, block: Block) -> str:
        title = block.get("title") or "untitled"
        source = block.get("source")
        body = ""
        if source_kind(source) == "text" and isinstance(source, dict):
            body = "\n" + shorten(str(source.get("data", "")), self.limit)
        elif source_kind(source) == "url" and isinstance(source, dict):
            body = f" at {source.get('url')}"
        return f"{self.speaker}: [document {title!r} ({_source_kind(block)})]{body}"

    def compaction(self, content: str, block: Block) -> str:
        # Its text is handed over as the summary to update (not repeated here).
        return f"{self.speaker}: [the API's summary of what came before: the summary to update]"

    def other(self, kind: str, block: Block) -> str:
        return f"{self.speaker}: [{kind} block]"


def _source_kind(block: Block) -> str:
    source = block.get("source")
    if isinstance(source, dict):
        return media_description(source) or "unknown source"
    return "no source"


def render_message(message: Message, *, tool_output_chars: int) -> str:
    """One message as transcript text for the summarizer; long tool outputs are shortened."""
    speaker = "User" if message.role == "user" else "Assistant"
    if message.pinned:
        speaker += " (pinned)"
    renderer = _TranscriptRenderer(speaker, tool_output_chars)
    return "\n".join(renderer.render_all(message.content))


def transcript_parts(messages: Sequence[Message], *, tool_output_chars: int) -> list[str]:
    """The head as transcript parts; a previous compaction prefix contributes its carried items
    (its summary text is passed separately as the summary to update)."""
    parts: list[str] = []
    for message in messages:
        if message.summary is not None:
            continue
        parts.append(render_message(message, tool_output_chars=tool_output_chars))
    return parts


def _pack(
    items: Sequence[str],
    *,
    budget: int,
    cost: TextCount,
    separator: str,
    split: Callable[[str, int], list[str]],
) -> list[str]:
    """Group ``items`` in order into groups costing at most ``budget``; an item that alone
    exceeds it is handed to ``split`` (with its cost) and its pieces stand as groups."""
    groups: list[str] = []
    current: list[str] = []
    used = 0
    for item in items:
        tokens = cost(item)
        if tokens > budget:
            if current:
                groups.append(separator.join(current))
                current, used = [], 0
            groups.extend(split(item, tokens))
            continue
        if current and used + tokens > budget:
            groups.append(separator.join(current))
            current, used = [], 0
        current.append(item)
        used += tokens
    if current:
        groups.append(separator.join(current))
    return groups


def split_text(text: str, budget: int, count: TextCount) -> list[str]:
    """Split one over-long part by lines (then by characters) into pieces within ``budget``."""
    return _pack(
        text.splitlines(keepends=True),
        budget=budget,
        cost=count,
        separator="",
        split=lambda line, tokens: _cut_line(line, max(1, len(line) * budget // (tokens + 1))),
    )


def _cut_line(line: str, step: int) -> list[str]:
    """Cut one over-long line into pieces of at most ``step`` characters, at a space where one
    is near the end of a piece, so a word (a path, an id, an error code) is not cut in two."""
    pieces: list[str] = []
    start = 0
    while start < len(line):
        end = min(len(line), start + step)
        if end < len(line):
            space = line.rfind(" ", start + step // 2, end)
            if space > start:
                end = space + 1
        pieces.append(line[start:end])
        start = end
    return pieces


def chunk_parts(parts: Sequence[str], *, budget: int, count: TextCount) -> list[str]:
    """Group transcript parts into chunks of at most ``budget`` tokens; nothing is dropped."""
    return _pack(
        parts,
        budget=budget,
        cost=lambda part: count(part) + 2,
        separator="\n\n",
        split=lambda part, _tokens: split_text(part, budget, count),
    )


def summary_prompt(
    chunk: str, *, previous: str | None, part: int, parts: int, instructions: str
) -> str:
    sections: list[str] = []
    if previous:
        sections.append(
            "The summary so far (update it: keep what still holds, fold in what is new, "
            f"correct what changed):\n<summary-so-far>\n{previous.strip()}\n</summary-so-far>"
        )
    where = f" (part {part} of {parts})" if parts > 1 else ""
    sections.append(
        f"The conversation to fold into the summary{where}:\n"
        f"<conversation>\n{chunk}\n</conversation>"
    )
    if instructions.strip():
        sections.append(f"Instructions for this summary:\n{instructions.strip()}")
    sections.append(
        "Write the complete updated summary now, with the sections "
        + ", ".join(f"'## {name}'" for name in SECTIONS)
        + ". Output only the summary."
    )
    return "\n\n".join(sections)


def summarize_steps(
    head: Sequence[Message],
    *,
    previous: str | None,
    model_name: str,
    budget_tokens: int,
    max_tokens: int,
    count: TextCount,
    instructions: str = "",
    tool_output_chars: int = 2000,
    model: Model | AsyncModel | None = None,
    spent: list[Usage] | None = None,
) -> Steps[str]:
    """Yield one summarizer request per chunk, folding each answer into the next request.

    The summarizer sees every message of the head. A head larger than ``budget_tokens`` is cut
    into chunks and summarized as a running update; a previous summary is updated, not redone.
    """
    parts = transcript_parts(head, tool_output_chars=tool_output_chars)
    # Each request holds the running summary (never longer than one answer, max_tokens, or
    # the previous summary), the instructions, one chunk, and room for the answer.
    summary_room = max(max_tokens, count(previous) if previous else 0)
    overhead = count(SUMMARIZER_SYSTEM) + count(instructions) + 400
    room = max(256, budget_tokens - overhead - max_tokens - summary_room)
    chunks = chunk_parts(parts, budget=room, count=count) or ["(no messages)"]
    summary = previous
    for number, chunk in enumerate(chunks, start=1):
        prompt = summary_prompt(
            chunk, previous=summary, part=number, parts=len(chunks), instructions=instructions
        )
        request = ModelRequest(
            model=model_name,
            messages=(Message.user(prompt),),
            system=SUMMARIZER_SYSTEM,
            max_tokens=max_tokens,
            metadata={"purpose": "summary", "part": number, "parts": len(chunks)},
            cache_newest=False,
        )
        response = yield from perform(CallModel(request, model=model))
        if spent is not None:
            spent.append(response.usage)
        summary = summary_text(response)
    assert summary is not None
    return summary


def digest(head: Sequence[Message], *, reason: str, previous: str | None = None) -> str:
    """A structured summary built without a model: requests, files, tools, errors, last words."""
    requests: list[str] = []
    files_read: list[str] = []
    files_changed: list[str] = []
    tools: dict[str, int] = {}
    errors: list[str] = []
    last_text = ""
    for message in head:
        if message.summary is not None:
            continue
        if message.is_request and message.text.strip():
            requests.append(shorten(message.text.strip(), 600))
        if message.role == "assistant" and message.text.strip():
            last_text = message.text.strip()
        for block in message.content:
            if is_tool_use(block):
                name = str(block.get("name", "?"))
                tools[name] = tools.get(name, 0) + 1
                path = _path_of(block.get("input"))
                if path:
                    changed = any(word in name for word in ("write", "edit", "create", "delete"))
                    target = files_changed if changed else files_read
                    if path not in target:
                        target.append(path)
            elif is_tool_result(block) and block.get("is_error"):
                first = tool_result_text(block).strip().splitlines()
                errors.append(shorten(first[0] if first else "(no message)", 300))
    lines = [f"(Built without a model: {reason}.)", ""]
    if previous:
        lines += ["## Earlier summary", previous.strip(), ""]
    lines += ["## Goal"] + ([f"- {r}" for r in requests] or ["none"]) + [""]
    lines += ["## Files read and modified"]
    lines += [f"- modified: {p}" for p in files_changed] + [f"- read: {p}" for p in files_read]
    if not files_changed and not files_read:
        lines.append("none")
    lines += ["", "## Tools used"]
    lines += [f"- {name} x{n}" for name, n in sorted(tools.items())] or ["none"]
    lines += ["", "## Errors and their state"] + ([f"- {e}" for e in errors[-10:]] or ["none"])
    lines += ["", "## Open todos", "see the preserved state", "", "## Next steps"]
    lines.append(shorten(last_text, 1500) if last_text else "none")
    return "\n".join(lines)


def _path_of(tool_input: Any) -> str | None:
    if isinstance(tool_input, dict):
        for key in ("path", "file_path", "filename", "file"):
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return value
    return None
