"""Drivers that carry out the effects a core generator yields, sync or async.

Core logic is written once as a generator that yields effects (model requests, tool calls) and
receives their results; a failure is thrown back into the generator, which owns the policy.
``drive`` and ``adrive`` are the only places where the sync and async paths differ.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from agentloop._core.model import AsyncModel, Model, ModelRequest, ModelResponse, TextCallback

T = TypeVar("T")
E = TypeVar("E")


def drive(steps: Generator[E, Any, T], perform: Callable[[E], Any]) -> T:
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
        return done.value  # type: ignore[no-any-return]


async def adrive(steps: Generator[E, Any, T], perform: Callable[[E], Awaitable[Any]]) -> T:
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
        return done.value  # type: ignore[no-any-return]


def call(model: Model, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
    return model.complete(request, on_text)


async def acall(
    model: Model | AsyncModel, request: ModelRequest, on_text: TextCallback | None = None
) -> ModelResponse:
    if isinstance(model, AsyncModel):
        return await model.acomplete(request, on_text)
    return await asyncio.to_thread(model.complete, request, on_text)
