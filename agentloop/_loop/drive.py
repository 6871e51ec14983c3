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

from agentloop._core.effects import (
    STORE_EFFECTS,
    AppendMessages,
    CallModel,
    CountTokens,
    CreateSession,
    Effect,
    NewSessionId,
    ReadClock,
    RunHooks,
    RunTool,
    SaveTransition,
    Steps,
)
from agentloop._core.hooks import HookOutput, PreservedStateHook
from agentloop._core.model import (
    AsyncModel,
    CountingModel,
    Model,
    ModelResponse,
    TextCallback,
)
from agentloop._core.tool import ToolResult
from agentloop._errors import ConfigurationError
from sessions import Lease, SessionStore

T = TypeVar("T")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_session_id() -> str:
    from sessions import new_session_id

    return new_session_id()


def _run_hooks(hooks: Sequence[PreservedStateHook]) -> HookOutput:
    from agentloop._adapters.hooks import run_hooks

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
class Runtime:
    """Everything the effects touch. Defaults: real ids, the UTC clock, threaded hooks."""

    model: Model | AsyncModel | None = None
    store: SessionStore | None = None
    new_session_id: Callable[[], str] = _new_session_id
    clock: Callable[[], datetime] = _utc_now
    run_hooks: Callable[[Sequence[PreservedStateHook]], HookOutput] = _run_hooks
    on_text: TextCallback | None = field(default=None, repr=False)
    lease: Lease | None = None
    """The writer's lease on the session: every write carries it (one writer per session)."""
    lease_owner: str | None = None
    """Who we are (``"pid 1234 on host x"``): a session this runtime creates is leased to it."""

    def perform(self, effect: Effect[Any]) -> object:
        """Carry out ``effect`` here and now (blocking)."""
        if isinstance(effect, CallModel):
            model = self._model_for(effect)
            if not isinstance(model, Model):
                raise ConfigurationError(
                    "the model only has an async interface: use the async entry points"
                )
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
            return self.run_hooks(effect.hooks)
        if isinstance(effect, NewSessionId):
            return self.new_session_id()
        if isinstance(effect, ReadClock):
            return self.clock()
        if isinstance(effect, CreateSession | AppendMessages | SaveTransition):
            if self.store is not None:
                from agentloop._adapters.store import perform_store_effect

                self.lease = perform_store_effect(
                    self.store, effect, lease=self.lease, lease_owner=self.lease_owner
                )
            return None
        raise TypeError(f"unknown effect {type(effect).__name__}")

    async def aperform(self, effect: Effect[Any]) -> object:
        """Carry out ``effect`` without blocking the event loop."""
        if isinstance(effect, CallModel):
            model = self._model_for(effect)
            if isinstance(model, AsyncModel):
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

    def _model_for(self, effect: CallModel | CountTokens) -> Model | AsyncModel:
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


def drive(steps: Steps[T], perform: Callable[[Effect[Any]], object]) -> T:
    """Run ``steps`` to its end, performing each effect with ``perform``."""
    try:
        effect = next(steps)
        while True:
            try:
                value = perform(effect)
            except Exception as error:  # handed to the core, which owns the policy
                effect = steps.throw(error)
            else:
                effect = steps.send(value)
    except StopIteration as done:
        return cast(T, done.value)


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
