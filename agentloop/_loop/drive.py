"""Drivers: carry out the effects a core generator yields, synchronously or on an event loop.

:class:`Runtime` holds what the effects need (the model, the store, the id factory, the clock,
the hook runner) and performs one effect; :func:`drive` and :func:`adrive` run a generator to
its end. The async path performs blocking effects (tools, hooks, store writes with their
fsyncs, a sync-only model) in a worker thread, so the event loop is never blocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from agentloop._core.compaction.effects import (
    STORE_EFFECTS,
    AppendMessages,
    CallModel,
    CancelBackground,
    CollectBackground,
    CountTokens,
    CreateSession,
    Effect,
    NewSessionId,
    ReadClock,
    RunHooks,
    RunTool,
    SaveTransition,
    StartBackground,
    Steps,
)
from agentloop._core.facts.preserved_state import HookOutput, PreservedStateHook
from agentloop._core.values.model import (
    AsyncModel,
    CountingModel,
    Model,
    ModelResponse,
    TextCallback,
)
from agentloop._core.values.tool import ToolResult
from agentloop._errors import ConfigurationError, StoreWriteError
from agentloop._loop.background import TaskBackground, ThreadBackground
from agentloop._sessions import Lease, SessionStore

T = TypeVar("T")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_session_id() -> str:
    from agentloop._sessions import new_session_id

    return new_session_id()


def _run_hooks(hooks: Sequence[PreservedStateHook]) -> HookOutput:
    from agentloop._adapters.hook_runner import run_hooks

    return run_hooks(hooks)


class _NoModel:
    """Stands in when no model is configured: a request is an error the core handles."""

    def complete(self, request: object, on_text: TextCallback | None = None) -> ModelResponse:
        raise ConfigurationError("no model is configured")


@runtime_checkable
class _RunsAsync(Protocol):
    """A store that runs code calling it on an async driver (``PostgresSessionStore.arun``)."""

    async def arun(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


@dataclass
class Wiring:
    """What is injected once and shared by every runtime of a conversation (the compacter's and
    its loop's): the id factory, the clock, the hook runner. Defaults: real ids, the UTC clock,
    threaded hooks."""

    new_session_id: Callable[[], str] = _new_session_id
    clock: Callable[[], datetime] = _utc_now
    run_hooks: Callable[[Sequence[PreservedStateHook]], HookOutput] = _run_hooks


@dataclass
class Runtime:
    """Everything the effects touch: the model, the store, the shared :class:`Wiring`."""

    model: Model | AsyncModel | None = None
    store: SessionStore | None = None
    wiring: Wiring = field(default_factory=Wiring)
    on_text: TextCallback | None = field(default=None, repr=False)
    lease: Lease | None = None
    """The writer's lease on the session: every write carries it (one writer per session)."""
    lease_owner: str | None = None
    """Who we are (``"pid 1234 on host x"``): a session this runtime creates is leased to it."""
    background: ThreadBackground | TaskBackground | None = field(default=None, repr=False)
    """Where a summary prepared ahead runs (created by the first :class:`StartBackground`)."""

    def perform(self, effect: Effect[Any]) -> object:
        """Carry out ``effect`` here and now (blocking)."""
        if isinstance(effect, StartBackground):
            if self.background is None or isinstance(self.background, TaskBackground):
                self.background = ThreadBackground()
            self.background.start(self._model_for(effect), effect.request)
            return None
        if isinstance(effect, CollectBackground):
            return None if self.background is None else self.background.collect(effect.wait)
        if isinstance(effect, CancelBackground):
            if isinstance(self.background, ThreadBackground):
                self.background.cancel()
            elif self.background is not None:
                self.background.collect(wait=True)  # a task cannot be awaited here: cancelled
            return None
        if isinstance(effect, CallModel):
            model = self._model_for(effect)
            if not isinstance(model, Model):
                raise ConfigurationError(
                    "the model only has an async interface: use the async entry points"
                )
            self.check_store(effect.session_id)
            return model.complete(effect.request, self.on_text if effect.stream else None)
        if isinstance(effect, CountTokens):
            counter = self._model_for(effect)
            if not isinstance(counter, CountingModel):
                return None
            try:
                return counter.count_tokens(effect.request)
            except Exception:  # counting is a check, not a duty: the estimate stands in
                return None
        if isinstance(effect, RunTool):
            return run_tool(effect)
        if isinstance(effect, RunHooks):
            return self.wiring.run_hooks(effect.hooks)
        if isinstance(effect, NewSessionId):
            return self.wiring.new_session_id()
        if isinstance(effect, ReadClock):
            return self.wiring.clock()
        if isinstance(effect, CreateSession | AppendMessages | SaveTransition):
            if self.store is not None:
                from agentloop._adapters.records import perform_store_effect

                self.lease = perform_store_effect(
                    self.store, effect, lease=self.lease, lease_owner=self.lease_owner
                )
            return None
        raise TypeError(f"unknown effect {type(effect).__name__}")

    async def aperform(self, effect: Effect[Any]) -> object:
        """Carry out ``effect`` without blocking the event loop."""
        if isinstance(effect, StartBackground):
            if self.background is None or isinstance(self.background, ThreadBackground):
                if self.background is not None:
                    await asyncio.to_thread(self.background.close)
                self.background = TaskBackground()
            self.background.start(self._model_for(effect), effect.request)
            return None
        if isinstance(effect, CollectBackground):
            if isinstance(self.background, TaskBackground):
                return await self.background.acollect(effect.wait)
        elif isinstance(effect, CancelBackground) and isinstance(self.background, TaskBackground):
            await self.background.acancel()
            return None
        if isinstance(effect, CallModel):
            model = self._model_for(effect)
            if isinstance(model, AsyncModel):
                await self._acheck_store(effect.session_id)
                return await model.acomplete(
                    effect.request, self.on_text if effect.stream else None
                )
        elif isinstance(effect, NewSessionId | ReadClock):
            return self.perform(effect)
        elif isinstance(effect, STORE_EFFECTS):
            if self.store is None:
                return None
            if isinstance(self.store, _RunsAsync):  # PostgreSQL: its async connection, no thread
                return await self.store.arun(self.perform, effect)
        return await asyncio.to_thread(self.perform, effect)

    def check_store(self, session_id: str | None = None) -> None:
        """Before a model call (a paid one), that its reply can be stored. A lease is renewed,
        proving it is still ours and that the store takes writes; without one, the stored
        session ``session_id`` must not be leased to another writer. Otherwise
        :class:`~sessions.SessionLeasedError` (the lease was lost, or another writer holds
        the session) or :class:`StoreWriteError` (the store refuses writes): nothing is sent."""
        if self.store is None or (self.lease is None and session_id is None):
            return
        from agentloop._sessions import SessionError, SessionLeasedError

        try:
            if self.lease is not None:
                self.lease = self.store.renew_lease(self.lease)
                return
            assert session_id is not None
            held = self.store.get_lease(session_id)
        except SessionLeasedError as error:
            raise SessionLeasedError(
                f"{error}; nothing was sent to the model",
                session_id=error.session_id,
                owner=error.owner,
                expires_at=error.expires_at,
            ) from error
        except SessionError as error:
            raise StoreWriteError(f"nothing was sent to the model: {error}") from error
        if held is not None and held.owner != self.lease_owner:
            until = held.expires_at.strftime("%Y-%m-%d %H:%M:%S")
            raise SessionLeasedError(
                f"session {session_id[:8]} is in use by {held.owner} (its lease runs until "
                f"{until} UTC unless renewed); nothing was sent to the model",
                session_id=session_id,
                owner=held.owner,
                expires_at=held.expires_at,
            )

    async def _acheck_store(self, session_id: str | None) -> None:
        if self.store is None or (self.lease is None and session_id is None):
            return
        if isinstance(self.store, _RunsAsync):  # PostgreSQL: its async connection, no thread
            await self.store.arun(self.check_store, session_id)
        else:
            await asyncio.to_thread(self.check_store, session_id)

    def close(self) -> None:
        """Stop the background request, if any, and join its worker thread."""
        background, self.background = self.background, None
        if isinstance(background, ThreadBackground):
            background.close()
        elif background is not None:
            background.collect(wait=True)

    def _model_for(self, effect: CallModel | CountTokens | StartBackground) -> Model | AsyncModel:
        model = effect.model if effect.model is not None else self.model
        return model if model is not None else _NoModel()


def run_tool(call: RunTool) -> ToolResult:
    """Run a tool; a missing or broken tool is information for the model, not a crash."""
    if call.tool is None:
        return ToolResult(f"unknown tool {call.name!r}", is_error=True)
    try:
        return call.tool.run(call.tool_input)
    except Exception as error:
        return ToolResult(f"{type(error).__name__}: {error}", is_error=True)


def drive(
    steps: Steps[T], perform: Callable[[Effect[Any]], object], first: Effect[Any] | None = None
) -> T:
    """Run ``steps`` to its end, performing each effect with ``perform``; ``first``: the effect
    ``steps`` already yielded and waits on (a run stopped there and resumed)."""
    return cast(T, drive_until(steps, perform, _never, first))


def drive_until(
    steps: Steps[T],
    perform: Callable[[Effect[Any]], object],
    stop: Callable[[Effect[Any]], bool],
    first: Effect[Any] | None = None,
) -> Effect[Any] | T:
    """:func:`drive`, but the first effect ``stop`` accepts is returned, not performed (the
    run waits on it: :func:`drive` with ``first=`` goes on from it); the end's value when
    there is none."""
    try:
        effect = next(steps) if first is None else first
        while not stop(effect):
            try:
                value = perform(effect)
            except Exception as error:  # handed to the core, which owns the policy
                effect = steps.throw(error)
            else:
                effect = steps.send(value)
        return effect
    except StopIteration as done:
        return cast(T, done.value)


def _never(effect: Effect[Any]) -> bool:
    return False


async def adrive(steps: Steps[T], perform: Callable[[Effect[Any]], Awaitable[object]]) -> T:
    """The async form of :func:`drive`."""
    try:
        effect = next(steps)
        while True:
            try:
                value = await perform(effect)
            except Exception as error:
                effect = steps.throw(error)
            else:
                effect = steps.send(value)
    except StopIteration as done:
        return cast(T, done.value)
