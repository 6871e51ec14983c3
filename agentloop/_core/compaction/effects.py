"""Effects: what the core asks the outside world to do, and the type of the answer.

Core logic is written once, as generators that yield effects and receive their results; the
drivers in ``agentloop._loop.drive`` perform them, synchronously or on an event loop. A failure
is thrown back into the generator at the ``yield``, so the core owns the policy.
``result = yield from perform(effect)`` gives the result its type.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar, cast

from agentloop._core.facts.preserved_state import HookOutput, PreservedStateHook
from agentloop._core.values.messages import Message
from agentloop._core.values.model import AsyncModel, Model, ModelRequest, ModelResponse
from agentloop._core.values.tool import Tool, ToolResult

if TYPE_CHECKING:
    from agentloop._core.compaction.results import CompactionTransition

T = TypeVar("T")


class Effect(Generic[T]):
    """Something only the outside world can do; ``T`` is what the driver sends back."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class CallModel(Effect[ModelResponse]):
    """Send a request. ``stream`` passes text deltas to the loop's events; ``model`` overrides
    the driver's model (a compacter's own summarizer); ``session_id`` is the stored session the
    reply goes to, checked before the (paid) call: another writer's live lease refuses it."""

    request: ModelRequest
    stream: bool = False
    model: Model | AsyncModel | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class CountTokens(Effect[int | None]):
    """How many input tokens the API counts for ``request``; None when the model cannot count
    (or the count failed): the caller then relies on its calibrated estimate."""

    request: ModelRequest
    model: Model | AsyncModel | None = None


@dataclass(frozen=True, slots=True)
class RunTool(Effect[ToolResult]):
    """Run ``tool`` (None: the model named a tool that does not exist) with ``tool_input``."""

    tool: Tool | None
    name: str
    call_id: str
    tool_input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunHooks(Effect[HookOutput]):
    """Render the preserved-state hooks (each with its own time limit)."""

    hooks: tuple[PreservedStateHook, ...]


@dataclass(frozen=True, slots=True)
class NewSessionId(Effect[str]):
    """A fresh session id (time-sortable, random)."""


@dataclass(frozen=True, slots=True)
class ReadClock(Effect[datetime]):
    """The current time (timezone-aware)."""


@dataclass(frozen=True, slots=True)
class CreateSession(Effect[None]):
    """Create the stored session ``session_id`` (done on its first message)."""

    session_id: str
    model: str
    workspace: str
    title: str | None


@dataclass(frozen=True, slots=True)
class AppendMessages(Effect[None]):
    """Append messages to a stored session, in one transaction."""

    session_id: str
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class SaveTransition(Effect[None]):
    """Save the child session of a compaction and mark its parent compacted, atomically."""

    transition: CompactionTransition
    strategy: str


@dataclass(frozen=True, slots=True)
class StartBackground(Effect[None]):
    """Send ``request`` in the background (a summary prepared ahead); at most one at a time."""

    request: ModelRequest
    model: Model | AsyncModel | None = None


@dataclass(frozen=True, slots=True)
class CollectBackground(Effect["ModelResponse | BaseException | None"]):
    """The background request's answer (a response, or what it raised) once it is there; None
    while it runs (``wait``: block until it is there) or when none was sent."""

    wait: bool = False


@dataclass(frozen=True, slots=True)
class CancelBackground(Effect[None]):
    """Stop the background request, if any, and wait until nothing of it runs."""


Steps: TypeAlias = Generator[Effect[Any], Any, T]
"""A core computation: yields effects, receives their results, returns ``T``."""

STORE_EFFECTS = (CreateSession, AppendMessages, SaveTransition)
"""Effects that only matter when a store is attached."""


def perform(effect: Effect[T]) -> Steps[T]:
    """Yield ``effect`` and return its result, typed."""
    # The driver sends back exactly what the effect's type promises.
    return cast(T, (yield effect))
