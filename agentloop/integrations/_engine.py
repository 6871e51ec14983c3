"""What the framework integrations share: a framework's history seen as agentloop messages,
and one conversation's compacter and sessions in the store.

A framework keeps its own message objects (LangChain's ``BaseMessage``, pydantic-ai's
``ModelMessage``). :class:`Mirror` groups consecutive same-role ones into the one API message
they are sent as and converts each group once (cached by identity), so a step costs what was
appended since the last one. :class:`Conversation` follows one conversation: it teaches the
calibration from the usage the framework reports, asks the :class:`ConversationCompacter`,
and writes the sessions (messages as they close, parent and child at a compaction).

Only the public API of ``agentloop`` and ``sessions`` is used here.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from agentloop import (
    AnthropicModel,
    AsyncModel,
    Calibration,
    CompactionSettings,
    CompactionTransition,
    ContextWindowResolver,
    ConversationCompacter,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    PreservedStateHook,
    ToolFacts,
    as_messages,
)
from agentloop._sessions import (
    NewMessage,
    SessionNotFoundError,
    SessionStore,
    new_session_id,
    workspace_key,
)

F = TypeVar("F")
"""A framework's message type."""
Role = Literal["user", "assistant", "system"]
ROLE_KEY = "role"
"""A stored record's metadata key marking a mid-conversation system message (the store keeps
user and assistant records: such a message is a ``user`` record marked ``system``, as the
agent's own sessions keep it)."""
MAX_CONVERSATIONS = 64
"""Conversations (threads) an integration follows at once; the least recently used is let go
(its sessions stay in the store, and it resumes from there)."""


@dataclass(frozen=True, slots=True)
class Group(Generic[F]):
    """Framework messages sent as one API message, and that message."""

    sources: tuple[F, ...]
    message: Message


class Mirror(Generic[F]):
    """A framework's history as agentloop messages, each group converted once."""

    def __init__(
        self,
        role: Callable[[F], Role | None],
        convert: Callable[[Sequence[F], bool], Message],
        alone: Callable[[F], bool] = lambda item: False,
    ) -> None:
        self._role = role
        self._convert = convert
        self._alone = alone
        self._cache: dict[tuple[int, ...], Group[F]] = {}

    def groups(self, items: Sequence[F]) -> list[Group[F]]:
        """``items`` grouped and converted. A role of None is skipped, and so are system
        messages before anything else (the system prompt, which the request carries apart);
        a system message later is one of the conversation. An item ``alone`` (a summary block
        of the API's, a system message) is never grouped with its neighbours, as agentloop
        keeps it."""
        runs: list[tuple[Role, list[F]]] = []
        single = False
        for item in items:
            role = self._role(item)
            if role is None or (role == "system" and not runs):
                continue
            alone = role == "system" or self._alone(item)
            if runs and runs[-1][0] == role and not alone and not single:
                runs[-1][1].append(item)
            else:
                runs.append((role, [item]))
            single = alone
        cache: dict[tuple[int, ...], Group[F]] = {}
        out: list[Group[F]] = []
        for index, (_role, sources) in enumerate(runs):
            key = tuple(id(source) for source in sources)
            group = self._cache.get(key)
            if group is None or any(
                a is not b for a, b in zip(group.sources, sources, strict=True)
            ):
                group = Group(tuple(sources), self._convert(sources, index == 0))
            cache[key] = group
            out.append(group)
        self._cache = cache  # only what the history still holds
        return out

    def remember(self, sources: Sequence[F], message: Message) -> None:
        """``sources`` stand for ``message`` from now on (a compacted history's own objects)."""
        self._cache[tuple(id(source) for source in sources)] = Group(tuple(sources), message)


def first_message(param: dict[str, object]) -> Message:
    """The first message of a history: a compaction prefix is recognised as one."""
    return as_messages([param])[0]


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What the framework's model says of itself (None: not known)."""

    name: str
    context_window: int | None
    max_output_tokens: int | None


class Conversation:
    """One conversation: its compacter, its current session and what the store holds of it."""

    def __init__(self, owner: Engine, session_id: str, written: list[Message]) -> None:
        self.owner = owner
        self.session_id = session_id
        self.compacter: ConversationCompacter | None = None
        self._written = written
        """What the current session holds in the store (or would, without a store)."""
        self._created = bool(written)
        self._taught: Message | None = None
        self._without_usage = 0

    # -- measuring ---------------------------------------------------------------------------

    def ready(self, facts: ModelFacts, summarizer: Callable[[], AnthropicModel]) -> None:
        """Build the compacter on the first request, from the framework's model."""
        if self.compacter is not None:
            return
        owner = self.owner
        limits = ContextWindowResolver(fetch=None, cache_path=None).resolve(facts.name)
        window = owner.context_window or facts.context_window or limits.context_window
        output = facts.max_output_tokens or limits.max_output_tokens
        self.compacter = ConversationCompacter(
            model_name=facts.name,
            context_window=window,
            model=owner.summarizer or ClientSummaries(summarizer()),
            max_output_tokens=min(output, window // 2),
            settings=owner.settings,
            calibration=Calibration(),
            hooks=owner.hooks,
            tool_facts=owner.tool_facts.copy() if owner.tool_facts is not None else None,
        )

    def teach(
        self, messages: Sequence[Message], system: str, tools: Sequence[dict[str, Any]]
    ) -> None:
        """Teach the calibration what the API counted for the newest reply's request (the
        usage the framework reported beside our local estimate of what was sent)."""
        compacter = self.compacter
        assert compacter is not None
        index = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None
        )
        if index is None or messages[index] is self._taught:
            return
        self._taught = messages[index]
        usage = messages[index].usage
        if usage is None:
            self._without_usage += 1
            if self._without_usage == 3:
                warnings.warn(
                    "the framework reports no usage for its replies: agentloop measures the "
                    "context with its local estimate alone",
                    UserWarning,
                    stacklevel=2,
                )
            return
        sent = compacter.fixed_tokens(system, list(tools)) + sum(
            compacter.count(m) for m in messages[:index]
        )
        compacter.record_usage(usage.prompt_tokens, sent, index)

    def stored(self) -> list[Message]:
        """What the current session holds (or would, without a store), oldest first."""
        return list(self._written)

    # -- the store ---------------------------------------------------------------------------

    def reconcile(self, messages: Sequence[Message]) -> list[Message] | None:
        """Line the framework's history up with the stored session. A history that does not
        start with what was stored is taken as new turns of the stored conversation (a resume:
        the stored history is returned, to go before them); one that differs from it midway
        continues in a new branch of the lineage. None: nothing to change."""
        written = self._written
        common = 0
        for mine, theirs in zip(written, messages, strict=False):
            if mine is not theirs and mine.to_param() != theirs.to_param():
                break
            common += 1
        for index in range(common):
            written[index] = messages[index]  # identity from now on: cheap to compare
        if common == len(written):
            return None
        if common == 0:
            return [*written, *messages]
        self._fork()
        return None

    def _fork(self) -> None:
        """Continue in a new branch: a new session (child of the current one) that will hold
        the framework's history as it now is."""
        store = self.owner.store
        parent = self.session_id
        self.session_id = new_session_id()
        self._written = []
        if store is not None and self._created:
            store.create_session(
                model=self._model_name(),
                workspace=self.owner.workspace,
                title=self.owner.title,
                parent_id=parent,
                session_id=self.session_id,
            )
        else:
            self._created = False
        self.owner.moved(self)

    def sync(self, messages: Sequence[Message], *, closed_only: bool = True) -> None:
        """Store what was appended since the last write. ``closed_only`` keeps back a trailing
        user message (more user content may still join it before the reply)."""
        end = len(messages)
        if closed_only and end and messages[-1].role == "user":
            end -= 1
        new = list(messages[len(self._written) : end])
        if not new:
            return
        store = self.owner.store
        if store is not None:
            if not self._created:
                store.create_session(
                    session_id=self.session_id,
                    model=self._model_name(),
                    workspace=self.owner.workspace,
                    title=self.owner.title,
                )
                self._created = True
            store.append_messages(self.session_id, [record(m) for m in new])
        self._written.extend(new)

    def commit(self, parent: Sequence[Message], transition: CompactionTransition) -> None:
        """The parent holds every message the child stands for; then the child, in one
        transaction of the store."""
        self.sync(parent, closed_only=False)
        store = self.owner.store
        summary = transition.summary
        if store is not None:
            store.transition(
                self.session_id,
                messages=[record(m) for m in transition.compacted_messages],
                strategy=summary.strategy,
                messages_before=len(parent),
                tokens_before=summary.tokens_before,
                tokens_after=summary.tokens_after,
                summary=summary.summary,
                metadata=transition.child_metadata,
                child_id=transition.new_session_id,
            )
        self.session_id = transition.new_session_id
        self._written = list(transition.compacted_messages)
        self._taught = None
        self.owner.transitions.append(transition)
        self.owner.moved(self)

    def _model_name(self) -> str:
        return self.compacter.model_name if self.compacter is not None else "unknown"


class ClientSummaries:
    """The framework's model as agentloop's summarizer, with agentloop writing the summaries
    (never the API's on-demand compaction).

    The framework sends the conversation's requests, each in its own rendering of the history
    (``is_error: false`` on every tool result, tool output as text blocks...); the API binds
    every thinking block to the exact bytes it followed, and an on-demand compaction request
    renders the history as agentloop does, so kept thinking would no longer match. agentloop's
    own summary replays no thinking, and the child carries none that it invalidated."""

    def __init__(self, model: AnthropicModel) -> None:
        self.model = model

    def complete(
        self, request: ModelRequest, on_text: Callable[[str], None] | None = None
    ) -> ModelResponse:
        return self.model.complete(request, on_text)

    async def acomplete(
        self, request: ModelRequest, on_text: Callable[[str], None] | None = None
    ) -> ModelResponse:
        return await self.model.acomplete(request, on_text)

    def count_tokens(self, request: ModelRequest) -> int:
        return self.model.count_tokens(request)


def record(message: Message) -> NewMessage:
    """A message as the store keeps it."""
    metadata: dict[str, Any] = {"pinned": True} if message.pinned else {}
    role = message.role
    if role == "system":
        metadata[ROLE_KEY], role = "system", "user"
    return NewMessage(
        role=role,
        content=[dict(block) for block in message.content],
        token_estimate=message.tokens,
        usage=None if message.usage is None else message.usage.to_dict(),
        metadata=metadata,
    )


class Engine:
    """The configuration both integrations take, and the conversations they follow."""

    def __init__(
        self,
        *,
        settings: CompactionSettings | None,
        context_window: int | None,
        summarizer: Model | AsyncModel | None,
        hooks: Sequence[PreservedStateHook],
        store: SessionStore | None,
        session_id: str | None,
        workspace: str | None,
        title: str | None,
        tool_facts: ToolFacts | None = None,
    ) -> None:
        self.settings = settings or CompactionSettings()
        self.tool_facts = tool_facts
        self.context_window = context_window
        self.summarizer = summarizer
        self.hooks = list(hooks)
        self.store = store
        self.session_id = session_id
        self.workspace = workspace_key(workspace)
        self.title = title
        self.transitions: list[CompactionTransition] = []
        """Every compaction so far, oldest first."""
        self._conversations: OrderedDict[Hashable, Conversation] = OrderedDict()

    def conversation(self, key: str | None) -> Conversation:
        """The conversation whose current session is ``key`` (None: the one configured with
        ``session_id``, else a new one), resumed from the store at its newest descendant."""
        session_id = key or self.session_id
        if session_id is not None and session_id in self._conversations:
            self._conversations.move_to_end(session_id)
            return self._conversations[session_id]
        written: list[Message] = []
        if session_id is None:
            session_id = new_session_id()
        elif self.store is not None:
            try:
                session_id = self.store.newest_descendant(session_id).id
            except SessionNotFoundError:
                pass  # a new conversation under the id it was given
            else:
                written = self._load(session_id)
        conversation = Conversation(self, session_id, written)
        self._keep(session_id, conversation)
        return conversation

    def moved(self, conversation: Conversation) -> None:
        """``conversation`` continues under a new session id (a compaction or a branch)."""
        for key, value in list(self._conversations.items()):
            if value is conversation:
                del self._conversations[key]
        self._keep(conversation.session_id, conversation)

    def _keep(self, key: Hashable, conversation: Conversation) -> None:
        self._conversations[key] = conversation
        while len(self._conversations) > MAX_CONVERSATIONS:
            self._conversations.popitem(last=False)

    def _load(self, session_id: str) -> list[Message]:
        assert self.store is not None
        stored = self.store.get_messages(session_id)
        params = [
            {
                "role": "system" if m.metadata.get(ROLE_KEY) == "system" else m.role,
                "content": list(m.content),
                "usage": m.usage,
            }
            for m in stored
        ]
        return as_messages(params) if params else []
