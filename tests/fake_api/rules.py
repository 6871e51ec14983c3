"""The Messages API's request rules, checked independently of agentloop's own validator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fake_api.media import IMAGE_MEDIA_TYPES, decode_base64, pdf_pages, sniff_image

_TOP_LEVEL_KEYS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "tools", "tool_choice", "stream",
        "metadata", "stop_sequences", "temperature", "top_p", "top_k", "thinking",
        "service_tier", "container", "mcp_servers", "context_management", "output_config",
        "output_format", "inference_geo", "speed", "cache_control", "diagnostics",
        "compaction",
    }
)  # fmt: skip

# Fields the API accepts on input blocks; anything else ("parsed_output", "citations": null
# left over from a careless model_dump...) is answered "Extra inputs are not permitted".
_BLOCK_KEYS: Mapping[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "citations", "cache_control"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "title", "context", "citations", "cache_control"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "compaction": frozenset(
        {"type", "content", "encrypted_content", "signature", "tool_changes", "cache_control"}
    ),
    "server_tool_use": frozenset({"type", "id", "name", "input", "cache_control", "caller"}),
    "web_search_tool_result": frozenset(
        {"type", "tool_use_id", "content", "cache_control", "caller"}
    ),
}
# What /v1/messages/count_tokens takes: no max_tokens, stream, metadata or sampling options.
_COUNT_TOKENS_KEYS = frozenset(
    {
        "model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers",
        "context_management", "output_config", "output_format", "speed", "cache_control",
        "user_profile_id", "workspace_id", "compaction",
    }
)  # fmt: skip
_SERVER_RESULT_TYPES = frozenset(
    {"web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result"}
)
_CITATION_TYPES = frozenset(
    {
        "char_location", "page_location", "content_block_location",
        "web_search_result_location", "search_result_location",
    }
)  # fmt: skip
_OTHER_BLOCK_TYPES = frozenset(
    {
        "search_result", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
        "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result", "container_upload",
    }
)  # fmt: skip
_USER_BLOCKS = frozenset({"text", "image", "document", "tool_result", "search_result"})
_ASSISTANT_BLOCKS = frozenset(
    {"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use", "compaction"}
    | _SERVER_RESULT_TYPES
)


def check_request(body: Any, *, count_tokens: bool = False) -> list[str]:
    """Everything in a Messages API request body that the API would refuse (empty = valid).

    ``count_tokens`` applies the rules of ``/v1/messages/count_tokens`` (no ``max_tokens``,
    ``stream``, ``metadata`` or sampling options).
    """
    if not isinstance(body, dict):
        return ["request body must be a JSON object"]
    problems: list[str] = []
    allowed = _COUNT_TOKENS_KEYS if count_tokens else _TOP_LEVEL_KEYS
    for key in sorted(set(body) - allowed):
        problems.append(f"{key}: Extra inputs are not permitted")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        problems.append("model: Field required")
    if not count_tokens:
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            problems.append("max_tokens: Field required (an integer)")
        elif max_tokens < 0:  # 0: a cache keep-alive (nothing sampled)
            problems.append("max_tokens: must be at least 0")
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            problems.append("metadata: must be an object")
        else:
            problems.extend(
                f"metadata.{key}: Extra inputs are not permitted"
                for key in sorted(set(metadata) - {"user_id"})
            )
    problems.extend(_check_system(body.get("system")))
    problems.extend(_check_tools(body.get("tools")))
    problems.extend(_check_messages(body.get("messages")))
    return problems


def _check_system(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []  # an empty string system is accepted by the API
    if not isinstance(system, list):
        return ["system: must be a string or a list of text blocks"]
    problems = []
    for index, block in enumerate(system):
        where = f"system.{index}"
        if not isinstance(block, dict) or block.get("type") != "text":
            problems.append(f"{where}: must be a text block")
            continue
        problems.extend(_check_block_keys(where, block))
        if not isinstance(block.get("text"), str) or not block["text"].strip():
            problems.append(f"{where}: text content blocks must contain non-whitespace text")
    return problems


def _check_tools(tools: Any) -> list[str]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        return ["tools: must be a list"]
    problems = []
    names: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"tools.{index}"
        if not isinstance(tool, dict):
            problems.append(f"{where}: must be an object")
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}.name: Field required")
        elif name in names:
            problems.append(f"{where}: tool names must be unique ({name})")
        else:
            names.add(name)
        if "type" not in tool or tool.get("type") == "custom":  # a client tool
            schema = tool.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                problems.append(f"{where}.input_schema: must be a JSON schema of type object")
    return problems


def _check_block_keys(where: str, block: Mapping[str, Any]) -> list[str]:
    allowed = _BLOCK_KEYS.get(str(block.get("type")))
    if allowed is None:
        return []
    return [
        f"{where}.{key}: Extra inputs are not permitted" for key in sorted(set(block) - allowed)
    ]


def _check_messages(messages: Any) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    problems: list[str] = []
    seen_tool_ids: set[str] = set()
    seen_server_ids: set[str] = set()
    previous_tool_ids: list[str] = []  # tool_use ids of the previous (assistant) message
    previous_role: str | None = None
    after_summary = False  # two assistant messages in a row may follow an on-demand summary
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, dict):
            problems.append(f"{where}: must be an object")
            previous_tool_ids, previous_role = [], None
            continue
        role = message.get("role")
        if role == "system":  # mid-conversation system messages: see system_messages.py
            continue
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: must be 'user', 'assistant' or 'system'")
        if index == 0 and role != "user" and not _opens_with_compaction(message):
            problems.append(f"{where}: the first message must use the 'user' role")
        if previous_role is not None and role == previous_role and not after_summary:
            problems.append(f"{where}: roles must alternate between 'user' and 'assistant'")
        after_summary = index == 0 and _opens_with_compaction(message)
        for key in sorted(set(message) - {"role", "content"}):
            problems.append(f"{where}.{key}: Extra inputs are not permitted")
        blocks = _content_blocks(message.get("content"))
        if blocks is None:
            problems.append(f"{where}.content: must be a string or a list of content blocks")
            blocks = []
        elif not blocks:
            problems.append(f"{where}: all messages must have non-empty content")
        tool_use_ids: list[str] = []
        tool_result_ids: list[str] = []
        open_server_ids: list[str] = []  # server_tool_use ids of this message not answered yet
        seen_other_block = False
        for block_index, block in enumerate(blocks):
            at = f"{where}.content.{block_index}"
            if not isinstance(block, dict):
                problems.append(f"{at}: must be an object")
                continue
            kind = block.get("type")
            if kind not in _BLOCK_KEYS and kind not in _OTHER_BLOCK_TYPES:
                problems.append(f"{at}: unknown content block type {kind!r}")
                continue
            problems.extend(_check_block_keys(at, block))
            problems.extend(_check_block_content(at, block))
            opening = index == 0 and block_index == 0 and kind == "compaction"  # on-demand
            if role == "user" and kind in _ASSISTANT_BLOCKS - _USER_BLOCKS and not opening:
                problems.append(f"{at}: {kind} blocks are only allowed in assistant messages")
            if role == "assistant" and kind in _USER_BLOCKS - _ASSISTANT_BLOCKS:
                problems.append(f"{at}: {kind} blocks are only allowed in user messages")
            if kind == "text":
                text = block.get("text")
                if not isinstance(text, str) or not text.strip():
                    problems.append(f"{at}: text content blocks must contain non-whitespace text")
            elif kind == "tool_use":
                tool_id = block.get("id")
                if not isinstance(tool_id, str) or not tool_id:
                    problems.append(f"{at}.id: Field required")
                else:
                    if tool_id in seen_tool_ids:
                        problems.append(f"{at}: tool_use ids must be unique ({tool_id})")
                    seen_tool_ids.add(tool_id)
                    tool_use_ids.append(tool_id)  # still paired with its result below
                if not isinstance(block.get("name"), str) or not block.get("name"):
                    problems.append(f"{at}.name: Field required")
                if not isinstance(block.get("input"), dict):
                    problems.append(f"{at}.input: must be an object")
            elif kind == "tool_result":
                if seen_other_block:
                    problems.append(f"{at}: tool_result blocks must come first in the user message")
                tool_id = block.get("tool_use_id")
                if not isinstance(tool_id, str) or not tool_id:
                    problems.append(f"{at}.tool_use_id: Field required")
                else:
                    tool_result_ids.append(tool_id)
                problems.extend(_check_tool_result_content(at, block.get("content")))
            elif kind == "thinking" and not isinstance(block.get("signature"), str):
                problems.append(f"{at}.signature: Field required")
            elif kind == "server_tool_use":
                server_id = block.get("id")
                if not isinstance(server_id, str) or not server_id:
                    problems.append(f"{at}.id: Field required")
                elif server_id in seen_server_ids:
                    problems.append(f"{at}: server_tool_use ids must be unique ({server_id})")
                else:
                    seen_server_ids.add(server_id)
                    open_server_ids.append(server_id)
            elif kind in _SERVER_RESULT_TYPES:
                answered = block.get("tool_use_id")
                if answered in open_server_ids:
                    open_server_ids.remove(answered)
                else:
                    problems.append(
                        f"{at}: {kind} block {answered!r} does not follow its server_tool_use "
                        "block in the same message"
                    )
            if kind != "tool_result":
                seen_other_block = True
        if open_server_ids and index != len(messages) - 1:  # a paused turn may end so
            problems.append(
                f"{where}: server_tool_use ids were found without a corresponding result block: "
                f"{', '.join(open_server_ids)}"
            )
        # Pairing: every tool_use of the previous message answered here, nothing answered twice,
        # nothing answered that was not asked.
        if previous_tool_ids:
            missing = [tid for tid in previous_tool_ids if tid not in tool_result_ids]
            if missing:
                problems.append(
                    f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message."
                )
        for tid in tool_result_ids:
            if tid not in previous_tool_ids:
                problems.append(
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the "
                    "previous message."
                )
        if len(set(tool_result_ids)) != len(tool_result_ids):
            problems.append(f"{where}: a tool_use is answered by more than one tool_result")
        previous_tool_ids = tool_use_ids if role == "assistant" else []
        previous_role = role if isinstance(role, str) else None
    if previous_tool_ids:
        problems.append(
            f"messages.{len(messages) - 1}: the final assistant message has `tool_use` blocks "
            "without `tool_result` blocks after them"
        )
    return problems


def _opens_with_compaction(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else None
    return isinstance(first, dict) and first.get("type") == "compaction"


def _check_block_content(at: str, block: Mapping[str, Any]) -> list[str]:
    """Rules on one block's own fields (sources, citations, server tool payloads)."""
    kind = block.get("type")
    if kind == "text":
        return _check_citations(at, block.get("citations"))
    if kind == "image":
        return _check_image_source(at, block.get("source"))
    if kind == "document":
        return _check_document_source(at, block.get("source"))
    if kind == "server_tool_use":
        problems = []
        if not isinstance(block.get("name"), str) or not block.get("name"):
            problems.append(f"{at}.name: Field required")
        if not isinstance(block.get("input"), dict):
            problems.append(f"{at}.input: must be an object")
        return problems
    if kind == "web_search_tool_result":
        return _check_web_search_content(at, block.get("content"))
    return []


def _check_citations(at: str, citations: Any) -> list[str]:
    if citations is None:
        return []
    if not isinstance(citations, list):
        return [f"{at}.citations: must be a list"]
    problems = []
    for index, citation in enumerate(citations):
        where = f"{at}.citations.{index}"
        if not isinstance(citation, dict) or citation.get("type") not in _CITATION_TYPES:
            problems.append(f"{where}: unknown citation type")
            continue
        if citation.get("type") == "web_search_result_location":
            for key in ("url", "cited_text", "encrypted_index"):
                if not isinstance(citation.get(key), str):
                    problems.append(f"{where}.{key}: Field required")
            extra = set(citation) - {"type", "url", "title", "cited_text", "encrypted_index"}
            problems.extend(f"{where}.{key}: Extra inputs are not permitted" for key in extra)
    return problems


def _check_image_source(at: str, source: Any) -> list[str]:
    if not isinstance(source, dict):
        return [f"{at}.source: Field required"]
    if source.get("type") == "url":
        return [] if isinstance(source.get("url"), str) else [f"{at}.source.url: Field required"]
    if source.get("type") != "base64":
        return [f"{at}.source.type: must be 'base64' or 'url'"]
    media_type = source.get("media_type")
    if media_type not in IMAGE_MEDIA_TYPES:
        return [f"{at}.source.media_type: must be one of {', '.join(sorted(IMAGE_MEDIA_TYPES))}"]
    data = decode_base64(source.get("data"))
    if data is None:
        return [f"{at}.source.data: invalid base64 data"]
    info = sniff_image(data)
    if info is None:
        return [f"{at}: Could not process image"]
    if info.media_type != media_type:
        return [f"{at}: Image does not match the provided media type {media_type}"]
    return []


def _check_document_source(at: str, source: Any) -> list[str]:
    if not isinstance(source, dict):
        return [f"{at}.source: Field required"]
    kind = source.get("type")
    if kind == "base64":
        if source.get("media_type") != "application/pdf":
            return [f"{at}.source.media_type: must be 'application/pdf'"]
        data = decode_base64(source.get("data"))
        if data is None:
            return [f"{at}.source.data: invalid base64 data"]
        return [] if pdf_pages(data) else [f"{at}: The PDF specified was not valid"]
    if kind == "text":
        ok = source.get("media_type") == "text/plain" and isinstance(source.get("data"), str)
        return [] if ok else [f"{at}.source: a text source needs media_type text/plain and data"]
    if kind == "content":
        content = source.get("content")
        return [] if isinstance(content, str | list) else [f"{at}.source.content: Field required"]
    if kind == "url":
        return [] if isinstance(source.get("url"), str) else [f"{at}.source.url: Field required"]
    return [f"{at}.source.type: unknown document source type {kind!r}"]


def _check_web_search_content(at: str, content: Any) -> list[str]:
    if isinstance(content, dict):  # an error result
        if content.get("type") != "web_search_tool_result_error":
            return [f"{at}.content: must be a list of results or an error object"]
        return []
    if not isinstance(content, list):
        return [f"{at}.content: must be a list of results or an error object"]
    problems = []
    for index, result in enumerate(content):
        where = f"{at}.content.{index}"
        if not isinstance(result, dict) or result.get("type") != "web_search_result":
            problems.append(f"{where}: must be a web_search_result")
            continue
        for key in ("url", "title", "encrypted_content"):
            if not isinstance(result.get(key), str):
                problems.append(f"{where}.{key}: Field required")
        extra = set(result) - {"type", "url", "title", "encrypted_content", "page_age"}
        problems.extend(f"{where}.{key}: Extra inputs are not permitted" for key in sorted(extra))
    return problems


def _content_blocks(content: Any) -> list[Any] | None:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return content
    return None


def _check_tool_result_content(at: str, content: Any) -> list[str]:
    if content is None or isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"{at}.content: must be a string or a list of blocks"]
    problems = []
    for index, block in enumerate(content):
        inner = f"{at}.content.{index}"
        if not isinstance(block, dict) or block.get("type") not in (
            "text", "image", "document", "search_result"
        ):  # fmt: skip
            problems.append(f"{inner}: tool_result content must be text, image or document blocks")
            continue
        problems.extend(_check_block_keys(inner, block))
        problems.extend(_check_block_content(inner, block))
        if block.get("type") == "text" and not str(block.get("text") or "").strip():
            problems.append(f"{inner}: text content blocks must contain non-whitespace text")
    return problems
