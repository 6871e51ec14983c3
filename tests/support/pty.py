"""Helpers shared by the tests (moved from test_pty_repl.py)."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, text_reply

from agentloop._cli.main import main
from support.loop_scripts import is_summary_request

REPO = Path(__file__).resolve().parents[2]
"""The repository (tests/support/pty.py is two levels down): the PYTHONPATH of the programs run."""


TIMEOUT = 30.0


ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-B]|[=>78])")


LAUNCH = (
    "import faulthandler, signal, sys\n"
    "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
    "from agentloop._cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _controlling_tty() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """``agentloop ARGS`` on a pty: ``send`` keys, ``expect`` what the screen shows."""

    def __init__(
        self, args: list[str], *, cwd: Path, env: dict[str, str], columns: int = 100
    ) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
        self.master = master
        self.tty_name = os.ttyname(slave)
        self.process = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=_controlling_tty,
        )
        os.close(slave)  # the master then reads EOF once the program has exited
        self._raw = b""
        self._seen = 0
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                chunk = b""
            with self._changed:
                if not chunk:
                    self._raw += b"\0EOF"
                    self._changed.notify_all()
                    return
                self._raw += chunk
                self._changed.notify_all()

    @property
    def raw(self) -> str:
        return self._raw.decode("utf-8", "replace")

    @property
    def screen(self) -> str:
        """Everything written so far, escape sequences removed."""
        return ANSI.sub("", self.raw).replace("\r", "")

    def expect(self, pattern: str) -> str:
        """Wait until ``pattern`` (a regex) shows after what earlier expects consumed."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + TIMEOUT
        with self._changed:
            while True:
                text = self.screen
                found = regex.search(text, self._seen)
                if found:
                    self._seen = found.end()
                    return found.group(0)
                if text.endswith("\0EOF"):
                    raise AssertionError(f"exited before {pattern!r}:\n{text[-3000:]}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {pattern!r} within {TIMEOUT}s:\n{text[-3000:]}")
                self._changed.wait(left)

    def prompt(self) -> None:
        self.expect("›")

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def queued_input(self) -> int:
        """Bytes typed but not yet read by the program."""
        fd = os.open(self.tty_name, os.O_RDWR | os.O_NOCTTY)
        try:
            data = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        finally:
            os.close(fd)
        return int(struct.unpack("i", data)[0])

    def wait(self) -> int:
        code = self.process.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=TIMEOUT)
        os.close(self.master)


class Model:
    """The fake model: answers conversation requests with ``replies`` (each may first wait for
    an event), summaries with ``summary`` (which may wait too); records every request."""

    def __init__(self) -> None:
        self.replies: list[ReplySpec | Callable[[], ReplySpec]] = []
        self.requests: list[dict[str, Any]] = []
        self.summary_started = threading.Event()
        self.summary_release: threading.Event | None = None

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        if is_summary_request(body):
            self.summary_started.set()
            if self.summary_release is not None:
                self.summary_release.wait(TIMEOUT)
            return text_reply("## Goal\n- the summary")
        self.requests.append(body)
        reply = self.replies.pop(0) if self.replies else text_reply("ok")
        return reply() if callable(reply) else reply

    def compaction(self, body: dict[str, Any]) -> ReplySpec | None:
        """An on-demand compaction request (the API writes the summary): started and held
        like agentloop's own summary requests, then answered by the server."""
        self.summary_started.set()
        if self.summary_release is not None:
            self.summary_release.wait(TIMEOUT)
        return None

    def last_text(self, index: int = -1) -> str:
        content = self.requests[index]["messages"][-1]["content"]
        if isinstance(content, str):
            return content
        return "".join(b.get("text", "") for b in content if b.get("type") == "text")


@pytest.fixture
def model(fake_api: FakeAnthropicServer) -> Model:
    handler = Model()
    fake_api.handler = handler
    fake_api.compaction_handler = handler.compaction
    return handler


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def launch(fake_api: FakeAnthropicServer, workspace: Path) -> Iterator[Callable[..., Terminal]]:
    terminals: list[Terminal] = []
    # The pty's size is the terminal's: a COLUMNS or LINES inherited (pytest-xdist's workers
    # set 80x24) would override it.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(
        ANTHROPIC_BASE_URL=fake_api.base_url,
        ANTHROPIC_API_KEY="test-key",
        PYTHONPATH=os.pathsep.join([str(REPO.parent), str(REPO)]),  # this tree's agentloop
        TERM="xterm-256color",
        # A pty answers no cursor-position request; without this the editor waits for one.
        PROMPT_TOOLKIT_NO_CPR="1",
    )

    def start(*args: str, columns: int = 100) -> Terminal:
        terminal = Terminal(list(args), cwd=workspace, env=env, columns=columns)
        terminals.append(terminal)
        return terminal

    yield start
    for terminal in terminals:
        terminal.close()


def resize(term: Terminal, columns: int, rows: int = 30) -> None:
    """The terminal's new size, as a window manager sets it (the program gets SIGWINCH)."""
    fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def pipe_run(
    fake_api: FakeAnthropicServer, workspace: Path, stdin: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``agentloop ARGS`` with stdin a pipe (no terminal), against the test server."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update(
        ANTHROPIC_BASE_URL=fake_api.base_url, ANTHROPIC_API_KEY="test-key", PYTHONPATH=str(REPO)
    )
    return subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=workspace,
        env=env,
        timeout=TIMEOUT,
    )


@pytest.fixture
def piped(
    fake_api: FakeAnthropicServer,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., str]:
    """``piped(stdin, *args)``: ``agentloop ARGS`` in the workspace with ``stdin`` piped in, run in
    this process (``main()``, the model answering as ``model`` scripts it); what it printed.
    How a test stores the conversations its terminal then shows: the run is not what it tests,
    and a process of its own would cost a second of CPU or two for the SDK's imports."""

    def run(stdin: str, *args: str) -> str:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.chdir(workspace)
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        assert code == 0, err
        return out

    return run
