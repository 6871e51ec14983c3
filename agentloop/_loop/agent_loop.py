"""AgentLoop: the tool-use loop with compaction at every safe boundary.

The loop is written once, as a generator of effects (model requests and tool calls); a sync and
an async driver carry the effects out. Before every model call — between user turns and between
tool rounds — it asks the compacter; a transition swaps in the compacted history under a child
session, and both sessions stay on disk.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentloop._core.compacter import CompactionTransition, ConversationCompacter
from agentloop._core.context import CompactionDecision
from agentloop._core.messages import ContentBlock, Message, validate_messages
from agentloop._core.model import AsyncModel, Model, ModelRequest, ModelResponse
from agentloop._core.tool import Tool, ToolResult, tool_definition
from agentloop._errors import AgentloopError, PromptTooLongError
from agentloop._loop import drive as _drive


class ContextFullError(AgentloopError):
    """The conversation no longer fits and compaction is disabled or could not help."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """An effect: run ``tool`` with ``tool_input`` (the id ties the result to its tool_use)."""

    tool: Tool | None
    name: str
    call_id: str
    tool_input: dict[str, Any]


@dataclass
class TurnResult:
    """What one user turn produced."""

    text: str
    session_id: str
    tool_calls: int = 0
    transitions: list[CompactionTransition] = field(default_factory=list)
    stop_reason: str | None = None


class LoopEvents:
    """Subscribe to what the loop does; override the methods you care about."""

    def on_text(self, delta: str) -> None:
        """A streamed piece of the assistant's reply."""

    def on_usage(self, decision: CompactionDecision) -> None:
        """Context usage measured at a safe boundary, with the compaction decision."""

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        """Compaction begins (a UI may show a spinner until on_transition)."""

    def on_transition(self, transition: CompactionTransition) -> None:
        """The conversation continues under a child session with the compacted history."""

    def on_compaction_skipped(self, reason: str) -> None:
        """A compaction was attempted but not applied (nothing to cut, or no savings)."""

    def on_tool_call(self, name: str, tool_input: dict[str, Any]) -> None: ...

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None: ...

    def on_reply(self, response: ModelResponse) -> None:
        """A complete assistant reply (after streaming)."""


Effect = ModelRequest | ToolCall
Steps = Generator[Effect, Any, Any]


class AgentLoop:
    """A conversation over the model seam with tools, compaction and (optionally) a store.

    ``store`` is a :class:`sessions.SessionStore`; when given, every message is appended as it
    happens and each compaction continues under a child session saved with its parent.
    """

    def __init__(
        self,
        *,
        model: Model | AsyncModel,
        model_name: str,
        compacter: ConversationCompacter | None = None,
        store: Any = None,
        session_id: str | None = None,
        workspace: str | None = None,
        title: str | None = None,
        messages: Sequence[Message] = (),
        system: str = "",
        tools: Sequence[Tool] = (),
        max_tokens: int = 8192,
        max_tool_rounds: int = 100,
        events: LoopEvents | None = None,
    ) -> None:
        self.model = model
        self.model_name = model_name
        self.compacter = compacter
        self.store = store
        self.system = system
        self.tools = {tool.name: tool for tool in tools}
        self.tool_definitions = [tool_definition(tool) for tool in tools]
        self.max_tokens = max_tokens
        self.max_tool_rounds = max_tool_rounds
        self.events = events or LoopEvents()
        self.messages: list[Message] = list(messages)
        self.workspace = workspace or os.getcwd()
        self.title = title
        self.session_id = session_id or self._new_session_id()

    # -- public API --------------------------------------------------------------------------

    def run_turn(
        self, user_input: str | Sequence[ContentBlock], *, pinned: bool = False
    ) -> TurnResult:
        """One user turn: model calls and tool rounds until the assistant stops."""
        return self._drive(self._turn_steps(user_input, pinned))  # type: ignore[no-any-return]

    async def arun_turn(
        self, user_input: str | Sequence[ContentBlock], *, pinned: bool = False
    ) -> TurnResult:
        return await self._adrive(self._turn_steps(user_input, pinned))  # type: ignore[no-any-return]

    def compact(self, instructions: str | None = None) -> CompactionTransition | None:
        """Manual compaction (``/compact [instructions]``); works even when automatic
        compaction is disabled, because the user asked for it."""
        return self._drive(self._compaction_steps(force=True, instructions=instructions))  # type: ignore[no-any-return]

    async def acompact(self, instructions: str | None = None) -> CompactionTransition | None:
        return await self._adrive(self._compaction_steps(force=True, instructions=instructions))  # type: ignore[no-any-return]

    def context(self) -> CompactionDecision | None:
        """The current usage and what the compacter would decide (for ``/context``)."""
        if self.compacter is None:
            return None
        return self.compacter.should_compact(
            self.messages, system=self.system, tools=self.tool_definitions
        )

    # -- the core, written once --------------------------------------------------------------

    def _turn_steps(self, user_input: str | Sequence[ContentBlock], pinned: bool) -> Steps:
        self._repair()
        self._append(Message.user(user_input, pinned=pinned))
        result = TurnResult(text="", session_id=self.session_id)
        emergency_used = False
        for _round in range(self.max_tool_rounds):
            transition = yield from self._compaction_steps(force=False, instructions=None)
            if transition is not None:
                result.transitions.append(transition)
            request = self._request()
            try:
                response: ModelResponse = yield request
            except PromptTooLongError as error:
                if not self._compaction_enabled():
                    raise ContextFullError(
                        f"{error}; automatic compaction is disabled — run /compact to compact "
                        "the conversation, or start a new session"
                    ) from None
                if emergency_used:
                    raise ContextFullError(
                        f"{error}, even after an emergency compaction; run /compact with "
                        "instructions to keep less, or start a new session"
                    ) from None
                emergency_used = True
                transition = yield from self._compaction_steps(
                    force=True, instructions=None, emergency=True
                )
                if transition is None:
                    raise ContextFullError(
                        f"{error}, and compaction could not reduce the conversation"
                    ) from None
                result.transitions.append(transition)
                continue
            self._record_reply(response)
            result.stop_reason = response.stop_reason
            if response.text:
                result.text = response.text
            calls = response.tool_uses
            if not calls:
                result.session_id = self.session_id
                return result
            blocks: list[ContentBlock] = []
            for call in calls:
                name = str(call.get("name"))
                tool_input = dict(call.get("input") or {})
                self.events.on_tool_call(name, tool_input)
                outcome: ToolResult = yield ToolCall(
                    self.tools.get(name), name, str(call["id"]), tool_input
                )
                self.events.on_tool_result(name, tool_input, outcome)
                block: ContentBlock = {
                    "type": "tool_result",
                    "tool_use_id": call["id"],
                    "content": outcome.content or "(no output)",
                }
                if outcome.is_error:
                    block["is_error"] = True
                blocks.append(block)
                result.tool_calls += 1
            self._append(Message("user", tuple(blocks)))
        result.text = (
            result.text + f"\n[stopped after {self.max_tool_rounds} tool rounds in one turn]"
        ).strip()
        result.session_id = self.session_id
        return result

    def _compaction_steps(
        self, *, force: bool, instructions: str | None, emergency: bool = False
    ) -> Generator[Effect, Any, CompactionTransition | None]:
        compacter = self.compacter
        if compacter is None or (not force and not compacter.settings.enabled):
            return None
        decision = compacter.should_compact(
            self.messages, system=self.system, tools=self.tool_definitions, force=force
        )
        self.events.on_usage(decision)
        if not decision.compact:
            return None
        self.events.on_compaction_start(decision)
        steps = compacter.compaction_steps(
            self.messages,
            system=self.system,
            tools=self.tool_definitions,
            instructions=instructions,
            force=force,
        )
        result = None if steps is None else (yield from steps)
        if result is None:
            self.events.on_compaction_skipped(compacter.last_outcome or decision.reason)
            return None
        transition = compacter.transition_for(self.session_id, result)
        self._apply(transition, emergency=emergency)
        return transition

    # -- state changes -----------------------------------------------------------------------

    def _repair(self) -> None:
        """Make the history ready for a new user message after an interrupted or failed turn:
        answer tool calls left pending and close a user message left without a reply, so the
        roles keep alternating (the history itself is kept, never dropped)."""
        if not self.messages:
            return
        pending = self.messages[-1].tool_use_ids if self.messages[-1].role == "assistant" else []
        if pending:
            self._append(
                Message(
                    "user",
                    tuple(
                        {
                            "type": "tool_result",
                            "tool_use_id": tool_id,
                            "content": "interrupted: the tool did not run",
                            "is_error": True,
                        }
                        for tool_id in pending
                    ),
                )
            )
        if self.messages[-1].role == "user":
            self._append(
                Message.assistant("[no reply: the previous turn was interrupted or failed]")
            )

    def _apply(self, transition: CompactionTransition, *, emergency: bool) -> None:
        """Swap in the compacted history under the child session, saving the child."""
        if self.store is not None:
            from agentloop._adapters.store import to_record

            summary = transition.summary
            self.store.transition(
                transition.original_session_id,
                messages=[to_record(m) for m in transition.compacted_messages],
                strategy=summary.strategy + (" (emergency)" if emergency else ""),
                messages_before=summary.original_message_count,
                tokens_before=summary.tokens_before,
                tokens_after=summary.tokens_after,
                summary=summary.summary,
                child_id=transition.new_session_id,
            )
        self.messages = list(transition.compacted_messages)
        self.session_id = transition.new_session_id
        self.events.on_transition(transition)

    def _append(self, message: Message) -> None:
        if self.compacter is not None and message.tokens is None:
            message = message.with_tokens(self.compacter.count(message))
        self.messages.append(message)
        if self.store is not None:
            from agentloop._adapters.store import to_record

            self.store.append_messages(self.session_id, [to_record(message)])

    def _record_reply(self, response: ModelResponse) -> None:
        if self.compacter is not None:
            sent_local = sum(self.compacter.count(m) for m in self.messages) + self._fixed_tokens()
            usage = response.usage
            reported = (
                usage.input_tokens
                + usage.cache_creation_input_tokens
                + usage.cache_read_input_tokens
            )
            self.compacter.record_usage(reported, sent_local)
        self.events.on_reply(response)
        self._append(response.to_message())

    def _fixed_tokens(self) -> int:
        assert self.compacter is not None
        counter = self.compacter.counter
        return counter.count_system(self.system) + counter.count_tools(self.tool_definitions)

    def _request(self) -> ModelRequest:
        validate_messages(self.messages, allow_pending_tool_use=False)
        return ModelRequest(
            model=self.model_name,
            messages=tuple(self.messages),
            system=self.system,
            tools=tuple(self.tool_definitions),
            max_tokens=self.max_tokens,
            metadata={"purpose": "conversation"},
        )

    def _compaction_enabled(self) -> bool:
        return self.compacter is not None and self.compacter.settings.enabled

    def _new_session_id(self) -> str:
        if self.store is not None:
            session = self.store.create_session(
                model=self.model_name, workspace=self.workspace, title=self.title
            )
            return str(session.id)
        from sessions import new_session_id

        return new_session_id()

    # -- drivers: the only code that differs between sync and async ---------------------------

    def _on_text(self, request: ModelRequest) -> Any:
        return self.events.on_text if request.metadata.get("purpose") == "conversation" else None

    def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, ToolCall):
            return _run_tool(effect)
        return _drive.call(self.model, effect, self._on_text(effect))  # type: ignore[arg-type]

    async def _aperform(self, effect: Effect) -> Any:
        if isinstance(effect, ToolCall):
            return await asyncio.to_thread(_run_tool, effect)
        return await _drive.acall(self.model, effect, self._on_text(effect))

    def _drive(self, steps: Steps) -> Any:
        return _drive.drive(steps, self._perform)

    async def _adrive(self, steps: Steps) -> Any:
        return await _drive.adrive(steps, self._aperform)


def _run_tool(call: ToolCall) -> ToolResult:
    if call.tool is None:
        return ToolResult(f"unknown tool {call.name!r}", is_error=True)
    try:
        return call.tool.run(call.tool_input)
    except Exception as error:  # a broken tool is the model's information, not a crash
        return ToolResult(f"{type(error).__name__}: {error}", is_error=True)
