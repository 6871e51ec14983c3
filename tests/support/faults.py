"""Helpers shared by the tests (moved from test_faults_stream.py)."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fake_api import (
    FakeAnthropicServer,
)

from agentloop import Message, ModelRequest
from agentloop._adapters.records import from_record
from sessions import open_store
from support.cli import Run
from support.loop_scripts import Script
from support.processes import AgentProcess, CliPlace, check_store

MODEL = "claude-sonnet-4-6"


PARTIAL = "PARTIAL-"


def only_session(path: Path) -> list[Message]:
    check = check_store(path)
    (history,) = check.messages.values()
    return history


def texts(history: list[Message]) -> list[str]:
    """The first block of each message that is not thinking (5.x replies begin with it)."""
    firsts = [
        next((b for b in m.content if b.get("type") != "thinking"), m.content[0]) for m in history
    ]
    return [str(b.get("text", b.get("type"))) for b in firsts]


def request() -> ModelRequest:
    return ModelRequest(model=MODEL, messages=(Message.user("hi"),), max_tokens=100)


def store_path() -> Path:
    return Path(os.environ["AGENTLOOP_HOME"]) / "sessions.db"


def clean(run: Run) -> None:
    """No traceback, and every error is one line of its own."""
    assert "Traceback" not in run.err and "Traceback" not in run.out
    for line in run.error_lines():
        assert line.count("agentloop: error:") == 1


SECRET = "sk-ant-api03-FAULTINJECTION-7f3a9c1e5b2d8046-secret"


@dataclass
class Agent(CliPlace):
    """The console script against a scripted fake API, its data under ``root``."""

    script: Script

    def run(
        self, *args: str | bytes, stdin: bytes = b"", env: dict[str, str] | None = None
    ) -> AgentProcess:
        process = AgentProcess(
            [os.fsdecode(arg) for arg in args],
            cwd=self.workspace,
            env=self.env(**(env or {})),
        )
        process.send(stdin)
        process.finish()
        return process

    def stored_params(self) -> list[dict[str, object]]:
        with open_store(self.store, read_only=True) as store:
            (session,) = store.list_sessions(limit=None)
            return [dict(from_record(m).to_param()) for m in store.get_messages(session.id)]


def make_agent(root: Path, *, api_key: str = "test-key") -> Iterator[Agent]:
    script = Script()
    with FakeAnthropicServer(api_key=api_key, handler=script) as server:
        agent = Agent(root, server, script)
        agent.workspace.mkdir(parents=True)
        yield agent
        assert server.violations == []


def sound(process: AgentProcess) -> None:
    assert "Traceback" not in process.text_err, process.text_err
    assert process.popen.returncode == 0, process.text_err
    assert process.error_lines() == []


def tool_results(body: dict[str, object]) -> list[dict[str, object]]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [b for b in messages[-1]["content"] if b.get("type") == "tool_result"]


def fill_sqlite(path: Path, pid: int) -> None:
    """Process ``pid``'s next write past the store files' present sizes fails (EFBIG: SQLite
    says "disk I/O error"), as on a full disk."""
    sizes = [p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists()]
    limit = min(sizes) if sizes else 0
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def free_sqlite(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        infinity = resource.RLIM_INFINITY
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (infinity, infinity))
