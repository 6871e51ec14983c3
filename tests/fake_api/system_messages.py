"""Mid-conversation ``role: "system"`` messages (notes 1.5).

Accepted on the models that have them (:func:`~fake_api.model_facts.system_messages`: not
Sonnet 5, not 4.x but Opus 4.8), where the docs place them: never first; directly after a user
turn (a ``tool_result``-only one counts) or after an assistant turn that ends in a server tool
result; before an assistant turn or at the end of the array; consecutive system messages form
one section. Their content: a string or text blocks (an empty list with ``output_config``).
Once sent they are part of the prefix (:mod:`fake_api.prefix_chain` chains every message).
"""

from __future__ import annotations

from typing import Any

from fake_api.model_facts import family, system_messages

_KEYS = frozenset({"role", "content", "clear_at", "output_config"})
_SERVER_RESULTS = frozenset(
    {"web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result"}
)


def system_message_problems(body: Any) -> list[str]:
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
