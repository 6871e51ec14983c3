"""What the fault suite (``tests/test_faults_*.py``) and ``benchmarks/stress_faults.py`` share:
the console script in a subprocess with its output collected as it comes
(:class:`AgentProcess`), where a run keeps its data (:class:`CliPlace`), and the store checks
after any fault (:func:`check_store`, on either backend).

A run whose fault does not live in how a process starts (kill -9, two writers, a full disk, a
paused process, a runaway tool) is forked from a zygote that imported the console script once
(:mod:`support.zygote`): the same ``main()`` in a process of its own, without the second of CPU
that importing the SDK costs each exec. Runs about the environment block, argument bytes, peak
memory or a terminal exec the script. ``AGENTLOOP_FAULT_EXEC=1`` execs every run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fake_api import FakeAnthropicServer

from agentloop import Message, validate_messages
from agentloop._adapters.records import from_record
from sessions import open_store
from support.zygote import ForkedPopen, zygote

AGENTLOOP = Path(sys.executable).parent / "agentloop"
WINDOW = "6000"
EXEC_ENV = "AGENTLOOP_FAULT_EXEC"
HANG_GUARD = 60.0
"""Seconds any wait may last before the test fails: a bound for a hang, never a pace."""


# -- the console script in a subprocess -------------------------------------------------------


def forking() -> bool:
    """Whether runs asked to be forked from the zygote are (``AGENTLOOP_FAULT_EXEC=1``: every
    run is an exec of the console script, as before the zygote, e.g. to compare)."""
    return not os.environ.get(EXEC_ENV)


def cli_env(home: Path, base_url: str, **extra: str) -> dict[str, str]:
    """The environment of an ``agentloop`` run against the fake API, its data under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="test-key",
        AGENTLOOP_HOME=str(home),
        AGENTLOOP_CONFIG_DIR=str(home / "config"),
        HOME=str(home),
    )
    env.update(extra)
    return env


class AgentProcess:
    """``agentloop`` with stdin, stdout and stderr pipes; the output is collected as it comes."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        command: Sequence[str] = (),
        pass_fds: Sequence[int] = (),
        forked: bool = False,
        gate: int | None = None,
    ) -> None:
        """``command``: what runs the console script (e.g. a wrapper that waits for a
        barrier before it execs); ``pass_fds``: descriptors the process inherits;
        ``forked``: forked from the zygote (:mod:`support.zygote`) instead of an exec of the
        script, for a fault that does not live in how the process starts (see
        :func:`forking`), and then ``gate``: a pipe's read end; the run starts once its write
        end is closed."""
        self.popen: subprocess.Popen[bytes] | ForkedPopen
        if forked and forking():
            assert not command and not pass_fds
            self.popen = zygote().spawn([str(AGENTLOOP), *args], cwd=cwd, env=env, gate=gate)
        else:
            self.popen = subprocess.Popen(
                [*command, str(AGENTLOOP), *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=dict(env),
                pass_fds=tuple(pass_fds),
            )
        self.out = bytearray()
        self.err = bytearray()
        self.changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._collect, args=(stream, buffer), daemon=True)
            for stream, buffer in ((self.popen.stdout, self.out), (self.popen.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()
        self.exited = threading.Event()
        threading.Thread(target=self._watch_exit, daemon=True).start()

    def _watch_exit(self) -> None:
        self.popen.wait()
        self.exited.set()
        self.poke()

    def _collect(self, stream: Any, buffer: bytearray) -> None:
        fd = stream.fileno()
        while chunk := os.read(fd, 65_536):
            with self.changed:
                buffer += chunk
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def send(self, data: bytes) -> None:
        """Write to stdin (a process that is gone already just does not read it)."""
        assert self.popen.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.popen.stdin.write(data)
            self.popen.stdin.flush()

    def close_stdin(self) -> None:
        assert self.popen.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.popen.stdin.close()

    def poke(self) -> None:
        """Have :meth:`wait_for` check its predicate now (something else than output changed)."""
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = HANG_GUARD) -> bool:
        """Wait until ``predicate()`` (checked whenever output arrives, or on :meth:`poke`) or
        the process is gone."""
        with self.changed:
            return self.changed.wait_for(lambda: predicate() or self.exited.is_set(), timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGKILL)
        self.finish()

    def finish(self, timeout: float = HANG_GUARD) -> int:
        """Close stdin, wait for the exit and for all of its output; the exit code."""
        self.close_stdin()
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            raise
        for reader in self._readers:
            reader.join(timeout)
        return code

    @property
    def text_out(self) -> str:
        return self.out.decode("utf-8", "replace")

    @property
    def text_err(self) -> str:
        return self.err.decode("utf-8", "replace")

    def printed_lines(self) -> list[str]:
        """The complete lines on stdout (a reply being streamed when it died has no end)."""
        return self.text_out.split("\n")[:-1]

    def error_lines(self) -> list[str]:
        return [line for line in self.text_err.splitlines() if "agentloop: error:" in line]


@dataclass
class CliPlace:
    """Where runs of the console script keep their data against ``server``: ``root/home``
    (the store, the config) and ``root/project`` (the workspace)."""

    root: Path
    server: FakeAnthropicServer

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def workspace(self) -> Path:
        return self.root / "project"

    @property
    def store(self) -> Path:
        return self.home / "sessions.db"

    def env(self, **extra: str) -> dict[str, str]:
        return cli_env(self.home, self.server.base_url, **extra)


# -- the store after a fault ------------------------------------------------------------------


@dataclass
class StoreCheck:
    """What :func:`check_store` found: the store passed; here is what it holds."""

    sessions: int = 0
    assistant_texts: Counter[str] = field(default_factory=Counter)
    """Every text block of every stored assistant message (all sessions), counted."""
    messages: dict[str, list[Message]] = field(default_factory=dict)
    tool_results: dict[str, list[str]] = field(default_factory=dict)
    """The content of every stored tool_result, by the id of the tool call it answers."""


def check_store(location: Path | str) -> StoreCheck:
    """The invariants after any fault: SQLite's ``integrity_check`` passes (a store file), and
    every stored session (parents, children, forks) obeys the Messages API's rules as agentloop
    messages (a tool call may be left pending at the end: the repair answers it on resume).
    ``location``: a store file, or what ``open_store`` takes (a ``postgresql://`` URL)."""
    if not str(location).startswith(("postgresql://", "postgres://")):
        with contextlib.closing(sqlite3.connect(location)) as db:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    check = StoreCheck()
    with open_store(location, read_only=True) as store:
        for session in store.list_sessions(limit=None):
            history = [from_record(record) for record in store.get_messages(session.id)]
            assert len(history) == session.message_count, session.id
            check.sessions += 1
            check.messages[session.id] = history
            if not history:
                continue  # created, then killed before its first write: nothing to break
            validate_messages(history)
            for message in history:
                for block in message.content:
                    if message.role == "assistant" and block.get("type") == "text":
                        check.assistant_texts[str(block["text"])] += 1
                    if block.get("type") == "tool_result":
                        answers = check.tool_results.setdefault(str(block["tool_use_id"]), [])
                        answers.append(str(block.get("content")))
    return check
