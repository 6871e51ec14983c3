"""LangChain v1: agentloop's compaction as an ``AgentMiddleware`` for ``create_agent``.

    pip install "agentloop[langchain]"

.. code-block:: python

    agent = create_agent(ChatAnthropic(model="claude-sonnet-5-5"), tools=[...],
                         middleware=[CompactionMiddleware(store=open_store(path))])

Before every model call (a safe boundary: the tool node has answered every call) the
middleware measures the context with the usage ``ChatAnthropic`` reported for the last reply,
and at the trigger compacts with agentloop's strategies: the request goes out compacted and the
graph state's messages are replaced by the compacted history (tool calls kept beside their
results). Each conversation (thread) is a lineage of sessions in the store: the parent keeps
every message, the child continues; the state's ``agentloop_session_id`` says where. The
summaries are written by the agent's own Claude model (same key, base URL and retries).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.chat_models import convert_to_anthropic_tool
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from agentloop import (
    ON_DEMAND_COMPACTION_BETA,
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
from agentloop.integrations._engine import (
    Conversation,
    Engine,
    Group,
    Mirror,
    ModelFacts,
    Role,
    first_message,
)

__all__ = ["SESSION_KEY", "CompactionMiddleware", "CompactionState"]

SESSION_KEY = "agentloop_session_id"
"""The state key holding the conversation's current session in the store."""


class CompactionState(AgentState[Any]):
    """The agent's state, plus where its conversation continues in the sessions store."""

    agentloop_session_id: NotRequired[str]


@dataclass
class _Step:
    conversation: Conversation
    groups: list[Group[BaseMessage]]
    messages: list[Message]
    system: str
    tools: list[dict[str, Any]]
    replaced: list[AnyMessage] | None
    """The state's new messages (a resumed conversation), None: unchanged."""


class CompactionMiddleware(AgentMiddleware[CompactionState, Any, Any]):
    """Compacts a ``create_agent`` conversation with agentloop when it reaches the trigger.

    ``settings`` (threshold, strategy, standing instructions...), ``context_window`` (default:
    the model's profile, else agentloop's table), ``hooks`` (preserved state) and
    ``tool_facts`` (what each tool call did: the recognizers that ship, plus your tools') are
    those of :class:`~agentloop.ConversationCompacter`; the model name and reply size come from the
    agent's ``ChatAnthropic``. ``store`` keeps the sessions (None: compaction only);
    ``session_id`` continues a stored conversation at its newest descendant (a state without
    messages of it gets them first). ``summarizer`` replaces the default (the agent's model).
    """

    state_schema = CompactionState

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
        super().__init__()
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
        self._mirror: Mirror[BaseMessage] = Mirror(_role, _to_message, _alone)
        self._tools: dict[int, tuple[object, dict[str, Any]]] = {}
        self.session_id: str | None = session_id
        """The current session of the conversation that made the latest request."""

    @property
    def transitions(self) -> list[CompactionTransition]:
        """Every compaction so far, oldest first."""
        return self.engine.transitions

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        step = self._prepare(request)
        compacter = step.conversation.compacter
        assert compacter is not None
        transition = compacter.compact_and_transition(
            step.conversation.session_id, step.messages, system=step.system, tools=step.tools
        )
        return self._finish(step, transition, request, handler)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        # The store's writes and the local counting block: a worker thread does them.
        step = await asyncio.to_thread(self._prepare, request)
        compacter = step.conversation.compacter
        assert compacter is not None
        transition = await compacter.acompact_and_transition(
            step.conversation.session_id, step.messages, system=step.system, tools=step.tools
        )
        compacted = self._compacted(step, transition)
        response = await handler(_sent(request, compacted))
        if transition is not None:
            await asyncio.to_thread(step.conversation.commit, step.messages, transition)
        return self._result(step, compacted, response)

    def after_agent(self, state: CompactionState, runtime: Any) -> dict[str, Any] | None:
        """The run's last reply is stored too."""
        key = _session_of(state)
        if key is None or self.engine.store is None:
            return None
        conversation = self.engine.conversation(key)
        groups = self._mirror.groups(state["messages"])
        conversation.sync([g.message for g in groups])
        return None

    async def aafter_agent(self, state: CompactionState, runtime: Any) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_agent, state, runtime)

    # -- one model call ----------------------------------------------------------------------

    def _prepare(self, request: ModelRequest[Any]) -> _Step:
        model = request.model
        if self.engine.summarizer is None and not isinstance(model, ChatAnthropic):
            raise ConfigurationError(
                f"CompactionMiddleware summarizes with the agent's ChatAnthropic model; give "
                f"summarizer= for a {type(model).__name__}"
            )
        conversation = self.engine.conversation(_session_of(request.state))
        conversation.ready(_facts(model), lambda: _summarizer(model))
        groups = self._mirror.groups(request.messages)
        messages = [group.message for group in groups]
        replaced = None
        resumed = conversation.reconcile(messages)
        if resumed is not None:  # a resumed conversation: its stored history goes first
            stored = resumed[: len(resumed) - len(messages)]
            replaced = [*self._to_langchain(stored, []), *request.messages]
            groups = self._mirror.groups(replaced)
            messages = [group.message for group in groups]
            conversation.reconcile(messages)
        system = _system_text(request.system_message)
        tools = [self._tool(tool) for tool in request.tools]
        conversation.teach(messages, system, tools)
        conversation.sync(messages)
        return _Step(conversation, groups, messages, system, tools, replaced)

    def _finish(
        self,
        step: _Step,
        transition: CompactionTransition | None,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        compacted = self._compacted(step, transition)
        response = handler(_sent(request, compacted))
        # Committed once the compacted request was answered: a failed call leaves the state,
        # and so the store, as they were.
        if transition is not None:
            step.conversation.commit(step.messages, transition)
        return self._result(step, compacted, response)

    def _compacted(
        self, step: _Step, transition: CompactionTransition | None
    ) -> list[AnyMessage] | None:
        if transition is None:
            if step.replaced is None:
                return None
            return step.replaced
        return self._to_langchain(transition.compacted_messages, step.groups)

    def _result(
        self, step: _Step, messages: list[AnyMessage] | None, response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        session_id = step.conversation.session_id
        self.session_id = session_id
        update: dict[str, Any] = {SESSION_KEY: session_id}
        if messages is not None:
            # The state's history becomes what was sent, then the reply.
            update["messages"] = [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                *messages,
                *response.result,
            ]
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def _to_langchain(
        self, messages: Sequence[Message], before: Sequence[Group[BaseMessage]]
    ) -> list[AnyMessage]:
        """``messages`` as LangChain messages: a message kept verbatim is the very objects it
        came from (a reply without its old usage, which measured a larger context)."""
        kept = {id(group.message.content): group for group in before}
        out: list[AnyMessage] = []
        for message in messages:
            group = kept.get(id(message.content))
            items: list[AnyMessage]
            if group is not None and group.message.content is message.content:
                items = [_without_usage(item) for item in group.sources]
            else:
                items = _from_message(message)
            self._mirror.remember(items, message)
            out.extend(items)
        return out

    def _tool(self, tool: BaseTool | dict[str, Any]) -> dict[str, Any]:
        cached = self._tools.get(id(tool))
        if cached is None or cached[0] is not tool:
            cached = (tool, _tool_definition(tool))
            self._tools[id(tool)] = cached
        return cached[1]


# -- LangChain → Messages API ---------------------------------------------------------------


def _session_of(state: Mapping[str, Any]) -> str | None:
    value = state.get(SESSION_KEY)
    return value if isinstance(value, str) else None


def _role(message: BaseMessage) -> Role | None:
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return "system"  # in the state's messages: one of the conversation
    return "user"


def _alone(message: BaseMessage) -> bool:
    """An assistant message holding only the API's summary opens the history on its own."""
    content = message.content
    return (
        isinstance(message, AIMessage)
        and isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == COMPACTION for b in content)
    )


def _sent(request: ModelRequest[Any], compacted: list[AnyMessage] | None) -> ModelRequest[Any]:
    """The request as it goes out: the compacted history, and the API's compaction beta on
    every request whose history holds one of its summary blocks (LangChain does not add it)."""
    messages = request.messages if compacted is None else compacted
    if not any(_alone(m) for m in messages):
        return request if compacted is None else request.override(messages=compacted)
    settings = dict(request.model_settings)
    model_betas = getattr(request.model, "betas", None) or []
    betas = [*model_betas, *(settings.get("betas") or [])]
    settings["betas"] = [*dict.fromkeys([*betas, ON_DEMAND_COMPACTION_BETA])]
    return request.override(messages=messages, model_settings=settings)


def _to_message(sources: Sequence[BaseMessage], first: bool) -> Message:
    if isinstance(sources[0], SystemMessage):
        texts = [b for source in sources for b in _blocks(source.content) if b["type"] == "text"]
        return Message.system(texts or [_PLACEHOLDER])
    if isinstance(sources[0], AIMessage):
        blocks: list[dict[str, Any]] = []
        usage: Usage | None = None
        for source in sources:
            assert isinstance(source, AIMessage)
            blocks.extend(_ai_blocks(source))
            usage = _usage(source) or usage
        return Message.assistant(blocks or [_PLACEHOLDER], usage=usage)
    results: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for source in sources:
        if isinstance(source, ToolMessage):
            results.append(_tool_result(source))
        else:
            rest.extend(_blocks(source.content))
    param: dict[str, Any] = {"role": "user", "content": [*results, *rest] or [_PLACEHOLDER]}
    return first_message(param) if first else Message.from_param(param)


_PLACEHOLDER: dict[str, Any] = {"type": "text", "text": "(empty)"}
_THINKING_FIELDS = {
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
}
COMPACTION = "compaction"


def _blocks(content: str | list[str | dict[Any, Any]]) -> list[dict[str, Any]]:
    items = [content] if isinstance(content, str) else content
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            if item.strip():
                out.append({"type": "text", "text": item})
            continue
        kind = item.get("type")
        if kind == "text":
            if str(item.get("text", "")).strip():
                out.append({"type": "text", "text": str(item["text"])})
        elif kind == "image" and "source" not in item:
            out.append(_image(item))
        elif kind == "image_url":
            url = item.get("image_url")
            out.append(_image({"url": url.get("url") if isinstance(url, Mapping) else url}))
        else:
            out.append({k: v for k, v in item.items() if v is not None and k != "index"})
    return out


def _image(block: Mapping[str, Any]) -> dict[str, Any]:
    """A LangChain standard (or data URL) image block in the Messages API's shape."""
    url = str(block.get("url") or "")
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    if block.get("base64"):
        media_type = str(block.get("mime_type") or "image/png")
        source = {"type": "base64", "media_type": media_type, "data": block["base64"]}
        return {"type": "image", "source": source}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _ai_blocks(message: AIMessage) -> list[dict[str, Any]]:
    calls = {str(call["id"]): call for call in message.tool_calls if call.get("id")}
    content = message.content
    items = [content] if isinstance(content, str) else content
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, str):
            if item.strip():
                out.append({"type": "text", "text": item})
            continue
        kind = item.get("type")
        if kind == "text":
            if str(item.get("text", "")).strip():
                block: dict[str, Any] = {"type": "text", "text": str(item["text"])}
                if item.get("citations"):
                    block["citations"] = item["citations"]
                out.append(block)
        elif kind == "tool_use":
            tool_id = str(item.get("id", ""))
            seen.add(tool_id)
            call = calls.get(tool_id)
            tool_input = call["args"] if call is not None else item.get("input") or {}
            out.append(
                {"type": "tool_use", "id": tool_id, "name": item.get("name"), "input": tool_input}
            )
        elif kind in ("thinking", "redacted_thinking"):
            # Verbatim (empty text and all): its signature binds it to what came before it.
            fields = _THINKING_FIELDS[kind]
            kept = {k: v for k, v in item.items() if k in fields}
            if kind == "thinking":
                kept.setdefault("thinking", "")
            out.append(kept)
        elif kind in ("tool_call", "tool_call_chunk", "input_json_delta", "reasoning"):
            continue  # LangChain's own shapes: the tool calls come from ``tool_calls`` below
        else:
            out.append({k: v for k, v in item.items() if v is not None and k != "index"})
    for tool_id, call in calls.items():
        if tool_id not in seen:
            out.append(
                {"type": "tool_use", "id": tool_id, "name": call["name"], "input": call["args"]}
            )
    return out


def _usage(message: AIMessage) -> Usage | None:
    """The usage the API reported (``response_metadata``), else LangChain's summary of it."""
    raw = message.response_metadata.get("usage")
    if isinstance(raw, Mapping) and raw.get("input_tokens") is not None:
        return Usage(
            input_tokens=int(raw.get("input_tokens") or 0),
            output_tokens=int(raw.get("output_tokens") or 0),
            cache_creation_input_tokens=int(raw.get("cache_creation_input_tokens") or 0),
            cache_read_input_tokens=int(raw.get("cache_read_input_tokens") or 0),
        )
    summary = message.usage_metadata
    if summary is None:
        return None
    # LangChain's input_tokens already include the cache reads and writes.
    return Usage(input_tokens=summary["input_tokens"], output_tokens=summary["output_tokens"])


def _tool_result(message: ToolMessage) -> dict[str, Any]:
    content = message.content
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": content if isinstance(content, str) else _blocks(content),
    }
    if message.status == "error":
        block["is_error"] = True
    return block


def _system_text(system: SystemMessage | None) -> str:
    return "" if system is None else system.text


def _tool_definition(tool: BaseTool | dict[str, Any]) -> dict[str, Any]:
    if isinstance(tool, Mapping) and "type" in tool and "input_schema" not in tool:
        return dict(tool)  # a server tool (web search...): sent as it is
    return dict(convert_to_anthropic_tool(tool))


def _facts(model: object) -> ModelFacts:
    name = str(getattr(model, "model", None) or getattr(model, "model_name", "") or "unknown")
    profile = getattr(model, "profile", None) or {}
    window = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    output = getattr(model, "max_tokens", None)
    return ModelFacts(
        name=name,
        context_window=window if isinstance(window, int) else None,
        max_output_tokens=output if isinstance(output, int) else None,
    )


def _summarizer(model: object) -> AnthropicModel:
    """agentloop's adapter on the agent's own Anthropic settings (key, base URL, retries)."""
    import anthropic

    assert isinstance(model, ChatAnthropic)
    settings: dict[str, Any] = {
        "api_key": model.anthropic_api_key.get_secret_value() or None,
        "base_url": model.anthropic_api_url,
        "max_retries": model.max_retries,
        "default_headers": model.default_headers,
    }
    if model.default_request_timeout is None or model.default_request_timeout > 0:
        settings["timeout"] = model.default_request_timeout
    return AnthropicModel(
        anthropic.Anthropic(**settings), async_client=anthropic.AsyncAnthropic(**settings)
    )


# -- Messages API → LangChain ---------------------------------------------------------------


def _from_message(message: Message) -> list[AnyMessage]:
    if message.role == "system":
        return [SystemMessage(content=[dict(b) for b in message.content])]
    if message.role == "assistant":
        calls = [
            {"name": str(b["name"]), "args": dict(b.get("input") or {}), "id": str(b["id"])}
            for b in message.tool_uses
        ]
        return [AIMessage(content=[dict(b) for b in message.content], tool_calls=calls)]
    out: list[AnyMessage] = []
    results = message.tool_results
    for block in results:
        content: object = block.get("content", "")
        out.append(
            ToolMessage(
                content=content if isinstance(content, str | list) else str(content),
                tool_call_id=str(block["tool_use_id"]),
                status="error" if block.get("is_error") else "success",
            )
        )
    # a block of another kind never equals a tool result: what the user sent beside them
    rest: list[str | dict[Any, Any]] = [dict(b) for b in message.content if b not in results]
    if rest:
        out.append(HumanMessage(content=rest))
    return out


def _without_usage(message: BaseMessage) -> AnyMessage:
    if not isinstance(message, AIMessage):
        return cast(AnyMessage, message)
    metadata = {k: v for k, v in message.response_metadata.items() if k != "usage"}
    return message.model_copy(update={"usage_metadata": None, "response_metadata": metadata})
