"""The async loop never blocks its event loop: store writes (with their fsyncs), preserved-state
hooks and tools run in worker threads, while the model call is awaited on the loop itself.

Thread identities are recorded where the work happens, so the check does not depend on timing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from support.loop_scripts import WriteRecorder

from agentloop import (
    AgentLoop,
    CompactionSettings,
    ConversationCompacter,
    FunctionTool,
    PreservedStateHook,
)
from agentloop.testing import ScriptedModel, text_reply, tool_call, tool_reply
from sessions import SqliteSessionStore


class RecordingStore(WriteRecorder, SqliteSessionStore):
    """A real SQLite store that notes the thread of every write."""


def test_arun_turn_runs_blocking_work_off_the_event_loop(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "sessions.db")
    work_threads: list[tuple[str, int]] = []

    def lookup(tool_input: Mapping[str, Any]) -> str:
        work_threads.append(("tool", threading.get_ident()))
        return "result " + "words " * 300

    def state() -> str:
        work_threads.append(("hook", threading.get_ident()))
        return "## Phase\nimplementing"

    script = [
        tool_reply(tool_call("lookup", {"q": str(n)}), text="looking " * 40) for n in range(6)
    ] + [text_reply("done")]
    model = ScriptedModel(script)
    compacter = ConversationCompacter(
        model_name="m",
        context_window=3_000,
        model=model,
        max_output_tokens=256,
        settings=CompactionSettings(threshold=0.5),
        hooks=[PreservedStateHook("phase", state)],
    )
    loop = AgentLoop(
        model=model,
        model_name="m",
        compacter=compacter,
        store=store,
        tools=[FunctionTool("lookup", "Look something up.", {"type": "object"}, lookup)],
        max_tokens=256,
    )

    async def main() -> tuple[int, Any]:
        return threading.get_ident(), await loop.arun_turn("look everything up")

    loop_thread, result = asyncio.run(main())

    assert result.text == "done"
    assert result.transitions, "the small window made the loop compact between tool rounds"
    kinds = {kind for kind, _ in store.write_threads} | {kind for kind, _ in work_threads}
    assert kinds == {"create", "append", "transition", "tool", "hook"}
    on_loop = [kind for kind, ident in store.write_threads + work_threads if ident == loop_thread]
    assert on_loop == []
    # And what was written is the conversation the loop holds.
    stored = store.get_messages(loop.session_id)
    assert [m.role for m in stored] == [m.role for m in loop.messages]
    store.close()


def test_run_turn_does_the_same_work_in_the_calling_thread(tmp_path: Path) -> None:
    # The sync driver performs effects where it is called: same effects, no threads needed.
    store = RecordingStore(tmp_path / "sessions.db")
    model = ScriptedModel([text_reply("hello")])
    loop = AgentLoop(model=model, model_name="m", store=store)
    assert loop.run_turn("hi").text == "hello"
    me = threading.get_ident()
    assert store.write_threads and all(ident == me for _, ident in store.write_threads)
    assert [m.role for m in store.get_messages(loop.session_id)] == ["user", "assistant"]
    store.close()
