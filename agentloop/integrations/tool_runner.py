"""The ``anthropic`` SDK's tool runner: agentloop's sessions, threshold and carried context.

.. code-block:: python

    compaction = RunnerCompaction(store=open_store(path), context_window=200_000)
    runner = client.beta.messages.tool_runner(..., betas=[ON_DEMAND_COMPACTION_BETA])
    for message in compaction.follow(runner):  # the runner's own items, unchanged
        ...

The runner keeps doing what it does (tools, threads, ``pause_turn``, streaming, its checks);
:meth:`RunnerCompaction.follow` watches it. After every reply it measures the context from the
API's usage (agentloop's window, threshold, reply reserve and circuit breaker, at the safe
boundary after the reply's tool results), stores every message, and at the trigger asks the
runner to compact with ``compact_before_next_turn()`` and agentloop's summary instructions.
When the runner yields the API's summary, the parent session keeps every message, the child
continues under a new id with the figures and their sources, and what agentloop carries (the
artifact ledger, preserved state, pinned and system messages, the latest request) goes in one
``role: "system"`` message after the next user turn (the tool results the runner appends),
once and byte-stable, so the thinking the runner keeps stays valid. Its only request of its own
is the free ``count_tokens`` measuring the child.

A runner built with :meth:`RunnerCompaction.history` (a stored session's newest descendant)
continues that session; its system prompt and tools must be those the session was stored
with (kept thinking is bound to them).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import anthropic

from agentloop import (
    ON_DEMAND_COMPACTION_BETA,
    CompactionDecision,
    CompactionSettings,
    CompactionTransition,
    ConfigurationError,
    LoopEvents,
    Message,
    ModelRequest,
    ModelResponse,
    PreservedStateHook,
    ToolFacts,
    Usage,
    as_messages,
    to_params,
)
from agentloop._sessions import SessionStore
from agentloop.integrations._engine import Conversation, Engine, ModelFacts

if TYPE_CHECKING:
    from anthropic.types.beta import BetaMessageParam

__all__ = ["PREFIX_KEY", "RunnerCompaction"]

PENDING_KEY = "runner_carried"
"""A session's metadata key for what its compaction carries while it waits for a user turn."""
PREFIX_KEY = "runner_prefix"
"""A session's metadata key for the runner's system prompt and tools as first sent."""


class RunnerCompaction:
    """agentloop around an ``anthropic`` tool runner (sync or async, streaming or not).

    ``settings`` (threshold, standing instructions...), ``context_window`` (default: agentloop's
    table for the runner's model), ``hooks`` (preserved state) and ``tool_facts`` (what each
    tool call did, for the ledger: the recognizers that ship, plus your tools') are those of
    :class:`~agentloop.ConversationCompacter`; ``store`` keeps the sessions (None: compaction
    only); ``session_id`` continues a stored conversation at its newest descendant;
    ``instructions`` are added to every summary's; ``events`` hear what an ``AgentLoop``'s
    would (``on_usage``, ``on_compaction_start``, ``on_transition``, ``on_compaction_skipped``,
    ``on_warning``).
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
        hooks: Sequence[PreservedStateHook] = (),
        instructions: str | None = None,
        events: LoopEvents | None = None,
        tool_facts: ToolFacts | None = None,
    ) -> None:
        self._counter = _Counter()
        self.engine = Engine(
            settings=settings,
            context_window=context_window,
            summarizer=self._counter,
            hooks=hooks,
            store=store,
            session_id=session_id,
            workspace=workspace,
            title=title,
            tool_facts=tool_facts,
        )
        self.instructions = instructions
        self.events = events or LoopEvents()
        self._conversation: Conversation | None = None

    @property
    def session_id(self) -> str:
        """The conversation's current session (a compaction moves it to the child)."""
        return self._current().session_id

    @property
    def transitions(self) -> list[CompactionTransition]:
        """Every compaction so far, oldest first."""
        return self.engine.transitions

    def history(self) -> list[BetaMessageParam]:
        """The current session's messages as ``messages=`` for a new runner (a resume: the
        newest descendant of ``session_id``), byte for byte as they were sent."""
        return [cast("BetaMessageParam", _param(m)) for m in self._current().stored()]

    def follow(self, runner: Any) -> Iterator[Any]:
        """The runner's items, unchanged; agentloop's work between them (see the module)."""
        watch = _Watch(self, runner)
        try:
            for item in runner:
                try:
                    yield item
                except GeneratorExit:
                    if not _is_stream(item):  # a stream left unread is not read here
                        watch.store(item)
                    raise
                message = item.get_final_message() if _is_stream(item) else item
                tools = watch.tool_response(message)
                watch.after(message, tools)
        finally:
            watch.close()

    async def afollow(self, runner: Any) -> AsyncIterator[Any]:
        """:meth:`follow` for the async runner (store and counting in a worker thread)."""
        watch = await asyncio.to_thread(_Watch, self, runner)
        try:
            async for item in runner:
                try:
                    yield item
                except GeneratorExit:
                    if not _is_stream(item):
                        await asyncio.to_thread(watch.store, item)
                    raise
                message = await item.get_final_message() if _is_stream(item) else item
                tools = None
                if watch.runs_tools(message):
                    tools = await runner.generate_tool_call_response()
                await asyncio.to_thread(watch.after, message, tools)
        finally:
            await asyncio.to_thread(watch.close)

    def _current(self) -> Conversation:
        if self._conversation is None:
            self._conversation = self.engine.conversation(None)
        return self._conversation


class _Watch:
    """One runner followed: its conversation, prefix and the history last measured."""

    def __init__(self, owner: RunnerCompaction, runner: Any) -> None:
        self.owner = owner
        self.runner = runner
        self.thread = runner._thread  # the runner's history; it has no public accessor
        params = runner._params
        self.model = str(params["model"])
        betas = [str(b) for b in params.get("betas") or ()]
        if ON_DEMAND_COMPACTION_BETA not in betas:
            raise ConfigurationError(
                "RunnerCompaction needs the runner built with "
                f'betas=["{ON_DEMAND_COMPACTION_BETA}"] (compact_before_next_turn() requires it)'
            )
        self.system_sent = _plain(params.get("system", ""))
        self.tools_sent = [_plain(tool) for tool in params.get("tools") or ()]
        self.system = _system_text(self.system_sent)
        self.conversation = owner._current()
        owner._counter.use(runner._client)
        self.conversation.ready(
            ModelFacts(self.model, None, int(params["max_tokens"])), _no_summarizer
        )
        compacter = self.conversation.compacter
        assert compacter is not None
        self.compacter = compacter
        self.usages: dict[int, Usage] = {}
        self.converted: dict[int, tuple[object, Message]] = {}
        self.parent: list[Message] = []
        self.decision: CompactionDecision | None = None
        self.prefix_kept = False
        self._check_prefix()
        history = self.history()
        resumed = self.conversation.reconcile(history)
        if resumed is not None:
            raise ConfigurationError(
                f"the runner's messages do not continue session {self.conversation.session_id}: "
                "build it with messages=compaction.history() (plus your new message)"
            )
        self.parent = history  # what a compaction asked for before any reply summarizes
        self._pending_from_store()
        if history and history[-1].role == "user":
            self._place_carried(None)

    # -- the runner's history as agentloop messages -------------------------------------------

    def history(self) -> list[Message]:
        """The thread's history now, each message converted once (a reply with its usage)."""
        out: list[Message] = []
        cache: dict[int, tuple[object, Message]] = {}
        for param in self.thread.messages:
            cached = self.converted.get(id(param))
            if cached is None or cached[0] is not param:
                cached = (param, self._convert(param, first=not out))
            cache[id(param)] = cached
            out.append(cached[1])
        self.converted = cache
        return out

    def _convert(self, param: Mapping[str, Any], *, first: bool) -> Message:
        content = param.get("content")
        blocks: Any = content if isinstance(content, str) else [_plain(b) for b in content or ()]
        plain: dict[str, Any] = {"role": param["role"], "content": blocks}
        if param["role"] == "assistant" and isinstance(content, list) and content:
            usage = self.usages.get(id(content[0]))
            if usage is not None:
                plain["usage"] = usage.to_dict()
        if first:
            return as_messages([plain])[0]
        message = Message.from_param(plain)
        usage = plain.get("usage")
        return message if usage is None else replace(message, usage=Usage.from_mapping(usage))

    # -- after each item ---------------------------------------------------------------------

    def runs_tools(self, message: Any) -> bool:
        """Whether the runner runs this reply's tools once it has it back (so doing it now,
        through its own cached ``generate_tool_call_response()``, changes nothing)."""
        runner = self.runner
        return (
            message.stop_reason == "tool_use"
            and any(block.type == "tool_use" for block in message.content)
            and not runner._messages_modified
            and not runner._closed
        )

    def tool_response(self, message: Any) -> Mapping[str, Any] | None:
        if not self.runs_tools(message):
            return None
        response: Mapping[str, Any] | None = self.runner.generate_tool_call_response()
        return response

    def after(self, message: Any, tools: Mapping[str, Any] | None) -> None:
        """Store, measure and decide after ``message``; adopt the API's summary."""
        if message.stop_reason == "compaction":
            self._adopt(message)
            return
        if message.content:
            self.usages[id(message.content[0])] = _usage(message.usage)
        history = self.history()
        if not history or history[-1].role != "assistant":
            history.append(self._convert(message.to_param(), first=not history))
        if tools is not None:
            history.append(self._convert(tools, first=False))
            carried = self._place_carried(tools)
            if carried is not None:
                history.append(carried)
        conversation, compacter = self.conversation, self.compacter
        conversation.teach(history, self.system, self.tools_sent)
        conversation.sync(history)
        self._write_prefix()
        self.parent = history
        decision = compacter.should_compact(history, system=self.system, tools=self.tools_sent)
        self.owner.events.on_usage(decision)
        if decision.compact and (tools is not None or message.stop_reason == "end_turn"):
            instructions = compacter.summary_instructions(self.owner.instructions)
            self.runner.compact_before_next_turn(
                {"type": "summarize", "instructions": instructions}
            )
            self.decision = decision
            self.owner.events.on_compaction_start(decision)

    def store(self, message: Any) -> None:
        """What the runner holds when the caller stops early, stored."""
        if message.content and message.stop_reason != "compaction":
            self.usages[id(message.content[0])] = _usage(message.usage)

    def close(self) -> None:
        """Everything the thread holds is stored (the last reply too), and what the newest
        compaction carries, while it still waits for a user turn (a resume places it)."""
        self.conversation.sync(self.history(), closed_only=False)
        self._write_prefix()
        later, store = self.compacter.next_turn.peek(), self.owner.engine.store
        if later is not None and store is not None and self.conversation.stored():
            store.update_session(
                self.conversation.session_id, metadata={PENDING_KEY: _param(later)}
            )

    def _pending_from_store(self) -> None:
        store = self.owner.engine.store
        waiting = self.compacter.next_turn.peek()
        if waiting is not None or store is None or not self.conversation.stored():
            return
        pending = store.get_session(self.conversation.session_id).metadata.get(PENDING_KEY)
        if isinstance(pending, Mapping):
            self.compacter.next_turn.hold(Message.from_param(pending))

    def _adopt(self, message: Any) -> None:
        block = next((b for b in message.content if b.type == "compaction"), None)
        decision, self.decision = self.decision, None
        if block is None or not block.content:
            self.owner.events.on_compaction_skipped(
                f"the API wrote no summary (stop reason {message.stop_reason!r})"
            )
            return
        parent = self.parent
        compacter = self.compacter
        if decision is None:  # the caller asked the runner itself
            decision = compacter.should_compact(
                parent, system=self.system, tools=self.tools_sent, force=True
            )
        iterations = message.usage.iterations or ()
        spent = sum((_usage(i) for i in iterations), Usage())
        outcome = compacter.adopt_api_summary(
            self.conversation.session_id,
            [_restated(m) for m in parent],
            _plain(block),
            decision=decision,
            system=self.system,
            tools=self.tools_sent,
            spent=spent,
        )
        transition = outcome.transition
        assert transition is not None
        self.conversation.commit(parent, transition)
        self.parent = list(transition.compacted_messages)
        self.owner.events.on_transition(transition)
        for warning in transition.summary.warnings:
            self.owner.events.on_warning(warning)

    def _place_carried(self, tools: Mapping[str, Any] | None) -> Message | None:
        """What the newest compaction carries, after the user turn the runner sends next:
        ``tools`` (the tool results it appends), else the history's last message. Placed
        once; it waits while there is no user turn to follow."""
        compacter = self.compacter
        later = compacter.next_turn.peek()
        if later is None:
            return None
        placed = compacter.carried(Message.user("-"))  # the model's rule, from the core
        store = self.owner.engine.store
        if store is not None and self.conversation.stored():
            metadata = store.get_session(self.conversation.session_id).metadata
            if PENDING_KEY in metadata:  # placed now: a later resume must not place it again
                store.update_session(self.conversation.session_id, metadata={PENDING_KEY: None})
        if len(placed) == 2:  # a system message after the user turn
            param = _param(later)
            self.thread.append(param)
            self.converted[id(param)] = (param, later)  # read back as it is: with its parts
            return later
        if tools is None:  # no system messages on this model, and no turn of ours to extend
            compacter.next_turn.hold(later)
            return None
        tools["content"].extend(dict(b) for b in later.content)  # before the runner sends it
        return None

    # -- the prefix the session was stored with --------------------------------------------

    def _prefix(self) -> dict[str, Any]:
        return {"system": self.system_sent, "tools": self.tools_sent}

    def _check_prefix(self) -> None:
        store = self.owner.engine.store
        if store is None or not self.conversation.stored():
            return
        session = store.get_session(self.conversation.session_id)
        stored = session.metadata.get(PREFIX_KEY)
        if not isinstance(stored, Mapping):
            return
        differs = [k for k in ("system", "tools") if stored.get(k) != self._prefix()[k]]
        if differs:
            what = (
                "system prompt and tools differ from those"
                if len(differs) == 2
                else "system prompt differs from the one"
                if differs == ["system"]
                else "tools differ from those"
            )
            raise ConfigurationError(
                f"the runner's {what} session {session.id} was stored with: its kept thinking "
                "would be refused; build the runner with the stored ones"
            )

    def _write_prefix(self) -> None:
        """The prefix, with the session once it exists (its children inherit it)."""
        store = self.owner.engine.store
        if self.prefix_kept or store is None or not self.conversation.stored():
            return
        session = store.get_session(self.conversation.session_id)
        if PREFIX_KEY not in session.metadata:
            store.update_session(session.id, metadata={PREFIX_KEY: self._prefix()})
        self.prefix_kept = True


class _Counter:
    """The compacter's model: ``count_tokens`` through the runner's client (free, and the only
    request agentloop sends itself; no Models API lookup). It writes no summary: the API
    writes them at the runner's request."""

    def __init__(self) -> None:
        self._client: Any = None

    def use(self, client: Any) -> None:
        """Count with ``client``'s settings (a sync twin of an async client: counting runs in
        a worker thread)."""
        if isinstance(client, anthropic.Anthropic):
            self._client = client
        else:
            self._client = anthropic.Anthropic(
                api_key=client.api_key,
                base_url=str(client.base_url),
                max_retries=client.max_retries,
            )

    def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        raise ConfigurationError("RunnerCompaction writes no summary: the runner asks the API")

    def count_tokens(self, request: ModelRequest) -> int:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": to_params(request.messages),
            "betas": [ON_DEMAND_COMPACTION_BETA],
        }
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = list(request.tools)
        return int(self._client.beta.messages.count_tokens(**kwargs).input_tokens)


def _no_summarizer() -> Any:
    raise AssertionError("the engine is given the counter as its model")


def _restated(message: Message) -> Message:
    """A system message of the caller's (project instructions, a rule) pinned, so the core
    restates it after the compaction (the API's summary drops what system messages said).
    agentloop's own carried message (the core restates it from its parts) and the runner's
    tool changes (no text: the block records them) stay as they are."""
    if message.role != "system" or not message.text.strip() or message.carried is not None:
        return message
    return replace(message, pinned=True)


def _usage(usage: Any) -> Usage:
    """The SDK's usage (or a usage iteration) as agentloop's."""
    return Usage.from_mapping(usage.model_dump()) or Usage()


def _is_stream(item: Any) -> bool:
    return hasattr(item, "get_final_message")


def _plain(value: Any) -> Any:
    """``value`` as the SDK sends it in a request body (its models dumped as it dumps them)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(
            exclude_unset=True,
            mode="json",
            by_alias=True,
            exclude=getattr(value, "__api_exclude__", None),
        )
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    return "\n\n".join(str(b.get("text", "")) for b in system or () if isinstance(b, Mapping))


def _param(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": [dict(block) for block in message.content]}


def __getattr__(name: str) -> Any:
    # The beta's name before it was defined once, for agentloop (kept for callers).
    if name == "COMPACTION_BETA":
        warnings.warn(
            "agentloop.integrations.tool_runner.COMPACTION_BETA is deprecated: use "
            "agentloop.ON_DEMAND_COMPACTION_BETA",
            DeprecationWarning,
            stacklevel=2,
        )
        return ON_DEMAND_COMPACTION_BETA
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
