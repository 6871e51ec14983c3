"""Where a summary prepared ahead runs: a worker thread for sync loops, a task for async ones.

Both hold at most one request. The thread runs its own event loop so that a request can be
cancelled at once (the async client's call is cancelled, not waited for) and the thread joined;
a model with only a sync interface runs in that loop's executor (cancelling it then waits for
the call to end). Neither ever touches the store: the loop applies what comes back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

from agentloop._core.values.model import AsyncModel, Model, ModelRequest, ModelResponse

Answer = ModelResponse | BaseException
THREAD_NAME = "agentloop-prepare"


async def _call(model: Model | AsyncModel, request: ModelRequest) -> ModelResponse:
    if isinstance(model, AsyncModel):
        return await model.acomplete(request)
    return await asyncio.to_thread(model.complete, request)


def _answer(
    outcome: concurrent.futures.Future[ModelResponse] | asyncio.Task[ModelResponse],
) -> Answer:
    try:
        return outcome.result()
    except BaseException as error:  # a cancelled or failed request is an answer too
        return error


class ThreadBackground:
    """One background request at a time, on a worker thread with its own event loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._future: concurrent.futures.Future[ModelResponse] | None = None

    @property
    def busy(self) -> bool:
        return self._future is not None

    def start(self, model: Model | AsyncModel, request: ModelRequest) -> None:
        if self._future is not None:
            raise RuntimeError("a background request is already running")
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name=THREAD_NAME, daemon=True
            )
            self._thread.start()
        self._future = asyncio.run_coroutine_threadsafe(_call(model, request), self._loop)

    def collect(self, wait: bool) -> Answer | None:
        future = self._future
        if future is None or (not wait and not future.done()):
            return None
        concurrent.futures.wait([future])
        self._future = None
        return _answer(future)

    def cancel(self) -> None:
        """Cancel the request and wait until its task has ended."""
        future, self._future = self._future, None
        if future is None or self._loop is None:
            return
        future.cancel()
        ended = threading.Event()

        async def settle() -> None:
            # The task's cancellation runs on the worker's loop: wait for it to have ended.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            await asyncio.gather(*tasks, return_exceptions=True)
            ended.set()

        asyncio.run_coroutine_threadsafe(settle(), self._loop)
        ended.wait()

    def close(self) -> None:
        """Cancel anything running and join the worker thread."""
        self.cancel()
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


class TaskBackground:
    """One background request at a time, as a task on the running event loop."""

    def __init__(self) -> None:
        self._task: asyncio.Task[ModelResponse] | None = None

    @property
    def busy(self) -> bool:
        return self._task is not None

    def start(self, model: Model | AsyncModel, request: ModelRequest) -> None:
        if self._task is not None:
            raise RuntimeError("a background request is already running")
        self._task = asyncio.get_running_loop().create_task(_call(model, request), name=THREAD_NAME)

    def collect(self, wait: bool) -> Answer | None:
        """From sync code: the answer if it is there (a task cannot be waited for here: one
        still running is cancelled, and that is its answer)."""
        task = self._task
        if task is None or (not wait and not task.done()):
            return None
        self._task = None
        if not task.done():
            task.cancel()
            return asyncio.CancelledError("the background request was cancelled")
        return _answer(task)

    async def acollect(self, wait: bool) -> Answer | None:
        task = self._task
        if task is None or (not wait and not task.done()):
            return None
        await asyncio.wait({task})
        self._task = None
        return _answer(task)

    async def acancel(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
