"""Synchronous code whose I/O is awaited by an event loop: the store's SQL is written once, and
an async driver (psycopg's ``AsyncConnection``) runs it.

:func:`run_bridged` runs a plain function in a greenlet; each :func:`await_bridged` inside it
hands its awaitable to the coroutine that called :func:`run_bridged`, which awaits it on the event
loop and switches back with the result (or the error). The event loop is never blocked, and there
is no second, async copy of the SQL code. SQLAlchemy's asyncio support works the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import greenlet

T = TypeVar("T")


class _Bridged(greenlet.greenlet):
    """The greenlet :func:`run_bridged` runs its function in."""


def in_bridge() -> bool:
    """Whether this code runs inside :func:`run_bridged` (so it may :func:`await_bridged`)."""
    return isinstance(greenlet.getcurrent(), _Bridged)


def await_bridged(awaitable: Awaitable[T]) -> T:
    """The result of ``awaitable``, awaited by the event loop (only inside :func:`run_bridged`)."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Bridged) or current.parent is None:
        raise RuntimeError("await_bridged() called outside run_bridged()")
    return cast(T, current.parent.switch(awaitable))


async def run_bridged(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)``, its :func:`await_bridged` calls awaited here."""
    worker = _Bridged(function, greenlet.getcurrent())
    pending: Any = worker.switch(*args, **kwargs)
    while not worker.dead:
        try:
            value = await pending
        except BaseException as error:  # cancellation too: the function's cleanup runs
            pending = worker.throw(error)
        else:
            pending = worker.switch(value)
    return cast(T, pending)
