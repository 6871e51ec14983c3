"""Message values the core works on, and the Messages API's conversation rules.

A conversation is a list of :class:`Message`. Each one wraps exactly what the Messages API takes
(``role`` and a list of content blocks as plain dicts) plus what agentloop needs to know about it:
whether it is pinned (never summarized away), its cached token estimate and, for assistant
replies, the usage the API reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeAlias, TypedDict, cast

from agentloop._core.values.blocks import (
    COMPACTION as COMPACTION,  # the kind and stop reason of a server compaction, re-exported
)
from agentloop._core.values.blocks import (
    REQUIRED_KEYS,
    ToolResultBlock,
    ToolUseBlock,
    is_blank_text,
    is_compaction,
    is_text,
    is_tool_result,
    is_tool_use,
    kind_of,
    text_block,
)
from agentloop._core.values.carried import Carried
from agentloop._core.values.usage import Usage as Usage  # re-exported: where it was defined
from agentloop._errors import MessageValidationError

Role: TypeAlias = Literal["user", "assistant", "system"]
"""``system``: a mid-conversation system message (the 5.x models read it where it stands:
after a user turn, before the next reply); never the first message, never merged."""
ROLES: tuple[Role, ...] = ("user", "assistant", "system")
ContentBlock: TypeAlias = dict[str, Any]
"""A content block as it travels (the API's JSON object); :mod:`agentloop._core.values.blocks` types
each kind and is the one place that tells the kinds apart."""


# ``content`` is typed Any on purpose: a TypedDict's items are invariant, so only Any makes
# these assignable to the anthropic SDK's own message params (whatever its version's union of
# block types), and ``client.messages.create(messages=transition.compacted_params)`` type-checks.
class UserMessageParam(TypedDict):
    """A user message as the Messages API takes it; ``content`` is a list of block dicts."""

    role: Literal["user"]
    content: Any


class AssistantMessageParam(TypedDict):
    """An assistant message as the Messages API takes it; ``content`` is a list of block dicts."""

    role: Literal["assistant"]
    content: Any


# A mid-conversation system message, ``{"role": "system", "content": [...]}``. The SDK has two
# params for it that no one TypedDict matches (``content`` required in the GA one, optional in
# the beta one, and a TypedDict key must agree on that): typed Any, it passes to both
# ``client.messages.create`` and ``client.beta.messages.create``.
SystemMessageParam: TypeAlias = Any


MessageParam: TypeAlias = UserMessageParam | AssistantMessageParam | SystemMessageParam
"""A message exactly as the Messages API takes it: ``{"role": ..., "content": [...]}``."""


class ResponseLike(Protocol):
    """The SDK's response object (``client.messages.create(...)``'s answer) as an item of a
    history: the role, what was said and, when present, the usage the API reported."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> Sequence[Any]: ...


@dataclass(frozen=True, slots=True)
class SummaryInfo:
    """What a compaction prefix message stands for (set on the first message after compaction)."""

    text: str
    """The summary (or, for sliding window / pruning, the note) that replaced earlier messages."""
    pinned: tuple[Message, ...] = ()
    """Pinned messages carried verbatim, oldest first."""
    request: Message | None = None
    """The latest user request, carried verbatim when it fell inside the compacted part."""
    replaced_count: int = 0
    """How many original messages this prefix stands for, across all compactions."""
    replaced_here: int = 0
    """How many of the parent session's messages the compaction that made it replaced."""
    parent_count: int = 0
    """How many messages the parent session held (the compaction notice's figure; 0: a prefix
    from before this was recorded)."""


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message: the API payload plus agentloop's bookkeeping."""

    role: Role
    content: tuple[ContentBlock, ...]
    pinned: bool = False
    tokens: int | None = None
    """Cached local token estimate of this message (None until measured)."""
    usage: Usage | None = field(default=None, compare=False)
    """For an assistant reply: the usage the API reported for the response that produced it."""
    counted: int | None = field(default=None, compare=False)
    """What the API counted (``count_tokens``) for a request of everything up to and including
    this message, system prompt and tools too: a measurement anchor, like ``usage``."""
    summary: SummaryInfo | None = field(default=None, compare=False)
    """Set on the compaction prefix: the user message that carries summary, state and pins."""
    carried: Carried | None = field(default=None, compare=False)
    """Set on the message that carries what a compaction by the API's summary carries over
    (its text renders these parts; the next compaction reads the parts, not the text)."""

    @classmethod
    def user(cls, content: str | Iterable[ContentBlock], *, pinned: bool = False) -> Message:
        return cls("user", _blocks(content), pinned=pinned)

    @classmethod
    def assistant(
        cls, content: str | Iterable[ContentBlock], *, usage: Usage | None = None
    ) -> Message:
        return cls("assistant", _blocks(content), usage=usage)

    @classmethod
    def system(cls, content: str | Iterable[ContentBlock]) -> Message:
        """A mid-conversation system message (text blocks)."""
        return cls("system", _blocks(content))

    @classmethod
    def from_param(cls, param: Mapping[str, Any] | Any, *, pinned: bool = False) -> Message:
        """A message in the Messages API's shape: a dict (a reply's ``usage`` optional), or
        the SDK's response object (``client.messages.create(...)``'s answer, usage included).
        Anything else, or a malformed one, raises :class:`MessageValidationError`."""
        if isinstance(param, Mapping):
            role, content, usage = param.get("role"), param.get("content"), param.get("usage")
        elif hasattr(param, "role") and hasattr(param, "content"):
            role, content, usage = param.role, param.content, getattr(param, "usage", None)
        else:
            raise MessageValidationError(
                "a message must be a dict with 'role' and 'content' (or the SDK's response), "
                f"not {type(param).__name__}"
            )
        if role not in ROLES:
            raise MessageValidationError(
                f"message role must be 'user', 'assistant' or 'system', not {role!r}"
            )
        if content is None:
            raise MessageValidationError(f"{role} message without content")
        reported = Usage.of(usage) if role == "assistant" else None
        return cls(role, _blocks(content), pinned=pinned, usage=reported)

    def to_param(self) -> MessageParam:
        """The message as the Messages API takes it (no agentloop bookkeeping; a compaction
        prefix comes as a :class:`PrefixParam`, a dict that still holds its structure)."""
        content = [dict(block) for block in self.content]
        if self.role == "assistant":
            return {"role": "assistant", "content": content}
        if self.role == "system":
            return {"role": "system", "content": content}
        param: UserMessageParam = {"role": "user", "content": content}
        return param if self.summary is None else PrefixParam.of(param, self.summary)

    def with_tokens(self, tokens: int) -> Message:
        return replace(self, tokens=tokens)

    @property
    def text(self) -> str:
        """The concatenated text blocks (tool blocks excluded)."""
        return "\n".join(b.get("text", "") for b in self.content if is_text(b))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The calls of the caller's tools in this message, in order."""
        return [b for b in self.content if is_tool_use(b)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        """The tool results in this message, in order."""
        return [b for b in self.content if is_tool_result(b)]

    @property
    def tool_use_ids(self) -> list[str]:
        return [str(b["id"]) for b in self.tool_uses]

    @property
    def tool_result_ids(self) -> list[str]:
        return [str(b["tool_use_id"]) for b in self.tool_results]

    @property
    def is_tool_result(self) -> bool:
        """A user message that answers tool calls (it may carry typed text beside them)."""
        return self.role == "user" and any(is_tool_result(b) for b in self.content)

    @property
    def request_blocks(self) -> tuple[ContentBlock, ...]:
        """What a person said in this message: every block of a user message but tool results.

        Real agents put text typed while tools ran (a *steering* message) in the same user turn
        as the tool results; it is a request like any other.
        """
        if self.role != "user" or self.summary is not None:
            return ()
        return tuple(b for b in self.content if not is_tool_result(b))

    @property
    def is_request(self) -> bool:
        """A message in which a person said something (steering beside tool results too)."""
        return any(not is_blank_text(b) for b in self.request_blocks)

    @property
    def is_compaction_only(self) -> bool:
        """An assistant message that holds only the API's summary (a compaction block): it
        opens a history and stands alone (never merged with the turn after it)."""
        blocks = self.content
        return self.role == "assistant" and bool(blocks) and all(map(is_compaction, blocks))


def _blocks(content: str | Iterable[ContentBlock] | Any) -> tuple[ContentBlock, ...]:
    if isinstance(content, str):
        return (dict(text_block(content)),)
    if isinstance(content, Mapping) or not isinstance(content, Iterable):
        raise MessageValidationError(
            f"content must be a string or a list of blocks, not {type(content).__name__}"
        )
    blocks: list[ContentBlock] = []
    for block in content:
        if isinstance(block, Mapping):
            data = dict(block)
        elif hasattr(block, "model_dump"):  # an SDK content block object
            data = sdk_block(block.model_dump(mode="json", exclude_none=True))
        else:
            raise MessageValidationError(
                f"content block must be a mapping, not {type(block).__name__}"
            )
        kind = kind_of(data)
        if kind is None:
            raise MessageValidationError(f"content block without a type: {_brief(data)}")
        for key in REQUIRED_KEYS.get(kind, ()):
            if key not in data:
                raise MessageValidationError(f"{kind} block without {key!r}: {_brief(data)}")
        blocks.append(data)
    return tuple(blocks)


# What the API takes back of each block type it answers with: the rest of an SDK object's fields
# (``parsed_output``, ``caller``...) would be refused as "Extra inputs are not permitted".
SDK_INPUT_FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("type", "text", "citations"),
    "tool_use": ("type", "id", "name", "input"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
    "compaction": ("type", "content", "encrypted_content", "signature", "tool_changes"),
}


def sdk_block(data: dict[str, Any]) -> dict[str, Any]:
    """A block of the SDK's response (dumped) with only the fields the API takes back."""
    fields = SDK_INPUT_FIELDS.get(str(kind_of(data)))
    if fields is None:
        return data  # a block type we do not know: passed on untouched
    kept = {key: data[key] for key in fields if key in data}
    if not kept.get("citations"):
        kept.pop("citations", None)
    return kept


def _brief(block: Mapping[str, Any]) -> str:
    text = repr(dict(block))
    return text if len(text) <= 80 else text[:77] + "..."


def merge_consecutive(messages: Sequence[Message]) -> list[Message]:
    """The history with consecutive same-role messages joined into one, as the API combines
    them (a user turn's tool results first, then what was typed; a reply keeps the newest
    usage). A history whose roles alternate comes back as the same messages."""
    out: list[Message] = []
    for message in messages:
        alone = message.role == "system" or (out and out[-1].is_compaction_only)
        if not out or out[-1].role != message.role or alone:
            out.append(message)
            continue
        last = out[-1]
        content = (*last.content, *message.content)
        if message.role == "user":
            # a stable sort: the tool results first, each group in its order
            content = tuple(sorted(content, key=lambda b: not is_tool_result(b)))
        out[-1] = Message(
            message.role,
            content,
            pinned=last.pinned or message.pinned,
            usage=message.usage or last.usage,
            summary=last.summary,
            carried=last.carried or message.carried,
        )
    return out


def to_params(messages: Sequence[Message | Mapping[str, Any] | ResponseLike]) -> list[MessageParam]:
    """The list to send as ``messages=`` to the Messages API: from our messages, API dicts
    (their ``usage`` left out) or the SDK's responses (what the API takes back of them)."""
    return [_to_param(m) for m in messages]


def _to_param(item: Message | Mapping[str, Any] | ResponseLike) -> MessageParam:
    if isinstance(item, Message):
        return item.to_param()
    param = Message.from_param(item).to_param()
    if isinstance(item, PrefixParam) and param["role"] == "user":
        return PrefixParam.of(cast(UserMessageParam, param), item.summary)
    return param


class PrefixParam(dict[str, Any]):
    """A compaction prefix as the Messages API takes it: a plain ``{"role": "user", "content":
    [...]}`` on the wire, which also holds what the prefix stands for (``summary``). A caller who
    keeps the history as API dicts hands it back, and the structure comes back with it: nothing
    is read from the prefix's text."""

    __slots__ = ("summary",)
    summary: SummaryInfo

    @classmethod
    def of(cls, param: UserMessageParam, summary: SummaryInfo) -> UserMessageParam:
        carried = cls(param)
        carried.summary = summary
        # typed as the message param it is (a TypedDict is a dict at run time)
        return cast(UserMessageParam, carried)


def pending_tool_use_ids(messages: Sequence[Message]) -> list[str]:
    """Ids of tool_use blocks in the last message still waiting for their tool_result."""
    if messages and messages[-1].role == "assistant":
        return messages[-1].tool_use_ids
    return []


def compaction_block(content: Sequence[ContentBlock]) -> ContentBlock | None:
    """The last compaction block of a message's content (the API continues from it and ignores
    everything before it), as the dict it travels as."""
    found = [index for index, block in enumerate(content) if is_compaction(block)]
    return content[found[-1]] if found else None


def has_compaction(messages: Sequence[Message]) -> bool:
    """Whether any message carries a compaction block (such a request needs the API's beta)."""
    return any(compaction_block(m.content) is not None for m in messages)


def latest_compaction_text(messages: Sequence[Message]) -> str | None:
    """The summary in the newest compaction block of ``messages`` (None: there is none)."""
    for message in reversed(messages):
        block = compaction_block(message.content)
        if block is not None:
            content = block.get("content")
            return str(content) if content else None
    return None


def is_safe_boundary(messages: Sequence[Message]) -> bool:
    """True when no tool_use is waiting for its tool_result (compaction may happen here)."""
    return not pending_tool_use_ids(messages)


def latest_request_index(messages: Sequence[Message]) -> int | None:
    """Index of the newest message in which a person said something; None when there is none
    after the compaction prefix (then the prefix's carried request is the latest)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.summary is not None:
            return None
        if message.is_request:
            return index
    return None


def latest_user_request(messages: Sequence[Message]) -> Message | None:
    """The newest thing a person said, as a user message of only those blocks (a steering text
    beside tool results comes without them), looking inside a compaction prefix if need be."""
    index = latest_request_index(messages)
    if index is not None:
        message = messages[index]
        if not message.is_tool_result:
            return message
        return Message("user", message.request_blocks, pinned=message.pinned)
    if messages and messages[0].summary is not None:
        return messages[0].summary.request
    return None


def validate_messages(messages: Sequence[Message], *, allow_pending_tool_use: bool = True) -> None:
    """Raise :class:`MessageValidationError` unless ``messages`` obey the Messages API's rules.

    Rules: non-empty; the first message is from the user (or is an assistant message opened by
    the API's summary, a compaction block); roles alternate (after a compaction-only message
    either role may follow); no message has empty content or an empty text block; every
    tool_use is answered by a tool_result in the very next message, and every tool_result
    answers a tool_use of the message right before it; tool_use ids are unique. A
    ``system`` message holds text only, follows a user turn (or another system message) and
    is followed by an assistant turn or ends the history. ``allow_pending_tool_use`` permits
    the last (assistant) message to have tool_use blocks still unanswered (the state right
    before tools run). Errors name the index."""
    MessageValidator().validate(messages, allow_pending_tool_use=allow_pending_tool_use)


class MessageValidator:
    """:func:`validate_messages` for a conversation that grows: each call checks only what was
    appended since the previous call (a history that was replaced is checked again in full)."""

    def __init__(self) -> None:
        self._checked = 0
        self._last: Message | None = None
        self._first: Message | None = None
        self._tool_use_ids: set[str] = set()

    def validate(self, messages: Sequence[Message], *, allow_pending_tool_use: bool) -> None:
        if not messages:
            raise MessageValidationError("conversation is empty")
        start = self._checked
        if not (
            0 < start <= len(messages)
            and messages[0] is self._first
            and messages[start - 1] is self._last
        ):
            start = 0
            self._tool_use_ids = set()
        self._checked = 0  # until the new part is known good
        if start == 0 and not _opens(messages[0]):
            raise MessageValidationError("the first message must come from the user")
        for index in range(start, len(messages)):
            _check_message(messages, index, self._tool_use_ids)
        # The message before the new part may have waited for its tool results: check it now.
        for index in range(max(start - 1, 0), len(messages)):
            _check_answered(messages, index, allow_pending_tool_use=allow_pending_tool_use)
        self._checked = len(messages)
        self._first = messages[0]
        self._last = messages[-1]


def _check_message(messages: Sequence[Message], index: int, seen_tool_use_ids: set[str]) -> None:
    message = messages[index]
    where = f"message {index} ({message.role})"
    if message.role not in ROLES:
        raise MessageValidationError(f"{where}: role must be 'user', 'assistant' or 'system'")
    if not message.content:
        raise MessageValidationError(f"{where}: content is empty")
    if index:
        _check_order(messages[index - 1], message, where)
    if message.role == "system":
        if not all(is_text(block) and not is_blank_text(block) for block in message.content):
            raise MessageValidationError(f"{where}: a system message holds text only")
        return
    for block in message.content:
        if is_blank_text(block):
            raise MessageValidationError(f"{where}: text block is empty")
        if is_tool_use(block):
            tool_id = str(block.get("id", ""))
            if not tool_id:
                raise MessageValidationError(f"{where}: tool_use without an id")
            if tool_id in seen_tool_use_ids:
                raise MessageValidationError(f"{where}: duplicate tool_use id {tool_id}")
            seen_tool_use_ids.add(tool_id)
            if message.role != "assistant":
                raise MessageValidationError(f"{where}: tool_use outside an assistant message")
        if is_tool_result(block) and message.role != "user":
            raise MessageValidationError(f"{where}: tool_result outside a user message")
        if is_compaction(block) and message.role != "assistant":
            raise MessageValidationError(f"{where}: compaction block outside an assistant message")
        if is_compaction(block) and block.get("content") == "":
            raise MessageValidationError(f"{where}: compaction block with empty content")
    results = [is_tool_result(block) for block in message.content]
    if any(results) and not results[0]:
        raise MessageValidationError(f"{where}: tool_result blocks must come first")
    asked = set(messages[index - 1].tool_use_ids) if index else set()
    answered = message.tool_result_ids
    orphans = [tid for tid in answered if tid not in asked]
    if orphans:
        raise MessageValidationError(f"{where}: tool_result {orphans[0]} answers no tool_use")
    if len(set(answered)) != len(answered):
        raise MessageValidationError(f"{where}: a tool_use is answered twice")


def _opens(message: Message) -> bool:
    """Whether a history may start with ``message``: a user message, or the API's summary."""
    if message.role == "user":
        return True
    return (
        message.role == "assistant" and bool(message.content) and is_compaction(message.content[0])
    )


def _check_order(previous: Message, message: Message, where: str) -> None:
    """The placement rules between two neighbours (see :func:`validate_messages`)."""
    if message.role == "system":
        if previous.role not in ("user", "system"):
            raise MessageValidationError(f"{where}: a system message must follow a user turn")
    elif previous.role == "system":
        if message.role != "assistant":
            raise MessageValidationError(
                f"{where}: a system message must be followed by an assistant turn"
            )
    elif message.role == previous.role and not previous.is_compaction_only:
        raise MessageValidationError(f"{where}: roles must alternate")


def _check_answered(
    messages: Sequence[Message], index: int, *, allow_pending_tool_use: bool
) -> None:
    message = messages[index]
    if message.role != "assistant":
        return
    unanswered = set(message.tool_use_ids)
    if not unanswered:
        return
    where = f"message {index} ({message.role})"
    if index + 1 == len(messages):
        if not allow_pending_tool_use:
            raise MessageValidationError(f"{where}: tool_use awaits its tool_result")
        return
    missing = unanswered - set(messages[index + 1].tool_result_ids)
    if missing:
        raise MessageValidationError(
            f"{where}: tool_use {sorted(missing)[0]} is not answered in the next message"
        )
