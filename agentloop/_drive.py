"""Drivers that run a request-yielding generator against a model, sync or async.

Core logic that needs the model is written once as a generator that yields
:class:`ModelRequest` and receives :class:`ModelResponse`; a failure of the call is thrown back
into the generator, which decides what to do. These two functions are the only places where the
sync and async paths differ.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TypeVar

from agentloop._model import AsyncModel, Model, ModelRequest, ModelResponse, TextCallback

T = TypeVar("T")


def drive(
    steps: Generator[ModelRequest, ModelResponse, T],
    model: Model,
    on_text: TextCallback | None = None,
) -> T:
    try:
        request = next(steps)
        while True:
            try:
                response = model.complete(request, on_text)
            except Exception as error:  # handed to the core, which owns the policy
                request = steps.throw(error)
            else:
                request = steps.send(response)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(
    steps: Generator[ModelRequest, ModelResponse, T],
    model: Model | AsyncModel,
    on_text: TextCallback | None = None,
) -> T:
    try:
        request = next(steps)
        while True:
            try:
                response = await acall(model, request, on_text)
            except Exception as error:
                request = steps.throw(error)
            else:
                request = steps.send(response)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def acall(
    model: Model | AsyncModel, request: ModelRequest, on_text: TextCallback | None
) -> ModelResponse:
    if isinstance(model, AsyncModel):
        return await model.acomplete(request, on_text)
    return await asyncio.to_thread(model.complete, request, on_text)
