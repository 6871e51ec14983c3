"""Runs of the ``agentloop`` console script without paying for its imports each time: a zygote
process imports what the console script imports (``anthropic`` alone costs about a second of
CPU here) once, then forks a child per run. The child takes the run's stdin, stdout and stderr
(passed as descriptors), working directory, environment and arguments, closes every other
descriptor, and calls the console script's ``main()`` exactly as the script does
(``sys.exit(main())``; ``main()`` ends the process itself). It is a real process of its own: its
own pid, pipes, store connections, leases and children; ``kill -9`` kills it as it would kill
the script.

What a fork does not give (so tests about them exec the console script instead): a fresh
environment *block* (``/proc/<pid>/environ`` shows the zygote's, not ``env``), arguments that
are not valid UTF-8, a fresh peak-memory figure, a terminal. :class:`ForkedPopen` has the part
of :class:`subprocess.Popen` that :class:`support.processes.AgentProcess` uses; signals go through
a pidfd, so a signal never reaches another process that reused the pid.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

_MAX_MESSAGE = 1 << 20
ZYGOTE_GONE = 1000
"""The exit code of a run whose zygote died first (no process exits with it): never taken for
a kill or an exit of the run's own."""

# The zygote. Its own stdin, stdout and stderr are pipes, as a run's are: the standard streams
# Python made for them at start-up (encoding, buffering, not seekable, not a terminal) are the
# ones a run's would get, and the child keeps them over the descriptors it is given.
ZYGOTE = r"""
import array, importlib, json, os, pkgutil, select, socket, sys

import agentloop._cli.main

# What a run imports (anthropic alone is the better part of a run's CPU), and every module of
# agentloop's rooms and of the store: a run never reads one of them from disk later, so it
# runs the code as it was when the zygote started, all of it (the tests restart the zygote
# when a source file changes), never a mix of that and a file edited since.
names = ["anthropic", "tiktoken", "psycopg"]
for package in ("agentloop._core", "agentloop._adapters", "agentloop._loop",
                "agentloop._agent", "agentloop._cli", "sessions"):
    names.append(package)
    path = importlib.import_module(package).__path__
    names += [info.name for info in pkgutil.walk_packages(path, package + ".")]
for name in names:
    try:
        importlib.import_module(name)
    except ImportError:
        pass  # an optional dependency that is not installed: a run would not have it either

control = socket.socket(fileno=int(sys.argv[1]))


def receive():
    fds = array.array("i")
    message, ancillary, _, _ = control.recvmsg(1 << 20, socket.CMSG_SPACE(8 * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return message, list(fds)


def serve():
    children = {}  # pidfd -> (request id, pid)
    listening = True
    while listening or children:
        ready, _, _ = select.select(([control] if listening else []) + [*children], [], [])
        for fd in ready:
            if fd is control:
                message, fds = receive()
                if not message:  # retired: no more runs; report those under way, then end
                    listening = False
                    continue
                request = json.loads(message)
                pid = os.fork()
                if pid == 0:
                    control.close()
                    for pidfd in children:
                        os.close(pidfd)
                    for target, source in enumerate(fds):
                        os.dup2(source, target)
                    os.closerange(len(fds), os.sysconf("SC_OPEN_MAX"))
                    os.chdir(request["cwd"])
                    os.environ.clear()
                    os.environ.update(request["env"])
                    sys.argv = request["argv"]
                    if len(fds) > 3:  # a gate: go once the tests close its other end
                        os.read(3, 1)
                        os.close(3)
                    return True
                for source in fds:
                    os.close(source)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = (request["id"], pid)
                reply = json.dumps({"id": request["id"], "pid": pid}).encode()
                rights = (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))
                control.sendmsg([reply], [rights])
            else:
                ident, pid = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                control.send(json.dumps({"id": ident, "code": code}).encode())


if serve():
    # A forked run: what the console script does.
    sys.exit(agentloop._cli.main.main())
"""


class ForkedPopen:
    """A run forked by the zygote, with the :class:`subprocess.Popen` surface the fault suite
    uses (``pid``, ``stdin``/``stdout``/``stderr``, ``wait``, ``poll``, ``send_signal``,
    ``kill``, ``returncode``)."""

    def __init__(self, zygote: Zygote, ident: int) -> None:
        self._zygote = zygote
        self.ident = ident
        self.pid = 0
        self._pidfd = -1
        self.returncode: int | None = None
        self.started = threading.Event()
        self.exited = threading.Event()
        self.stdin: IO[bytes] | None = None
        self.stdout: IO[bytes] | None = None
        self.stderr: IO[bytes] | None = None

    def _started(self, pid: int, pidfd: int) -> None:
        self.pid, self._pidfd = pid, pidfd
        self.started.set()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self.exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self.exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked agentloop {self.pid}", timeout or 0)
        assert self.returncode is not None
        with self._zygote.lock:
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1
        return self.returncode

    def send_signal(self, sig: int) -> None:
        with self._zygote.lock:
            if self._pidfd < 0 or self.returncode is not None:
                return
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """One zygote per test process, started on first use (:func:`zygote`), replaced when a
    source file of agentloop or the store changed since it started."""

    def __init__(self) -> None:
        self.stamp = source_stamp()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = ours
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, str(theirs.fileno())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        self.lock = threading.Lock()
        self.runs: dict[int, ForkedPopen] = {}
        self._next = 0
        self.log = bytearray()
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=self._drain, args=(stream,), daemon=True).start()
        threading.Thread(target=self._listen, daemon=True).start()

    def _drain(self, stream: Any) -> None:
        while chunk := os.read(stream.fileno(), 65_536):
            self.log += chunk  # the zygote's own failures, for the message of a test

    def _listen(self) -> None:
        while True:
            fds = array.array("i")
            try:
                message, ancillary, _, _ = self.control.recvmsg(
                    _MAX_MESSAGE, socket.CMSG_SPACE(fds.itemsize)
                )
            except OSError:
                message, ancillary = b"", []
            if not message:
                with self.lock:
                    for run in self.runs.values():  # the zygote is gone: so are its runs' news
                        run._exited(ZYGOTE_GONE)
                    self.runs.clear()
                self.process.wait()
                return
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
            news = json.loads(message)
            with self.lock:
                run = self.runs[news["id"]]
                if "pid" in news:
                    run._started(news["pid"], fds[0])
                else:
                    del self.runs[news["id"]]
                    run._exited(news["code"])

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        gate: int | None = None,
    ) -> ForkedPopen:
        """A forked run of ``argv`` (``argv[0]``: the console script's path), its standard
        streams pipes, as ``subprocess.Popen(argv, stdin=PIPE, stdout=PIPE, stderr=PIPE)``;
        with a ``gate`` (a pipe's read end), it starts only once the pipe's write end is
        closed (several runs let go at the same moment)."""
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        with self.lock:
            ident = self._next
            self._next += 1
            run = ForkedPopen(self, ident)
            self.runs[ident] = run
        request = json.dumps(
            {"id": ident, "argv": list(argv), "cwd": str(cwd), "env": dict(env)}
        ).encode()
        theirs = [stdin_r, stdout_w, stderr_w]
        try:
            rights = array.array("i", [*theirs, *([] if gate is None else [gate])])
            self.control.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
        finally:
            for fd in theirs:
                os.close(fd)
        # Buffered, as Popen makes them; closed by their users, as Popen's are.
        run.stdin = open(stdin_w, "wb")  # noqa: SIM115
        run.stdout = open(stdout_r, "rb")  # noqa: SIM115
        run.stderr = open(stderr_r, "rb")  # noqa: SIM115
        if not run.started.wait(60):
            raise RuntimeError(f"the zygote did not fork: {self.log.decode(errors='replace')}")
        return run

    def retire(self) -> None:
        """No more runs: the zygote ends once the runs under way have ended (and been told)."""
        with contextlib.suppress(OSError):
            self.control.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.retire()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.control.close()
        assert self.process.stdin is not None
        self.process.stdin.close()


def source_stamp() -> tuple[int, int]:
    """How many source files agentloop and the store have, and the newest one's mtime."""
    import agentloop
    import sessions

    stamps = []
    for package in (agentloop, sessions):
        for path in Path(package.__file__ or "").parent.rglob("*.py"):
            with contextlib.suppress(FileNotFoundError):  # a file being replaced
                stamps.append(path.stat().st_mtime_ns)
    return len(stamps), max(stamps, default=0)


_zygote: Zygote | None = None
_zygote_lock = threading.Lock()


def zygote() -> Zygote:
    """The test process's zygote: started at first use, ended when the process exits, and
    replaced (the old one retired) when agentloop's or the store's source changed since it
    started, so that a run runs the code an exec of the script would run."""
    global _zygote
    with _zygote_lock:
        if _zygote is not None and (
            _zygote.process.poll() is not None or _zygote.stamp != source_stamp()
        ):
            _zygote.retire()
            _zygote = None
        if _zygote is None:
            _zygote = Zygote()
            atexit.register(_zygote.close)
        return _zygote
