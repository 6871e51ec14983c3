"""The bridge that lets the store's one copy of its SQL code run on an async driver: plain
functions whose awaitables the event loop awaits, errors and cancellation included."""

from __future__ import annotations

import asyncio

import pytest

from sessions._bridge import await_bridged, in_bridge, run_bridged


def test_a_plain_function_awaits_through_the_bridge() -> None:
    def add_up(count: int) -> int:
        assert in_bridge()
        return sum(await_bridged(asyncio.sleep(0, result=i)) for i in range(count))

    assert asyncio.run(run_bridged(add_up, 5)) == 10
    assert not in_bridge()


def test_the_event_loop_runs_other_tasks_while_the_function_waits() -> None:
    async def main() -> list[str]:
        order: list[str] = []
        opened = asyncio.Event()

        def waits() -> str:
            order.append("waiting")
            await_bridged(opened.wait())  # only another task can set it
            order.append("woken")
            return "done"

        async def opener() -> None:
            order.append("opening")
            opened.set()

        result, _ = await asyncio.gather(run_bridged(waits), opener())
        order.append(result)
        return order

    assert asyncio.run(main()) == ["waiting", "opening", "woken", "done"]


def test_an_awaited_error_is_raised_where_the_function_awaited() -> None:
    async def fails() -> None:
        raise KeyError("gone")

    def catches() -> str:
        try:
            await_bridged(fails())
        except KeyError as error:
            return f"caught {error}"
        return "not raised"

    assert asyncio.run(run_bridged(catches)) == "caught 'gone'"


def test_the_function_s_own_error_reaches_the_caller() -> None:
    def breaks() -> None:
        await_bridged(asyncio.sleep(0))
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        asyncio.run(run_bridged(breaks))


def test_cancelling_the_caller_runs_the_function_s_cleanup() -> None:
    cleaned: list[str] = []

    def holds() -> None:
        try:
            await_bridged(asyncio.Event().wait())  # never set
        finally:
            await_bridged(asyncio.sleep(0))  # cleanup may still await (a ROLLBACK, say)
            cleaned.append("rolled back")

    async def main() -> None:
        task = asyncio.ensure_future(run_bridged(holds))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleaned == ["rolled back"]


def test_awaiting_outside_the_bridge_is_refused() -> None:
    awaitable = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="outside run_bridged"):
        await_bridged(awaitable)
    awaitable.close()
