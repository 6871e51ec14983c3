"""AgentLoop: the tool-use loop with compaction at every safe boundary.

The loop is written once, as a generator of effects (model requests, tool calls, store
writes); a sync and an async driver carry the effects out. Before every model call — between
user turns and between tool rounds — it asks the compacter; a transition swaps in the
compacted history under a child session, and both sessions stay on disk."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentloop._core.compaction.effects import (
    CallModel,
    CreateSession,
    Effect,
    SaveTransition,
    Steps,
    perform,
)
from agentloop._core.compaction.results import CompactionOutcome, CompactionTransition
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.blocks import ToolUseBlock
from agentloop._core.values.messages import (
    COMPACTION,
    ContentBlock,
    Message,
    MessageValidator,
    merge_consecutive,
)
from agentloop._core.values.model import (
    AsyncModel,
    Model,
    ModelRequest,
    ModelResponse,
    ServerCompactionUnsupported,
)
from agentloop._core.values.tool import Tool, tool_definition
from agentloop._core.values.validation import DEFAULT_MAX_TOKENS
from agentloop._errors import (
    IncompleteReplyError,
    PromptTooLongError,
    StoreWriteError,
    ThinkingBindingError,
)
from agentloop._loop.ahead import Ahead
from agentloop._loop.compaction_draft import CompactionDraft, CompactionDrafts
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop._loop.drive import Runtime, Wiring, adrive, drive
from agentloop._loop.events import EventFanOut
from agentloop._loop.events import LoopEvents as LoopEvents
from agentloop._loop.events import TurnResult as TurnResult
from agentloop._loop.fit import ContextFullError as ContextFullError
from agentloop._loop.fit import (
    Shortened,
    as_sent,
    fitting,
    over_window,
    sent_estimate,
    shortened_for_model,
)
from agentloop._loop.server_steps import ServerSteps
from agentloop._loop.stop_reasons import (
    CONTEXT_EXCEEDED,
    PAUSE_TURN,
    REFUSAL,
    ReplyRoom,
    SessionThinking,
    StreamedText,
    cut_tool_use,
    interrupted_turn_answers,
    refusal_line,
    refusal_note,
    refused_turn_start,
    tool_round,
)
from agentloop._loop.store_writes import StoreWrites
from agentloop._sessions import Lease, SessionStore, workspace_key

UserInput = str | Sequence[ContentBlock]


class AgentLoop:
    """A conversation over the model seam with tools, compaction and (optionally) a store.

    With a ``store``, the session is created on its first message, every message is appended
    as it happens, and each compaction continues under a child session saved with its parent.

    ``max_tokens`` is the reply reserve the trigger keeps free; a model that knows its output
    limit (its profile's ``max_output_tokens``, see :class:`~agentloop.ModelProfile`) gets more.
    ``effort``: low … max (None: the model's default); ``drop_block``: see :attr:`thinking`.
    """

    def __init__(
        self,
        *,
        model: Model | AsyncModel,
        model_name: str,
        compacter: ConversationCompacter | None = None,
        store: SessionStore | None = None,
        session_id: str | None = None,
        workspace: str | None = None,
        title: str | None = None,
        messages: Sequence[Message] = (),
        system: str = "",
        tools: Sequence[Tool] = (),
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_tool_rounds: int = 100,
        events: LoopEvents | None = None,
        context_tools: bool = False,
        effort: str | None = None,
        drop_block: bool = False,
    ) -> None:
        self.thinking = SessionThinking(effort=effort, drop_block=drop_block)
        """How requests think (``to_metadata()`` goes in the session's metadata: a restart)."""
        self.model = model
        self.model_name = model_name
        self.compacter = compacter
        self.store = store
        self.system = system
        if context_tools:  # the model sees its own context and may ask for a compaction
            from agentloop._loop.context_tools import context_tools as bound_tools

            tools = [*tools, *bound_tools(self)]
        self.tools = {tool.name: tool for tool in tools}
        self.tool_definitions = [tool_definition(tool) for tool in tools]
        if compacter is not None:  # what it was not told, it takes from the loop (said once)
            compacter.adopt(model_name, model, max_output_tokens=max_tokens, tools=tools)
        self.max_tokens = max_tokens
        self.max_tool_rounds = max_tool_rounds
        self.events = EventFanOut([events] if events is not None else [])
        # Consecutive same-role messages are combined, as the API would: what is sent alternates.
        self.messages: list[Message] = merge_consecutive(messages)
        # One validator with the compacter: what was checked here is not checked again there.
        self._validator = MessageValidator() if compacter is None else compacter.validator
        if self.messages:  # a bad history (a damaged store, say) is refused at once
            self._validator.validate(self.messages, allow_pending_tool_use=True)
        self._local_sum: int | None = None
        """Local estimate of ``self.messages``, kept as messages come and go (None: not yet)."""
        self.last_transition: CompactionTransition | None = None
        """The newest compaction of this conversation (in this process)."""
        self._requested: tuple[str | None] | None = None
        """A compaction the model asked for (its instructions), run at the next safe boundary."""
        self._shortened: Shortened = {}
        """Tool results too big for the window, as the model gets them (see ``_loop/fit.py``)."""
        self._fitted_sum: int | None = None  # what was sent, when some went shortened
        self.workspace = workspace or workspace_key()  # text a store takes (any path's bytes)
        self.title = title
        # Ids, clock and hooks: the compacter's wiring, shared, so its injections hold here too.
        wiring = compacter.wiring if compacter is not None else Wiring()
        on_text = StreamedText(self.events)  # text and thinking as they stream
        self.runtime = Runtime(model=model, store=store, wiring=wiring, on_text=on_text)
        self._context_tokens: int | None = None  # measured at the last boundary
        # Its parts, each given what it needs: held, never inherited.
        self._writes = StoreWrites(stored=session_id is not None)
        self._server = ServerSteps(compacter, self.events)
        self._reply_room = ReplyRoom(compacter, self.events, self._measured_context)
        self._ahead: Ahead | None = None
        self._drafts: CompactionDrafts | None = None
        if compacter is not None:
            self._ahead = Ahead(compacter)
            self._drafts = CompactionDrafts(compacter, self._ahead, self._perform)
        # A loop dropped without close() does not leave its background thread behind.
        weakref.finalize(self, self.runtime.close)
        self.session_id = session_id or wiring.new_session_id()

    # -- public API --------------------------------------------------------------------------

    @property
    def lease(self) -> Lease | None:
        """This writer's lease on the session, carried by every write (a compaction moves it to
        the child). Set it after taking one with ``store.acquire_lease``."""
        return self.runtime.lease

    @lease.setter
    def lease(self, lease: Lease | None) -> None:
        self.runtime.lease = lease

    @property
    def lease_owner(self) -> str | None:  # "pid 1234 on host x": a new session is leased to it
        return self.runtime.lease_owner

    @lease_owner.setter
    def lease_owner(self, owner: str | None) -> None:
        self.runtime.lease_owner = owner

    def subscribe(self, listener: LoopEvents) -> Callable[[], None]:
        """Hear the loop's events from now on; returns what unsubscribes."""
        return self.events.subscribe(listener)

    @property
    def saved(self) -> bool:
        """Whether the session exists in the store yet (it is created on its first message)."""
        return self._writes.stored

    def run_turn(
        self, user_input: UserInput, *, pinned: bool = False, then: Sequence[Message] = ()
    ) -> TurnResult:
        """One user turn: model calls and tool rounds until the assistant stops. ``then`` are
        kept right after the user's message (a mid-conversation system message)."""
        return drive(self._turn_steps(user_input, pinned, then), self._perform)

    async def arun_turn(
        self, user_input: UserInput, *, pinned: bool = False, then: Sequence[Message] = ()
    ) -> TurnResult:
        """The async form of :meth:`run_turn`; store writes, hooks and tools run in threads."""
        return await adrive(self._turn_steps(user_input, pinned, then), self._aperform)

    def compact(self, instructions: str | None = None) -> CompactionOutcome | None:
        """Manual compaction (``/compact [instructions]``); works even when automatic
        compaction is disabled, because the user asked for it. None without a compacter."""
        return drive(self._compaction_steps(force=True, instructions=instructions), self._perform)

    async def acompact(self, instructions: str | None = None) -> CompactionOutcome | None:
        """The async form of :meth:`compact`."""
        steps = self._compaction_steps(force=True, instructions=instructions)
        return await adrive(steps, self._aperform)

    def close(self) -> None:
        """Stop the summary being prepared in the background, if any, and join its thread;
        what was prepared is thrown away (counted). The loop may still be used afterwards."""
        if self._ahead is not None:
            drive(self._ahead.cancel("the session ended"), self.runtime.perform)
        self.runtime.close()

    async def aclose(self) -> None:
        """The async form of :meth:`close`."""
        if self._ahead is not None:
            await adrive(self._ahead.cancel("the session ended"), self.runtime.aperform)
        await asyncio.to_thread(self.runtime.close)

    def switch(self, session_id: str, messages: Sequence[Message]) -> None:
        """Continue in another stored session (a fork of this lineage) from ``messages``, its
        history. What this session kept but had not stored yet is stored first."""
        if self._writes.stored:
            drive(self._flush(), self.runtime.perform)
        if self._ahead is not None:  # what it covers is not this history
            drive(self._ahead.cancel("the conversation moved"), self.runtime.perform)
        self.session_id = session_id
        self.messages = list(messages)
        self._writes.moved(stored=True)
        self._local_sum = None

    def start_fresh(self) -> str:
        """Continue in a new, empty session (``/clear``), created in the store with its first
        message; the one before stays as it was. Returns the new id."""
        self.switch(self.runtime.wiring.new_session_id(), [])
        self._writes.stored = False
        self.last_transition = None
        if self.compacter is not None:  # nothing was compacted in a fresh conversation
            self.compacter.next_turn.drop()
        return self.session_id

    def draft_compaction(
        self, instructions: str | None = None
    ) -> CompactionDraft | CompactionOutcome | None:
        """The manual compaction (``/compact [instructions]``) worked out and not applied: a
        :class:`CompactionDraft`; the outcome instead when nothing would be compacted (why is
        in it); None without a compacter (see ``compaction_draft.py``)."""
        if self._drafts is None:
            return None
        steps = self._compaction_steps(force=True, instructions=instructions)
        sent = as_sent(self.messages, self._shortened)[0]  # as the model gets it
        return self._drafts.draft(self.session_id, sent, steps)

    def send_shortened(self, results: Mapping[str, str]) -> None:
        """Send these tool results (by ``tool_use_id``) as given while the session keeps them
        whole: a resumed session's results that were shortened when they came."""
        self._shortened.update(results)

    def request_compaction(self, instructions: str | None = None) -> None:
        """Compact at the next safe boundary (the ``compact_context`` tool calls this)."""
        self._requested = (instructions,)

    def context(self) -> CompactionDecision | None:
        """The current usage and what the compacter would decide (for ``/context``)."""
        if self.compacter is None:
            return None
        return self.compacter.should_compact(
            self.messages, system=self.system, tools=self.tool_definitions
        )

    # -- the core, written once --------------------------------------------------------------

    def _turn_steps(
        self, user_input: UserInput, pinned: bool, then: Sequence[Message] = ()
    ) -> Steps[TurnResult]:
        self._repair()
        if self._writes.unsaved:
            # A write failed earlier: what it held goes first, or nothing is sent at all.
            yield from self._flush("the store still refuses writes, so this message was not sent")
        message = Message.user(user_input, pinned=pinned)  # refused if it alone does not fit:
        message = fitting(self.compacter, message, self.system, self.tool_definitions)
        # What the last compaction carries over but could not place yet goes after it.
        for kept in [message] if self.compacter is None else self.compacter.carried(message):
            self._keep(self._estimated(kept))
        for extra in then:
            self._keep(self._estimated(extra))
        try:
            return (yield from self._rounds())
        except StoreWriteError:
            self._writes.unsaved = bool(self._writes.pending)
            raise
        except Exception:
            # A failed turn keeps what was said (a session that never got a reply is not
            # created: a failed first request leaves nothing behind). A store that refuses it
            # too leaves it in memory (``unsaved``), and the turn's own error is what is said.
            if self._writes.stored:
                with contextlib.suppress(StoreWriteError):
                    yield from self._flush()
            raise

    def _rounds(self) -> Steps[TurnResult]:
        result = TurnResult(text="", session_id=self.session_id)
        emergency_used = retried = rebound = regrown = paused = False
        shortenings = 0  # of the newest tool results, for requests the API refused
        server_compactions = 0  # in a row, with no reply between them
        for _round in range(self.max_tool_rounds):
            self._server.check(self.model, self.model_name, self.messages)
            if not paused:  # a paused turn goes on as it is: nothing compacted in between
                requested, self._requested = self._requested, None
                outcome = yield from self._compaction_steps(
                    force=requested is not None, instructions=requested[0] if requested else None
                )
                if outcome is not None and outcome.transition is not None:
                    result.transitions.append(outcome.transition)
                over = over_window(self._context_tokens, self.compacter)
                if over is not None and shortenings < 3 and self._shorten_newest(over):
                    shortenings += 1  # never sent over the window when our own count says so
            request = self._request()
            try:
                stored = self.session_id if self._writes.stored else None  # its lease is checked
                response = yield from perform(CallModel(request, stream=True, session_id=stored))
            except ServerCompactionUnsupported as error:
                self._server.fall_back(str(error))
                continue
            except IncompleteReplyError as error:
                if retried:
                    raise
                retried = True  # once: what was shown is withdrawn, the request sent again
                self.events.on_reply_incomplete(str(error))
                continue
            except ThinkingBindingError as error:
                if rebound or self.thinking.drop_block:
                    raise  # never the same body twice: drop_block was tried
                rebound = True
                self.events.on_warning(self.thinking.drop_bound_blocks(str(error)))
                continue
            except PromptTooLongError as error:
                compacted = emergency_used or not self._compaction_enabled()
                if compacted and shortenings < 3 and self._shorten_newest(error):
                    shortenings += 1  # what compaction cannot cut goes shortened
                    continue
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
                outcome = yield from self._compaction_steps(
                    force=True, instructions=None, emergency=True
                )
                if outcome is None or outcome.transition is None:
                    if self._shorten_newest(error):
                        shortenings += 1
                        continue
                    raise ContextFullError(
                        f"{error}, and compaction could not reduce the conversation"
                    ) from None
                result.transitions.append(outcome.transition)
                continue
            if response.stop_reason == COMPACTION and request.server_compaction is not None:
                again = server_compactions > 0  # with no reply between them
                transition = yield from self._server.compacted(
                    self.session_id, self.messages, request, response, again=again
                )
                if transition is not None:  # None: it failed, compacted here from now on
                    server_compactions += 1
                    yield from self._apply(transition, emergency=False)
                    result.transitions.append(transition)
                continue  # the turn goes on (in the child)
            server_compactions = 0
            if response.stop_reason == REFUSAL:
                yield from self._refused(response)
                result.stop_reason, result.session_id = REFUSAL, self.session_id
                return result
            cut = cut_tool_use(response)  # a reply cut elsewhere is kept, the user told
            if self._reply_room.redo(request, response, self.model, cut, regrown=regrown):
                regrown = True  # never run on partial input: once more, with more room
                continue
            yield from self._record_reply(response)
            result.stop_reason = response.stop_reason
            if response.text:
                result.text = response.text
            calls = response.tool_uses
            paused = response.stop_reason == PAUSE_TURN and not calls
            if response.stop_reason == CONTEXT_EXCEEDED and self._compaction_enabled():
                self._requested = self._requested or (None,)  # before the next request
            if paused:
                continue  # the paused content goes back as it is
            if not calls:
                result.session_id = self.session_id
                return result
            result.tool_calls += yield from self._tool_round(calls, cut)
        yield from self._flush()
        result.text = (
            result.text + f"\n[stopped after {self.max_tool_rounds} tool rounds in one turn]"
        ).strip()
        result.session_id = self.session_id
        return result

    def _compaction_steps(
        self, *, force: bool, instructions: str | None, emergency: bool = False
    ) -> Steps[CompactionOutcome | None]:
        compacter, history = self.compacter, as_sent(self.messages, self._shortened)[0]
        if compacter is None or (not force and not compacter.settings.enabled):
            return None  # below: the history as sent (a shortened result as the model saw it)
        ahead = self._ahead
        if ahead is not None:
            yield from ahead.collect(self.session_id, history, wait=False)
        decision = compacter.should_compact(
            history, system=self.system, tools=self.tool_definitions, force=force
        )
        self._context_tokens = decision.usage.tokens
        self.events.on_usage(decision)
        if not decision.compact:
            if ahead is not None and not force:
                yield from ahead.maybe_start(
                    self.session_id, history, decision, self.system, self.tool_definitions
                )
            return CompactionOutcome(decision=decision)
        self.events.on_compaction_start(decision)
        if ahead is not None:
            yield from ahead.before_compaction(self.session_id, history, decision)
        outcome = yield from compacter.steps(
            self.session_id,
            history,
            system=self.system,
            tools=self.tool_definitions,
            instructions=instructions,
            decision=decision,
        )
        if outcome.transition is None:
            self.events.on_compaction_skipped(outcome.explanation)
            return outcome
        yield from self._apply(outcome.transition, emergency=emergency)
        self._context_tokens = outcome.transition.summary.tokens_after
        return outcome

    # -- state changes -----------------------------------------------------------------------

    def _repair(self) -> None:
        """Make the history ready for a new user message after an interrupted or failed turn
        (``stop_reasons.interrupted_turn_answers``: the history itself is kept)."""
        for answer in interrupted_turn_answers(self.messages):
            self._keep(self._estimated(answer))

    def _refused(self, response: ModelResponse) -> Steps[None]:
        """A refusal: the refused turn leaves the context (from the user's message that began
        it), the store keeps it with a note in the reply's place, the user is told."""
        start = refused_turn_start(self.messages)
        self._keep(Message.assistant(refusal_note(response)))
        yield from self._flush("the refused turn was not saved")
        if self._ahead is not None:  # what it covers is about to change
            yield from self._ahead.cancel("a refused turn left the conversation")
        self.messages = self.messages[:start]
        self._local_sum = None
        self.events.on_warning(refusal_line(response))

    def _tool_round(self, calls: Sequence[ToolUseBlock], cut: str | None) -> Steps[int]:
        """Run the reply's tool calls (``stop_reasons.tool_round``) and keep their results,
        measured as the model gets them; how many ran."""
        message, ran = yield from tool_round(calls, cut, self.tools, self.events, self._shortened)
        sent = self._estimated(as_sent([message], self._shortened)[0][0])
        self._keep(message if sent.tokens is None else message.with_tokens(sent.tokens))
        return ran

    def _apply(self, transition: CompactionTransition, *, emergency: bool) -> Steps[None]:
        """Swap in the compacted history under the child session, saving the child (after
        the parent holds every message it stands for)."""
        yield from self._flush()
        strategy = transition.summary.strategy + (" (emergency)" if emergency else "")
        yield from perform(SaveTransition(transition, strategy))
        self.messages = list(transition.compacted_messages)
        self._local_sum = None
        self.session_id = transition.new_session_id
        self.last_transition = transition
        self.events.on_transition(transition)

    def _estimated(self, message: Message) -> Message:
        """``message`` with its local token estimate (as it is without a compacter)."""
        if self.compacter is not None and message.tokens is None:
            return message.with_tokens(self.compacter.count(message))
        return message

    def _keep(self, message: Message) -> None:
        """Add to the history; the store gets it with the next reply (one transaction)."""
        self._writes.keep(message)
        self._context_tokens = None  # measured again when needed
        if self._local_sum is not None and self.compacter is not None:
            self._local_sum += self.compacter.count(message)
        if self.messages and self.messages[-1].role == "assistant" == message.role:
            # A paused turn goes on: one turn for the API (it joins them), two records stored.
            self.messages[-1:] = merge_consecutive([self.messages[-1], message])
        else:
            self.messages.append(message)

    def _flush(self, what: str = "what was said since the last save was not saved") -> Steps[None]:
        """Store what was kept since the last write, creating the session on its first; a
        refused write raises :class:`StoreWriteError` (``what``: its start; ``store_writes``)."""
        session = CreateSession(self.session_id, self.model_name, self.workspace, self.title)
        yield from self._writes.flush(session, what)

    @property
    def unsaved(self) -> bool:
        """Whether a store write failed and what it held is still only in memory (it is
        written first at the next turn; no model call is made before it is)."""
        return self._writes.unsaved

    def flush(self) -> None:
        """Store anything kept but not yet written (a turn interrupted by Ctrl-C)."""
        if self._writes.stored:
            drive(self._flush(), self.runtime.perform)

    def _record_reply(self, response: ModelResponse) -> Steps[None]:
        compacter = self.compacter
        if compacter is not None and not response.usage.estimated:
            # What we sent, estimated locally, beside what the API counted: the calibration
            # learns from every reply (but one whose usage the model only estimated). The sum
            # is kept up to date, not recomputed per turn.
            if self._local_sum is None:
                self._local_sum = sum(compacter.count(m) for m in self.messages)
            local = self._local_sum + compacter.fixed_tokens(self.system, self.tool_definitions)
            sent = sent_estimate(compacter, self.messages, local, self._fitted_sum)
            compacter.record_usage(response.usage.prompt_tokens, sent, len(self.messages))
        # Stored first, then shown as complete: a reply the user saw is a reply that is kept.
        self._keep(self._estimated(response.to_message()))
        yield from self._flush("the reply was not saved")
        self.events.on_reply(response)

    def _request(self) -> ModelRequest:
        # Only what was appended since the last request is checked (the rest was, and is
        # unchanged): the per-turn cost does not grow with the history.
        self._validator.validate(self.messages, allow_pending_tool_use=False)
        edit = self._server.edit(self.messages)
        messages, changed = as_sent(self.messages, self._shortened)
        compacter, self._fitted_sum = self.compacter, None
        if changed and compacter is not None:  # for the calibration: what was sent
            fixed = compacter.fixed_tokens(self.system, self.tool_definitions)
            self._fitted_sum = fixed + sum(compacter.count(m) for m in messages)
        return ModelRequest(
            model=self.model_name,
            messages=messages,
            system=self.system,
            tools=tuple(self.tool_definitions),
            max_tokens=self._reply_room.reply_tokens(self.model, self.model_name, self.max_tokens),
            metadata={"purpose": "conversation"},
            server_compaction=edit,
            thinking=self.thinking.request_thinking(),
        )

    def _shorten_newest(self, error: PromptTooLongError | str) -> bool:
        """Shorten the newest tool results for the model (``_loop/fit.py``): after a refusal
        compaction cannot answer, or before a request our own count says is over the window."""
        return self._server.edit(self.messages) is None and shortened_for_model(self, str(error))

    def _perform(self, effect: Effect[Any]) -> object:
        """Carry out ``effect`` (the sync driver's), a model request thinking as the session
        does: a compaction's or a summary's too (effort, and drop_block once needed)."""
        return self.runtime.perform(self.thinking.applied_to(effect))

    async def _aperform(self, effect: Effect[Any]) -> object:
        """The async form of :meth:`_perform`."""
        return await self.runtime.aperform(self.thinking.applied_to(effect))

    def _measured_context(self) -> int:
        """The context as measured at the last boundary, or measured now."""
        if self._context_tokens is None:
            decision = self.context()
            self._context_tokens = 0 if decision is None else decision.usage.tokens
        return self._context_tokens

    def _compaction_enabled(self) -> bool:
        return self.compacter is not None and self.compacter.settings.enabled
