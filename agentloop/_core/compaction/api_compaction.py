"""On-demand compaction: the API writes the summary (beta ``compact-2026-09-04``).

The request is the conversation up to a cut (same model, system and tools) with
``compaction`` set; the reply is one signed ``compaction`` block. The child is::

    [assistant: [block], *kept turns verbatim, (system: carried)]

- the block, verbatim (signature and all): the API continues from it;
- the kept turns, unchanged and with their thinking: they follow the summarized messages
  directly, the first of them of another role than the last summarized one and never a
  system message (the API's rule for kept thinking to stay valid), no tool call left open
  on either side;
- what agentloop carries over (the preserved state of the hooks, pinned messages, the latest
  request when it was summarized) cannot go in front of the kept turns without breaking their
  thinking: it travels in a mid-conversation system message after the newest user turn, or,
  on a model without them, as a text block at the end of that user message (not sent yet).
  When the history ends with a reply (``/compact`` between turns), it waits for the next user
  message (:meth:`~agentloop._loop.conversation_compacter.ConversationCompacter.carried`).
  It is built as parts (:class:`~agentloop._core.values.carried.Carried`), rendered once
  (:func:`render_carried`) and the message keeps them: the next compaction reads the parts
  (:func:`carried_over`), and only a message stored as text alone is read (:func:`read_carried`).

A loop that has the API summarize by itself (the SDK's tool runner, whose
``compact_before_next_turn()`` summarizes the whole history) gets the same record from
:func:`adopted_steps`: the child ``[block]``, what is carried waiting for the next user turn,
the child measured, the breaker judged, the figures and their sources.

Everything here is pure but :func:`api_compaction_steps`, which yields the model call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from agentloop._core.compaction.effects import CallModel, RunHooks, Steps, perform
from agentloop._core.compaction.strategy import Budget, Built, Job, Meter
from agentloop._core.compaction.summary import SUMMARIZER_SYSTEM
from agentloop._core.cutting.cut_and_prune import Split
from agentloop._core.cutting.prefix import STATE_CLOSE, STATE_OPEN, carried_blocks
from agentloop._core.facts.ledger import render
from agentloop._core.facts.preserved_state import with_ledger
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.blocks import is_text, text_block
from agentloop._core.values.carried import CARRIED_OPEN as CARRIED_OPEN  # re-exported
from agentloop._core.values.carried import PINNED_MARK as PINNED_MARK
from agentloop._core.values.carried import Carried as Carried
from agentloop._core.values.carried import Pin, PinRole
from agentloop._core.values.ledger_values import Ledger
from agentloop._core.values.messages import (
    COMPACTION,
    ContentBlock,
    Message,
    Usage,
    compaction_block,
    latest_request_index,
    latest_user_request,
    validate_messages,
)
from agentloop._core.values.model import (
    MAX_COMPACTION_INSTRUCTIONS,
    AsyncModel,
    Model,
    ModelRequest,
    ModelResponse,
    OnDemandCompaction,
)
from agentloop._core.values.profile_table import accepts_system_messages as accepts_system_messages
from agentloop._errors import CompactionFailed

API_SUMMARY = "api_summary"
"""What a compaction whose summary the API wrote is recorded as."""
API_NOTE = (
    "the summary was written by the API (on-demand compaction): kept turns keep their thinking"
)
PREPARED_API_NOTE = (
    "the summary was prepared in the background by the API (on-demand compaction): no model "
    "call now, and the kept turns keep their thinking"
)
SUMMARY_ROOM = 4
"""A compaction request leaves ``max_tokens // SUMMARY_ROOM`` of the window for the summary."""
REQUEST_MARK = "[the user's latest request, verbatim]"
_MARK_OPEN, _, _MARK_CLOSE = PINNED_MARK.partition("{role}")
_PARTS = re.compile(r"\n\n(?=" + re.escape(_MARK_OPEN) + "|" + re.escape(REQUEST_MARK) + ")")
"""Where a carried message's text opens a pinned message or the latest request (read only by
:func:`read_carried`, for a carried message stored as text alone)."""
_PIN = re.compile(
    re.escape(_MARK_OPEN) + "(?P<role>user|assistant|system)" + re.escape(_MARK_CLOSE) + "\n"
)
_ROLES: dict[str, PinRole] = {"user": "user", "assistant": "assistant", "system": "system"}


def api_instructions(standing: str, instructions: str | None) -> str:
    """The ``instructions`` of a compaction request: agentloop's summarizer prompt (they
    replace the API's own), the standing instructions and the user's, within the cap."""
    parts = [
        SUMMARIZER_SYSTEM,
        "The conversation goes on after your summary, its newest messages kept verbatim "
        "after it: summarize everything you are given.",
    ]
    for heading, text in (
        ("Follow these standing instructions too:", standing),
        ("Instructions for this summary:", instructions or ""),
    ):
        if text.strip():
            parts.append(f"{heading}\n{text.strip()}")
    joined = "\n\n".join(parts)
    return joined[:MAX_COMPACTION_INSTRUCTIONS]


def keeps_from(msgs: Sequence[Message], cut: int) -> bool:
    """Whether ``msgs[cut:]`` may be kept after a block that summarizes ``msgs[:cut]``."""
    first, last = msgs[cut], msgs[cut - 1]
    if first.role == "system" or first.is_tool_result or first.role == last.role:
        return False
    return not (last.role == "assistant" and last.tool_uses)  # no tool call left open


def api_cut(
    msgs: Sequence[Message], *, tail_tokens: int, count: Callable[[Message], int]
) -> int | None:
    """Where the kept turns start: the earliest valid cut whose turns fit ``tail_tokens``,
    else the latest valid cut (the smallest tail). The kept turns hold at least the newest
    message; the summarized part holds more than an earlier block. None: no valid cut."""
    start = 2 if msgs and msgs[0].is_compaction_only else 1
    valid = [cut for cut in range(start, len(msgs)) if keeps_from(msgs, cut)]
    if not valid:
        return None
    running, sizes = 0, {}
    for index in range(len(msgs) - 1, valid[0] - 1, -1):
        running += count(msgs[index])
        sizes[index] = running
    fitting = [cut for cut in valid if sizes[cut] <= tail_tokens]
    return fitting[0] if fitting else valid[-1]


def compaction_request(
    msgs: Sequence[Message],
    *,
    model_name: str,
    system: str,
    tools: Sequence[dict[str, object]],
    max_tokens: int,
    instructions: str,
    background: bool = False,
) -> ModelRequest:
    """The request that asks the API to summarize ``msgs`` (the conversation's own model,
    system and tools, so the kept turns keep their thinking)."""
    return ModelRequest(
        model=model_name,
        messages=tuple(msgs),
        system=system,
        tools=tuple(tools),
        max_tokens=max_tokens,
        metadata={"purpose": "summary", "on_demand": True, "background": background},
        compaction=OnDemandCompaction(instructions),
        cache_newest=False,
    )


def response_block(response: ModelResponse) -> ContentBlock:
    """The compaction block of an on-demand compaction's reply, which must hold one with a
    summary; otherwise :class:`CompactionFailed` naming the stop reason and what it means (the
    history is kept). The one check of such a reply: the adapter's goes through it."""
    block = compaction_block(response.content)
    if response.stop_reason != COMPACTION or block is None or not block.get("content"):
        reason = response.stop_reason or "none"
        why = _NO_SUMMARY_WHY.get(reason, "it returned no summary")
        raise CompactionFailed(
            f"the API's compaction produced no summary (stop reason {reason}: {why})",
            stop_reason=response.stop_reason,
        )
    return dict(block)


_NO_SUMMARY_WHY = {
    "max_tokens": "the summary needed more than max_tokens",
    "model_context_window_exceeded": "no room left in the context window to summarize",
    "tool_use": "the summarizer tried to call a tool",
    "refusal": "the summarizer refused",
    "end_turn": "it ended without text",
    COMPACTION: "the block holds no summary",
}


def response_usage(response: ModelResponse) -> Usage:
    """What a compaction call used: its iterations (the top-level figures are zero)."""
    if response.iterations:
        return sum((iteration.usage for iteration in response.iterations), Usage())
    return response.usage


def carried_text(state: str, *, pinned: Sequence[str] = (), request: str = "") -> str:
    """The text of the message a compaction appends after the newest user turn: the
    preserved state (what the hooks rendered; the artifact ledger joins here), pinned
    messages and the latest request. One function, so every part lands in the same message."""
    parts = [CARRIED_OPEN]
    if state.strip():
        parts.append(f"{STATE_OPEN}\n{state.strip()}\n{STATE_CLOSE}")
    parts.extend(pinned)
    if request.strip():
        parts.append(f"{REQUEST_MARK}\n{request.strip()}")
    return "\n\n".join(parts)


def render_carried(carried: Carried) -> str:
    """The one rendering of ``carried``: the ledger first in the preserved state (as
    ``with_ledger`` joins them), each pin under its mark, the request last."""
    ledger = "" if carried.ledger is None else render(carried.ledger)
    state = carried.state
    if ledger:
        state = f"{ledger}\n\n{state}" if state.strip() else ledger
    pins = [f"{pin.mark}\n{pin.text}" for pin in carried.pinned]
    return carried_text(state, pinned=pins, request=carried.request)


def _as_text(blocks: Sequence[ContentBlock]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if is_text(b))


def read_carried(message: Message) -> Carried | None:
    """The parts of a carried message that holds only its text (None for any other message):
    the one reader of that text, for a history stored before the parts were kept beside it, or
    kept as API dicts. Only the pins and the request are read: the state is made anew."""
    if message.role == "assistant" or message.carried is not None:
        return None
    texts = [str(b.get("text", "")) for b in message.content if is_text(b)]
    found = next((t for t in reversed(texts) if t.startswith(CARRIED_OPEN)), None)
    if found is None:
        return None
    pinned: list[Pin] = []
    request = ""
    for part in _PARTS.split(found):
        mark = _PIN.match(part)
        if mark is not None:
            pinned.append(Pin(_ROLES[mark["role"]], part[mark.end() :]))
        elif part.startswith(REQUEST_MARK):
            request = part[len(REQUEST_MARK) :].strip()
    return Carried(pinned=tuple(pinned), request=request)


def carried_over(
    msgs: Sequence[Message], cut: int, state: str, ledger: Ledger | None = None
) -> Carried:
    """What a compaction that summarizes ``msgs[:cut]`` carries: the hooks' ``state`` and the
    ``ledger``; pinned messages (the caller's instructions among them: pinned system messages)
    and those an earlier carried message restated; the latest request if it is not kept."""
    pinned: list[Pin] = []
    request = ""
    for message in msgs[:cut]:
        earlier = message.carried if message.carried is not None else read_carried(message)
        if earlier is not None:  # an earlier compaction's: its pins and request go on
            pinned.extend(earlier.pinned)
            request = earlier.request or request
        elif message.pinned:
            pinned.append(Pin(message.role, _as_text(carried_blocks(message))))
    index = latest_request_index(msgs)
    if index is not None and (index >= cut or msgs[index].pinned):
        request = ""  # kept verbatim, or carried as a pinned message
    elif (found := latest_user_request(msgs)) is not None:
        request = _as_text(carried_blocks(found))
    return Carried(state, ledger, tuple(pinned), request)


def carried_message(carried: Carried) -> Message:
    """The mid-conversation system message that carries ``carried`` (its text rendered once,
    the parts kept with it)."""
    return Message("system", (dict(text_block(render_carried(carried))),), carried=carried)


def with_carried(messages: list[Message], carried: Carried, system_messages: bool) -> list[Message]:
    """``messages`` (ending with the newest user turn, not sent yet) followed by what is
    carried: a system message where the model reads them (its profile's ``system_messages``),
    else a text block at the end of that user message (which then holds the parts). Unchanged
    when nothing is carried or no user turn ends them."""
    if not carried or not messages or messages[-1].role not in ("user", "system"):
        return messages
    message = carried_message(carried)
    if system_messages:
        return [*messages, message]
    last = messages[-1]
    if last.role != "user":  # a system message the model does not read: left as it is
        return messages
    joined = replace(last, content=(*last.content, *message.content), tokens=None, carried=carried)
    return [*messages[:-1], joined]


def job_carried(job: Job) -> tuple[str, Ledger | None]:
    """What the hooks rendered for ``job`` and its ledger (the state as one text, no ledger
    apart, when the job was given no parts)."""
    return job.preserved.parts if job.preserved is not None else (job.state, None)


def api_child(
    msgs: Sequence[Message], cut: int, block: ContentBlock, carried: Carried, system_messages: bool
) -> list[Message]:
    """The child: the block, the kept turns verbatim (their replies lose the usage that
    measured the old context), then what is carried (see :func:`with_carried`)."""
    kept = [
        m if m.usage is None and m.counted is None else replace(m, usage=None, counted=None)
        for m in msgs[cut:]
    ]
    return with_carried([Message("assistant", (dict(block),)), *kept], carried, system_messages)


def api_compaction_steps(
    msgs: Sequence[Message],
    cut: int,
    *,
    model_name: str,
    system: str,
    tools: Sequence[dict[str, object]],
    max_tokens: int,
    instructions: str,
    summarizer: Model | AsyncModel | None,
    spent: list[Usage],
) -> Steps[ContentBlock]:
    """Ask the API to summarize ``msgs[:cut]``; its block (:class:`CompactionFailed`, or what
    the call raised, when there is none). What the call used is appended to ``spent``."""
    request = compaction_request(
        msgs[:cut],
        model_name=model_name,
        system=system,
        tools=tools,
        max_tokens=max_tokens,
        instructions=instructions,
    )
    response = yield from perform(CallModel(request, model=summarizer))
    spent.append(response_usage(response))
    return response_block(response)


def api_summary_steps(
    job: Job, summarizer: Model | AsyncModel | None, *, max_tokens: int
) -> Steps[Built | str]:
    """The compaction by the API's own summary, measured; or why there is none (the caller
    then summarizes itself, and says why)."""
    meter, msgs = job.meter, job.msgs
    cut = api_cut(
        msgs,
        tail_tokens=job.budget.tail_tokens,
        count=lambda message: meter.calibrate(meter.count(message), 1),
    )
    if cut is None:
        return "no cut leaves the kept turns as the API requires"
    too_big = request_over_window(job, cut, max_tokens)
    if too_big is not None:
        return too_big  # never sent: agentloop's own summary, in one request
    try:
        block = yield from api_compaction_steps(
            msgs,
            cut,
            model_name=meter.model_name,
            system=job.system,
            tools=job.tools,
            max_tokens=max_tokens,
            instructions=api_instructions(job.settings.standing_instructions, job.instructions),
            summarizer=summarizer,
            spent=job.spent,
        )
    except Exception as error:  # the session goes on: agentloop's own summarizer
        return f"the API's compaction failed ({type(error).__name__}: {error})"
    job.notes.append(API_NOTE)
    return (yield from swapped_steps(job, cut, block))


class OnDemandOffer:
    """The API's own summary as the core offers it to a job (:meth:`Job.api_summary`): whether
    the model writes one is asked only when a strategy wants it (``available``: asked once,
    remembered by the core), and ``max_tokens`` is the summary's room."""

    def __init__(
        self,
        available: Callable[[], bool],
        summarizer: Model | AsyncModel | None,
        max_tokens: Callable[[], int],
    ) -> None:
        self._available = available
        self._summarizer = summarizer
        self._max_tokens = max_tokens

    def available(self) -> bool:
        return self._available()

    def __call__(self, job: Job) -> Steps[Built | str]:
        return api_summary_steps(job, self._summarizer, max_tokens=self._max_tokens())


def request_over_window(job: Job, cut: int, max_tokens: int) -> str | None:
    """Why a compaction request of ``job.msgs[:cut]`` would not fit the window (the docs:
    compact before the conversation outgrows it), by agentloop's own count (the API's figure of
    the newest reply in it, then estimates); None: it fits with room for a summary (a quarter
    of ``max_tokens``: a summary cut by the window is no summary, one more request)."""
    meter = job.meter
    tokens = meter.measure(job.msgs[:cut], system=job.system, tools=job.tools).tokens
    room = max_tokens // SUMMARY_ROOM
    if tokens + room <= meter.context_window:
        return None
    return (
        f"the compaction request would not fit the window (~{tokens:,} tokens and "
        f"{room:,} for the summary, over {meter.context_window:,})"
    )


def swapped_steps(
    job: Job, cut: int, block: ContentBlock, *, prepared: bool = False
) -> Steps[Built]:
    """The child of ``block`` (a summary of ``job.msgs[:cut]``), validated and measured."""
    carried = carried_over(job.msgs, cut, *job_carried(job))
    child = api_child(job.msgs, cut, block, carried, job.meter.profile.system_messages)
    validate_messages(child, allow_pending_tool_use=False)
    measured = yield from job.measure(child, job.local(child))
    later = carried_message(carried) if carried and child[-1].role == "assistant" else None
    text = str(block.get("content", ""))
    return Built(child, measured, API_SUMMARY, text, Split(cut), prepared=prepared, later=later)


ADOPTED_NOTE = (
    "the summary was written by the API at the request of the caller's loop (the SDK's tool "
    "runner): the whole history was summarized, nothing kept"
)


def adopted_steps(
    meter: Meter,
    msgs: Sequence[Message],
    block: ContentBlock,
    *,
    decision: CompactionDecision,
    system: str,
    tools: Sequence[dict[str, Any]],
    spent: Usage | None,
) -> Steps[tuple[Job, Built]]:
    """The child of ``block``, a summary of all of ``msgs`` that the caller's loop got: the
    hooks run, the ledger joins their state, what is carried waits in ``Built.later`` (the
    child ``[block]`` ends with a reply), the child is measured; the job, for the record."""
    budget = Budget.of(decision, meter.settings, meter.context_window)
    split = Split(len(msgs))
    hooks = yield from perform(RunHooks(tuple(meter.hooks)))
    hooks = with_ledger(hooks, msgs, meter)  # nothing is kept: every call is the ledger's
    job = Job(
        meter,
        msgs,
        decision,
        budget=budget,
        split=split,
        smallest=split,
        state=hooks.state,
        preserved=hooks,
        system=system,
        tools=tools,
    )
    job.warnings.extend(hooks.warnings)
    if spent is not None:
        job.spent.append(spent)
    built = yield from swapped_steps(job, len(msgs), block)
    job.notes.append(ADOPTED_NOTE)
    return job, built
