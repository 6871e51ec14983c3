"""What the loop does beyond ``end_turn`` and ``tool_use`` (the API's stop reasons), and how a
session thinks: effort, and ``drop_block`` once the API refused a thinking block bound to
another conversation (kept for the rest of the session, in its metadata). The loop holds a
:class:`SessionThinking` and a :class:`ReplyRoom`; the tool round, the refusal and the repair
of an interrupted turn are functions it calls.

- ``refusal``: the refused turn leaves the context (it stays stored, with a note).
- ``max_tokens`` inside a ``tool_use``: the call is never run on its partial input; the same
  request goes once more with a larger ``max_tokens`` where there is room, otherwise the cut
  call is answered with an error result the model reads.
- ``max_tokens`` elsewhere (thinking, then partial text): the reply is kept as it came and
  ends the turn, the user told; it goes back unchanged before the next user message (never
  merged with another reply: its thinking blocks stay as the API produced them).
- ``pause_turn``: the paused content goes back as it is, nothing compacted in between.
- ``model_context_window_exceeded``: the reply is kept, the conversation compacts before the
  next request."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentloop._core.compaction.effects import (
    CallModel,
    Effect,
    RunTool,
    StartBackground,
    Steps,
    perform,
)
from agentloop._core.values.blocks import ToolUseBlock, is_tool_result, is_tool_use
from agentloop._core.values.messages import ContentBlock, Message
from agentloop._core.values.model import (
    AsyncModel,
    Model,
    ModelRequest,
    ModelResponse,
    Thinking,
    reply_max_tokens,
)
from agentloop._core.values.profile_table import profile_of
from agentloop._core.values.tool import Tool
from agentloop._core.values.validation import EFFORT_LEVELS
from agentloop._errors import ConfigurationError
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop._loop.events import EventFanOut, LoopEvents
from agentloop._loop.fit import Shortened

__all__ = [
    "THINKING_METADATA_KEY",
    "ReplyRoom",
    "SessionThinking",
    "StreamedText",
    "cut_reply_line",
    "cut_tool_use",
    "grown_max_tokens",
    "interrupted_turn_answers",
    "refusal_line",
    "refusal_note",
    "refused_turn_start",
    "tool_round",
    "unrun_result",
]

THINKING_METADATA_KEY = "thinking"
"""The session metadata key of :meth:`SessionThinking.to_metadata`."""
PAUSE_TURN = "pause_turn"
REFUSAL = "refusal"
CONTEXT_EXCEEDED = "model_context_window_exceeded"
_CUT = ("max_tokens", CONTEXT_EXCEEDED)


UNCALIBRATED_FACTOR = 2
"""How far over the local estimate a context may be counted before the API counted one."""


class StreamedText:
    """The ``on_text`` a loop gives its model: text to ``events.on_text``, thinking to
    ``events.on_thinking`` (a :class:`~agentloop._core.values.model.ThinkingListener`)."""

    def __init__(self, events: LoopEvents) -> None:
        self.events = events

    def __call__(self, delta: str) -> None:
        self.events.on_text(delta)

    def on_thinking(self, delta: str) -> None:
        self.events.on_thinking(delta)


@dataclass
class SessionThinking:
    """How a session's requests think. ``effort`` (None: the API's default for the model);
    ``drop_block``: send ``block_binding.prefix_mismatch_behavior: "drop_block"`` (set once a
    request was refused for a thinking block bound elsewhere, then kept); ``binding_retries``:
    how many requests were retried so."""

    effort: str | None = None
    drop_block: bool = False
    binding_retries: int = 0

    def __post_init__(self) -> None:
        if self.effort is not None and self.effort not in EFFORT_LEVELS:
            raise ConfigurationError(
                f"effort must be one of {', '.join(EFFORT_LEVELS)}, not {self.effort!r}"
            )

    def request_thinking(self) -> Thinking | None:
        """What a request carries (None: the adapter's default for the model)."""
        if self.effort is None and not self.drop_block:
            return None
        return Thinking(effort=self.effort, drop_block=self.drop_block)

    def applied_to(self, effect: Effect[Any]) -> Effect[Any]:
        """``effect`` thinking as the session does, when it is a model request that says
        nothing of it: a compaction's or a summary's too (effort, and drop_block once needed)."""
        thinking = self.request_thinking()
        if thinking is None or not isinstance(effect, CallModel | StartBackground):
            return effect
        if effect.request.thinking is not None:
            return effect
        return replace(effect, request=replace(effect.request, thinking=thinking))

    def drop_bound_blocks(self, why: str) -> str:
        """A thinking block sent back was refused as bound to another conversation: from now
        on every request of this session asks the API to drop such blocks (counted, kept in
        the session's metadata). The line the user is told."""
        self.drop_block = True
        self.binding_retries += 1
        return (
            "the API refused a thinking block of this conversation as bound to a different "
            "one; retrying with drop_block (such blocks are dropped from now on, the model "
            f"loses that reasoning) — {why}"
        )

    def to_metadata(self) -> dict[str, Any]:
        return {"drop_block": self.drop_block, "binding_retries": self.binding_retries}

    @classmethod
    def from_metadata(
        cls, metadata: Mapping[str, Any], effort: str | None = None
    ) -> SessionThinking:
        """What a stored session kept (under :data:`THINKING_METADATA_KEY`), with ``effort``."""
        saved = metadata.get(THINKING_METADATA_KEY)
        if not isinstance(saved, Mapping):
            return cls(effort=effort)
        retries = saved.get("binding_retries")
        return cls(
            effort=effort,
            drop_block=saved.get("drop_block") is True,
            binding_retries=retries if isinstance(retries, int) and retries >= 0 else 0,
        )


def cut_tool_use(response: ModelResponse) -> str | None:
    """The id of a ``tool_use`` the reply was cut inside (its input is partial), or None."""
    if response.stop_reason not in _CUT or not response.content:
        return None
    last = response.content[-1]
    return str(last.get("id")) if is_tool_use(last) else None


def grown_max_tokens(current: int, most: int | None) -> int | None:
    """A larger ``max_tokens`` for the redo of a request cut inside a tool call: twice as
    much, at most ``most`` (None: no larger value is allowed)."""
    bigger = current * 2 if most is None else min(current * 2, most)
    return bigger if bigger > current else None


def unrun_result(tool_id: str) -> ContentBlock:
    """The answer to a tool call cut by the reply's limit: it was not run."""
    return {
        "type": "tool_result",
        "tool_use_id": tool_id,
        "content": "not run: the reply was cut off inside this tool call, so its input is "
        "incomplete; call the tool again (with a shorter input if it was long)",
        "is_error": True,
    }


def refusal_line(response: ModelResponse) -> str:
    """The one line a user reads about a refused turn."""
    details = response.stop_details or {}
    category = details.get("category")
    about = f" (category: {category})" if category else ""
    return (
        f"the model declined to answer{about}; that message was left out of the conversation "
        "(it stays in the session's record) — rephrase it or ask something else"
    )


def refusal_note(response: ModelResponse) -> str:
    """What the store keeps after the refused message, in the assistant's place."""
    category = (response.stop_details or {}).get("category")
    return f"[refused{f' ({category})' if category else ''}: left out of the conversation]"


class ReplyRoom:
    """How much room a reply gets: ``max_tokens`` of the next request, and the redo of a reply
    that ``max_tokens`` cut inside a tool call (held by the loop). ``context`` measures the
    conversation as the loop holds it (the figure of the last boundary while it stands)."""

    def __init__(
        self,
        compacter: ConversationCompacter | None,
        events: EventFanOut,
        context: Callable[[], int],
    ) -> None:
        self._compacter = compacter
        self._events = events
        self._context = context
        self._once: int | None = None
        """The ``max_tokens`` of the redo of a reply cut inside a tool call (the next request)."""

    def redo(
        self,
        request: ModelRequest,
        response: ModelResponse,
        model: Model | AsyncModel,
        cut: str | None,
        *,
        regrown: bool,
    ) -> bool:
        """Whether the request goes again, with a larger ``max_tokens``: once for a reply cut
        inside a tool call (``cut``), never run on its partial input. A reply ``max_tokens``
        cut elsewhere is kept as it came (sent back unchanged, its thinking with it, the
        user's next message after it, as any reply) and the user is told it is cut."""
        if cut is None:
            if response.stop_reason == "max_tokens":
                self._events.on_warning(cut_reply_line(request.max_tokens))
            return False
        return not regrown and self.redo_larger(request, response, model)

    def redo_larger(
        self, request: ModelRequest, response: ModelResponse, model: Model | AsyncModel
    ) -> bool:
        """Whether a reply that ``max_tokens`` cut inside a tool call is asked again, with a
        larger ``max_tokens`` (where the model and the window leave room for one)."""
        if response.stop_reason != "max_tokens":
            return False
        self._once = grown_max_tokens(request.max_tokens, self.room(model, request.model))
        if self._once is None:
            return False
        self._events.on_reply_incomplete(
            f"the reply reached max_tokens ({request.max_tokens:,}) inside a tool call"
        )
        return True

    def room(self, model: Model | AsyncModel, model_name: str) -> int | None:
        """The most ``max_tokens`` a request may carry now: the model's limit, within what the
        window leaves beside the context measured last (None: neither is known)."""
        compacter = self._compacter
        cap = profile_of(model, model_name).max_output_tokens
        if compacter is None:
            return cap
        window = compacter.context_window
        context = self._context()
        calibration = compacter.calibration
        if calibration is not None and not calibration.samples:
            # No request counted yet: the local estimate may be far under the API's count (it
            # once read 4,330 as about half that), so the reply keeps clear of twice it. (A
            # compacter without calibration never learns: there the estimate stands.)
            context *= UNCALIBRATED_FACTOR
        room = window - context - max(256, window // 50)  # a margin
        return room if cap is None else min(cap, room)

    def reply_tokens(self, model: Model | AsyncModel, model_name: str, reserve: int) -> int:
        """``max_tokens`` of the next request: the reply ``reserve`` for a model that does not
        say its limit; otherwise its limit, within the room the window leaves."""
        once, self._once = self._once, None
        if once is not None:
            return once
        cap = profile_of(model, model_name).max_output_tokens
        if cap is None:
            return reserve
        return reply_max_tokens(reserve, cap, window=self.room(model, model_name), context=0)


def cut_reply_line(max_tokens: int) -> str:
    """What the user is told of a reply ``max_tokens`` cut outside a tool call."""
    return (
        f"the reply reached max_tokens ({max_tokens:,}) before it finished: it is kept as it "
        "is; ask the model to go on to have the rest"
    )


def tool_round(
    calls: Sequence[ToolUseBlock],
    cut: str | None,
    tools: Mapping[str, Tool],
    events: LoopEvents,
    shortened: Shortened,
) -> Steps[tuple[Message, int]]:
    """Run the reply's tool calls (never the one ``cut`` inside: it is answered as not run);
    the message of their results, stored whole (what goes shortened to the model is noted in
    ``shortened``), and how many ran."""
    run = 0
    blocks: list[ContentBlock] = []
    for call in calls:
        if call["id"] == cut:
            blocks.append(unrun_result(cut))
            continue
        name = str(call.get("name"))
        tool_input = dict(call.get("input") or {})
        events.on_tool_call(name, tool_input)
        tool_result = yield from perform(
            RunTool(tools.get(name), name, str(call["id"]), tool_input)
        )
        events.on_tool_result(name, tool_input, tool_result)
        block: ContentBlock = {
            "type": "tool_result",
            "tool_use_id": call["id"],
            "content": list(tool_result.blocks) or tool_result.content or "(no output)",
        }
        if tool_result.whole is not None:  # stored whole, sent shortened (``fit.py``)
            block["content"] = tool_result.whole
            shortened[str(call["id"])] = tool_result.content
        if tool_result.is_error:
            block["is_error"] = True
        blocks.append(block)
        run += 1
    return Message("user", tuple(blocks)), run


def refused_turn_start(messages: Sequence[Message]) -> int:
    """Where the turn a refusal ends began: its user message that says something."""
    last = len(messages) - 1
    return next((i for i in range(last, -1, -1) if _is_prompt(messages[i])), 0)


def interrupted_turn_answers(messages: Sequence[Message]) -> list[Message]:
    """What makes a history ready for a new user message after an interrupted or failed turn:
    answers to tool calls left pending and a reply closing a user message left without one,
    so the roles keep alternating (the history itself is kept, never dropped)."""
    if not messages:
        return []
    answers: list[Message] = []
    last = messages[-1]
    pending = last.tool_use_ids if last.role == "assistant" else []
    if pending:
        unknown = "interrupted: the tool may have run; its result is unknown"
        results = tuple(
            {"type": "tool_result", "tool_use_id": tool_id, "content": unknown, "is_error": True}
            for tool_id in pending
        )
        answers.append(Message("user", results))
    if (answers[-1] if answers else last).role in ("user", "system"):
        answers.append(Message.assistant("[no reply: the previous turn was interrupted or failed]"))
    return answers


def _is_prompt(message: Message) -> bool:
    """A user message that says something (not only tool results): where a turn begins."""
    return message.role == "user" and not all(is_tool_result(b) for b in message.content)
