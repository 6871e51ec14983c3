"""pydantic-ai: agentloop's compaction as a capability of an ``Agent`` on an Anthropic model.

    pip install "agentloop[pydantic-ai]"

.. code-block:: python

    agent = Agent(AnthropicModel("claude-sonnet-5-5"), capabilities=[Compaction(store=store)])

The capability runs in ``before_model_request``, once per request step (a safe boundary: every
tool call of the previous response has its return), as pydantic-ai's own history processors do:
it measures the context with the usage the model reported for the last response and at the
trigger compacts with agentloop's strategies, replacing the run's message history (kept for
every later step and run) with the compacted one, tool calls beside their returns. Each
conversation is a lineage of sessions in the store; the newest request's ``metadata`` carries
the current session id, so a ``message_history`` passed back to the next run continues it.
The summaries are written by the agent's own Anthropic client.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import Sequence
from typing import Any

import anthropic
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BinaryContent,
    CompactionPart,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.anthropic import AnthropicModel as PydanticAnthropicModel
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage

from agentloop import (
    AnthropicModel,
    AsyncModel,
    CompactionSettings,
    CompactionTransition,
    ConfigurationError,
    Message,
    Model,
    PreservedStateHook,
    ToolFacts,
    Usage,
)
from agentloop._sessions import SessionStore
from agentloop.integrations._engine import Engine, Group, Mirror, ModelFacts, Role, first_message

__all__ = ["SESSION_KEY", "Compaction"]

SESSION_KEY = "agentloop_session_id"
"""The key, in the newest request's ``metadata``, of the conversation's current session."""


class Compaction(AbstractCapability[Any]):
    """Compacts a pydantic-ai ``Agent``'s conversation with agentloop at the trigger.

    ``settings`` (threshold, strategy, standing instructions...), ``context_window`` (default:
    the model's profile, else agentloop's table), ``hooks`` (preserved state) and
    ``tool_facts`` (what each tool call did) are those of
    :class:`~agentloop.ConversationCompacter`; the model name comes from the agent's model.
    ``store`` keeps the sessions (None: compaction only); ``session_id`` continues a stored
    conversation at its newest descendant (a run without its messages gets them first).
    ``summarizer`` replaces the default (the agent's own Anthropic client).
    """

    def __init__(
        self,
        *,
        settings: CompactionSettings | None = None,
        context_window: int | None = None,
        store: SessionStore | None = None,
        session_id: str | None = None,
        workspace: str | None = None,
        title: str | None = None,
        summarizer: Model | AsyncModel | None = None,
        hooks: Sequence[PreservedStateHook] = (),
        tool_facts: ToolFacts | None = None,
    ) -> None:
        self.engine = Engine(
            settings=settings,
            context_window=context_window,
            summarizer=summarizer,
            hooks=hooks,
            store=store,
            session_id=session_id,
            workspace=workspace,
            title=title,
            tool_facts=tool_facts,
        )
        self._mirror: Mirror[ModelMessage] = Mirror(_role, _to_message, _alone)
        self.session_id: str | None = session_id
        """The current session of the conversation that made the latest request."""

    @property
    def transitions(self) -> list[CompactionTransition]:
        """Every compaction so far, oldest first."""
        return self.engine.transitions

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a store and a summarizer: not for agent specs

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        model = request_context.model
        if self.engine.summarizer is None and not isinstance(model, PydanticAnthropicModel):
            raise ConfigurationError(
                "Compaction summarizes with the agent's Anthropic model; give summarizer= for a "
                f"{type(model).__name__}"
            )
        history = list(request_context.messages)
        conversation = self.engine.conversation(_session_of(history))
        settings = request_context.model_settings or {}
        max_tokens = settings.get("max_tokens")
        facts = ModelFacts(
            model.model_name,
            getattr(model, "context_window", None),
            max_tokens if isinstance(max_tokens, int) else None,
        )
        conversation.ready(facts, lambda: _summarizer(model))
        compacter = conversation.compacter
        assert compacter is not None
        groups = self._mirror.groups(history)
        messages = [group.message for group in groups]
        replaced: list[ModelMessage] | None = None
        resumed = conversation.reconcile(messages)
        if resumed is not None:  # a resumed conversation: its stored history goes first
            stored = resumed[: len(resumed) - len(messages)]
            replaced = [*self._to_pydantic(stored, [], facts.name), *history]
            groups = self._mirror.groups(replaced)
            messages = [group.message for group in groups]
            conversation.reconcile(messages)
        parameters = request_context.model_request_parameters
        # What pydantic-ai sends as ``system``: the instructions and the opening system prompt
        # parts of the first request (a system prompt part later is a message of its own).
        opening = history[0].parts if history and isinstance(history[0], ModelRequest) else ()
        leading: list[str] = []
        for part in opening:
            if not isinstance(part, SystemPromptPart):
                break
            leading.append(part.content)
        system = "\n\n".join(
            [part.content for part in parameters.instruction_parts or ()] + leading
        )
        tools = [
            {
                "name": tool.name,
                "description": tool.description or "",
                "input_schema": tool.parameters_json_schema,
            }
            for tool in [*parameters.function_tools, *parameters.output_tools]
        ]
        conversation.teach(messages, system, tools)
        await asyncio.to_thread(conversation.sync, messages)
        transition = await compacter.acompact_and_transition(
            conversation.session_id, messages, system=system, tools=tools
        )
        if transition is not None:
            replaced = self._to_pydantic(transition.compacted_messages, groups, facts.name)
            await asyncio.to_thread(conversation.commit, messages, transition)
        if replaced is not None:
            request_context.messages = list(replaced)
            ctx.messages[:] = replaced
        _mark(request_context.messages, conversation.session_id)
        self.session_id = conversation.session_id
        return request_context

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        """The run's last response is stored too."""
        history: list[ModelMessage] = result.all_messages()
        key = _session_of(history)
        if key is not None and self.engine.store is not None:
            conversation = self.engine.conversation(key)
            messages = [group.message for group in self._mirror.groups(history)]
            await asyncio.to_thread(conversation.sync, messages)
        return result

    def _to_pydantic(
        self, messages: Sequence[Message], before: Sequence[Group[ModelMessage]], model: str
    ) -> list[ModelMessage]:
        """``messages`` as pydantic-ai messages: one kept verbatim is the very objects it came
        from (a response without its old usage, which measured a larger context)."""
        kept = {id(group.message.content): group for group in before}
        names = {
            str(block["id"]): str(block.get("name", ""))
            for message in messages
            for block in message.tool_uses
        }
        out: list[ModelMessage] = []
        for message in messages:
            group = kept.get(id(message.content))
            items: list[ModelMessage]
            if group is not None and group.message.content is message.content:
                items = [_without_usage(item) for item in group.sources]
            else:
                items = [_from_message(message, names, model)]
            self._mirror.remember(items, message)
            out.extend(items)
        return out


def _session_of(messages: Sequence[ModelMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and message.metadata:
            value = message.metadata.get(SESSION_KEY)
            if isinstance(value, str):
                return value
    return None


def _mark(messages: Sequence[ModelMessage], session_id: str) -> None:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            message.metadata = {**(message.metadata or {}), SESSION_KEY: session_id}
            return


def _summarizer(model: object) -> AnthropicModel:
    """agentloop's adapter on the agent's own Anthropic client (a sync twin counts tokens)."""
    assert isinstance(model, PydanticAnthropicModel)
    client = model.client
    if not isinstance(client, anthropic.AsyncAnthropic):
        raise ConfigurationError(
            f"Compaction summarizes through an AsyncAnthropic client, not a "
            f"{type(client).__name__}: give summarizer="
        )
    twin = anthropic.Anthropic(
        api_key=client.api_key,
        auth_token=client.auth_token,
        base_url=client.base_url,
        max_retries=client.max_retries,
        timeout=client.timeout,
    )
    return AnthropicModel(twin, async_client=client)


# -- pydantic-ai → Messages API -------------------------------------------------------------


def _role(message: ModelMessage) -> Role | None:
    if isinstance(message, ModelResponse):
        return "assistant"
    if all(isinstance(part, SystemPromptPart) for part in message.parts):
        return "system"  # the opening one (the system prompt) is left out by the mirror
    return "user"


def _alone(message: ModelMessage) -> bool:
    """A response holding only the API's summary opens the history on its own."""
    return (
        isinstance(message, ModelResponse)
        and bool(message.parts)
        and all(isinstance(part, CompactionPart) for part in message.parts)
    )


def _to_message(sources: Sequence[ModelMessage], first: bool) -> Message:
    if _role(sources[0]) == "system":
        texts = [
            {"type": "text", "text": part.content}
            for source in sources
            if isinstance(source, ModelRequest)
            for part in source.parts
            if isinstance(part, SystemPromptPart) and part.content.strip()
        ]
        return Message.system(texts or [_PLACEHOLDER])
    if isinstance(sources[0], ModelResponse):
        blocks: list[dict[str, Any]] = []
        usage: Usage | None = None
        for source in sources:
            assert isinstance(source, ModelResponse)
            blocks.extend(_response_blocks(source.parts))
            usage = _usage(source.usage) or usage
        return Message.assistant(blocks or [_PLACEHOLDER], usage=usage)
    results: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for source in sources:
        assert isinstance(source, ModelRequest)
        for part in source.parts:
            if isinstance(part, ToolReturnPart):
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": part.tool_call_id,
                        "content": part.model_response_str(),
                    }
                )
            elif isinstance(part, RetryPromptPart) and part.tool_name is not None:
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": part.tool_call_id,
                        "content": part.model_response(),
                        "is_error": True,
                    }
                )
            elif isinstance(part, RetryPromptPart):
                rest.append({"type": "text", "text": part.model_response()})
            elif isinstance(part, UserPromptPart):
                rest.extend(_user_blocks(part.content))
    param: dict[str, Any] = {"role": "user", "content": [*results, *rest] or [_PLACEHOLDER]}
    return first_message(param) if first else Message.from_param(param)


_PLACEHOLDER: dict[str, Any] = {"type": "text", "text": "(empty)"}
_PROVIDER = "anthropic"


def _user_blocks(content: str | Sequence[Any]) -> list[dict[str, Any]]:
    items = [content] if isinstance(content, str) else content
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            if item.strip():
                out.append({"type": "text", "text": item})
        elif isinstance(item, BinaryContent) and item.is_image:
            data = base64.b64encode(item.data).decode("ascii")
            source = {"type": "base64", "media_type": item.media_type, "data": data}
            out.append({"type": "image", "source": source})
        elif isinstance(item, ImageUrl):
            out.append({"type": "image", "source": {"type": "url", "url": item.url}})
        else:
            out.append({"type": "text", "text": f"[{type(item).__name__}]"})
    return out


def _response_blocks(parts: Sequence[ModelResponsePart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.content.strip():
                out.append({"type": "text", "text": part.content})
        elif isinstance(part, ToolCallPart):
            out.append(
                {
                    "type": "tool_use",
                    "id": part.tool_call_id,
                    "name": part.tool_name,
                    "input": part.args_as_dict(),
                }
            )
        elif isinstance(part, ThinkingPart) and part.signature:
            # As pydantic-ai sends it back: verbatim, redacted thinking as itself.
            if part.id in _REDACTED_IDS:
                out.append({"type": "redacted_thinking", "data": part.signature})
            else:
                out.append(
                    {"type": "thinking", "thinking": part.content, "signature": part.signature}
                )
        elif isinstance(part, CompactionPart) and part.provider_name is not None:
            details = part.provider_details or {}
            block: dict[str, Any] = {"type": "compaction", "content": part.content}
            for key in ("signature", "encrypted_content"):
                if details.get(key) is not None:
                    block[key] = details[key]
            out.append(block)
    return out


_REDACTED_IDS = frozenset({"redacted_thinking", "redacted_content"})


def _usage(usage: RequestUsage) -> Usage | None:
    """The usage the API reported (pydantic-ai keeps Anthropic's figures in ``details``)."""
    details = usage.details or {}
    if "input_tokens" in details:
        return Usage(
            input_tokens=int(details.get("input_tokens", 0)),
            output_tokens=int(details.get("output_tokens", 0)),
            cache_creation_input_tokens=int(details.get("cache_creation_input_tokens", 0)),
            cache_read_input_tokens=int(details.get("cache_read_input_tokens", 0)),
        )
    if not usage.input_tokens and not usage.output_tokens:
        return None  # none reported (or dropped with a compaction)
    return Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)


# -- Messages API → pydantic-ai -------------------------------------------------------------


def _from_message(message: Message, names: dict[str, str], model: str) -> ModelMessage:
    if message.role == "system":
        return ModelRequest(parts=[SystemPromptPart(content=message.text)])
    if message.role == "assistant":
        parts: list[ModelResponsePart] = []
        for block in message.content:
            kind = block.get("type")
            if kind == "text":
                parts.append(TextPart(content=str(block.get("text", ""))))
            elif kind == "tool_use":
                parts.append(
                    ToolCallPart(
                        tool_name=str(block["name"]),
                        args=dict(block.get("input") or {}),
                        tool_call_id=str(block["id"]),
                    )
                )
            elif kind == "thinking":
                parts.append(
                    ThinkingPart(
                        content=str(block.get("thinking", "")),
                        signature=str(block.get("signature", "")) or None,
                        provider_name=_PROVIDER,
                    )
                )
            elif kind == "redacted_thinking":
                parts.append(
                    ThinkingPart(
                        content="",
                        id="redacted_thinking",
                        signature=str(block.get("data", "")),
                        provider_name=_PROVIDER,
                    )
                )
            elif kind == "compaction":
                details = {
                    key: block[key]
                    for key in ("signature", "encrypted_content")
                    if block.get(key) is not None
                }
                parts.append(
                    CompactionPart(
                        content=block.get("content"),
                        provider_name=_PROVIDER,
                        provider_details=details or None,
                    )
                )
        return ModelResponse(parts=parts, model_name=model, provider_name=_PROVIDER)
    request_parts: list[ModelRequestPart] = []
    texts: list[str] = []
    for block in message.content:
        kind = block.get("type")
        if kind == "tool_result":
            tool_id = str(block["tool_use_id"])
            content = _result_text(block.get("content", ""))
            name = names.get(tool_id, "tool")
            if block.get("is_error"):
                request_parts.append(
                    RetryPromptPart(content=content, tool_name=name, tool_call_id=tool_id)
                )
            else:
                request_parts.append(
                    ToolReturnPart(tool_name=name, content=content, tool_call_id=tool_id)
                )
        elif kind == "text":
            texts.append(str(block.get("text", "")))
        else:
            texts.append(f"[{kind}]")
    if texts:
        request_parts.append(UserPromptPart(content=texts[0] if len(texts) == 1 else texts))
    return ModelRequest(parts=request_parts)


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return str(content)


def _without_usage(message: ModelMessage) -> ModelMessage:
    if isinstance(message, ModelResponse):
        return dataclasses.replace(message, usage=RequestUsage())
    return message
