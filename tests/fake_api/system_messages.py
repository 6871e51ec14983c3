"""Mid-conversation ``role: "system"`` messages (notes 1.5).

Accepted on the models that have them (:func:`~fake_api.model_facts.system_messages`: not
Sonnet 5, not 4.x but Opus 4.8), where the docs place them: never first; directly after a user
turn (a ``tool_result``-only one counts) or after an assistant turn that ends in a server tool
result; before an assistant turn or at the end of the array; consecutive system messages form
one section. Their content: a string or text blocks (an empty list with ``output_config``).
Once sent they are part of the prefix (:mod:`fake_api.prefix_chain` chains every message).

Their features each need a beta header (without it the field or block is refused):
``clear_at`` (``mid-conversation-system-clear-at-2026-08-21``; ``"next_user_message"``: text
only, no ``output_config``, no ``cache_control``), a per-message ``output_config``
(``mid-conversation-output-config-2026-07-01``), ``tool_addition``/``tool_removal`` blocks
(``inline-tools-2026-09-15`` or ``mid-conversation-tool-changes-2026-07-01``; a
``tool_definition`` only with the first). A ``tool_reference`` naming no tool of ``tools`` is the
400 ``tool_reference_unresolved`` (:func:`tool_reference_error`).
"""

from __future__ import annotations

from typing import Any

from fake_api.model_facts import family, system_messages
from fake_api.replies import ErrorReply

CLEAR_AT_BETA = "mid-conversation-system-clear-at-2026-08-21"
OUTPUT_CONFIG_BETA = "mid-conversation-output-config-2026-07-01"
INLINE_TOOLS_BETA = "inline-tools-2026-09-15"
TOOL_CHANGES_BETA = "mid-conversation-tool-changes-2026-07-01"
TOOL_CHANGES = frozenset({"tool_addition", "tool_removal"})

_KEYS = frozenset({"role", "content", "clear_at", "output_config"})
_SERVER_RESULTS = frozenset(
    {"web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result"}
)


def system_message_problems(body: Any, betas: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """What the API refuses about the request's system messages (empty: nothing)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return []
    model = body.get("model")
    problems: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "system":
            continue
        where = f"messages.{index}"
        if not system_messages(family(model)):
            problems.append(f"{where}.role: system messages are not supported for model {model}")
            continue
        problems.extend(
            f"{where}.{k}: Extra inputs are not permitted" for k in set(message) - _KEYS
        )
        problems.extend(_content_problems(where, message))
        problems.extend(_beta_problems(where, message, betas))
        before = _neighbour(messages, index, -1)
        after = _neighbour(messages, index, 1)
        if before is None:
            problems.append(f"{where}: a system message cannot be the first message")
        elif not _may_precede(before):
            problems.append(
                f"{where}: a system message must directly follow a user turn (or an assistant "
                "turn that ends in a server tool result)"
            )
        if after is not None and after.get("role") != "assistant":
            problems.append(
                f"{where}: a system message must be followed by an assistant turn or end the "
                "conversation"
            )
    return problems


def _neighbour(messages: list[Any], index: int, direction: int) -> dict[str, Any] | None:
    """The nearest non-system message before (after) ``index``; consecutive system messages
    form one section."""
    at = index + direction
    while 0 <= at < len(messages):
        message = messages[at]
        if not (isinstance(message, dict) and message.get("role") == "system"):
            return message if isinstance(message, dict) else None
        at += direction
    return None


def _may_precede(message: dict[str, Any]) -> bool:
    if message.get("role") == "user":
        return True
    content = message.get("content")
    last = content[-1] if isinstance(content, list) and content else None
    return (
        message.get("role") == "assistant"
        and isinstance(last, dict)
        and last.get("type") in _SERVER_RESULTS
    )


def _content_problems(where: str, message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [] if content.strip() else [f"{where}.content: must contain non-whitespace text"]
    if not isinstance(content, list):
        return [f"{where}.content: must be a string or a list of text blocks"]
    if not content and "output_config" not in message:
        return [f"{where}.content: must not be empty"]
    problems = []
    for position, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and str(block.get("text") or "").strip():
            continue
        if kind in ("tool_addition", "tool_removal"):
            continue
        problems.append(f"{where}.content.{position}: a system message holds text blocks only")
    return problems


def _beta_problems(
    where: str, message: dict[str, Any], betas: frozenset[str] | set[str]
) -> list[str]:
    """The features of one system message that need a beta header, and their own rules."""
    problems = []
    clear_at = message.get("clear_at")
    if "clear_at" in message and CLEAR_AT_BETA not in betas:
        problems.append(f"{where}.clear_at: Extra inputs are not permitted")
    elif clear_at not in (None, "never", "next_user_message"):
        problems.append(f"{where}.clear_at: Input should be 'never' or 'next_user_message'")
    elif clear_at == "next_user_message":
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if "output_config" in message:
            problems.append(f"{where}: a turn-scoped system message takes no `output_config`")
        for position, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") != "text":
                problems.append(
                    f"{where}.content.{position}: a turn-scoped system message holds text only"
                )
            elif isinstance(block, dict) and "cache_control" in block:
                problems.append(
                    f"{where}.content.{position}.cache_control: not allowed in a turn-scoped "
                    "system message"
                )
    if "output_config" in message and OUTPUT_CONFIG_BETA not in betas:
        problems.append(f"{where}.output_config: Extra inputs are not permitted")
    content = message.get("content")
    for position, block in enumerate(content if isinstance(content, list) else []):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in TOOL_CHANGES:
            continue
        at = f"{where}.content.{position}"
        if not betas & {INLINE_TOOLS_BETA, TOOL_CHANGES_BETA}:
            problems.append(
                f"{at}: `{kind}` blocks require the `anthropic-beta` header `{INLINE_TOOLS_BETA}` "
                f"(or `{TOOL_CHANGES_BETA}`)"
            )
            continue
        tool = block.get("tool")
        tool_kind = tool.get("type") if isinstance(tool, dict) else None
        if tool_kind == "tool_definition" and INLINE_TOOLS_BETA not in betas:
            problems.append(
                f"{at}.tool: a `tool_definition` requires the `anthropic-beta` header "
                f"`{INLINE_TOOLS_BETA}`"
            )
        elif tool_kind not in ("tool_reference", "tool_definition", "mcp_tool_reference"):
            problems.append(f"{at}.tool: Input should be a tool reference or a tool definition")
    return problems


def tool_references(body: Any) -> list[tuple[str, str]]:
    """``(path, name)`` of every ``tool_reference`` in a system message's tool changes."""
    found = []
    messages = body.get("messages") if isinstance(body, dict) else None
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict) or message.get("role") != "system":
            continue
        content = message.get("content")
        for position, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict) or block.get("type") not in TOOL_CHANGES:
                continue
            tool = block.get("tool")
            if isinstance(tool, dict) and tool.get("type") == "tool_reference":
                found.append((f"messages.{index}.content.{position}.tool", str(tool.get("name"))))
    return found


def tool_reference_error(body: Any) -> ErrorReply | None:
    """The 400 ``tool_reference_unresolved`` for a reference to a tool ``tools`` does not
    declare (None: every reference resolves)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    declared = {
        t.get("name") for t in (tools if isinstance(tools, list) else []) if isinstance(t, dict)
    }
    for path, name in tool_references(body):
        if name not in declared:
            return ErrorReply(
                400,
                "invalid_request_error",
                f"{path}: the tool reference {name!r} does not resolve to a tool in `tools`",
                error_code="tool_reference_unresolved",
            )
    return None
