"""No command outlives the agent: a watchdog per shell command kills its process group when
the agent's process ends, however it ends (normal exit, an exception, SIGTERM or SIGKILL).

Each command runs in its own process group. Beside it runs a tiny watchdog (``/bin/sh``, in a
session of its own so a Ctrl-C or a closed terminal does not take it down first) that reads
the group's id from a pipe and then waits on that pipe. Only this process holds the pipe's
write end, and the kernel closes it when the process dies: the watchdog then sees end-of-file
and kills the group. When a command is over and its group is empty, the agent tells the
watchdog ``done`` and it exits without killing. A group still alive after the command returned
(a ``server &``) is kept under watch until the agent exits.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading

__all__ = ["GroupWatch"]

_SCRIPT = 'read -r pgid || exit 0; read -r word; [ "$word" = done ] || kill -s KILL -- "-$pgid"'
_SHELL = "/bin/sh"

_lock = threading.Lock()
_watched: list[GroupWatch] = []
"""Watches of groups that were still alive when their command returned."""


class GroupWatch:
    """The watchdog of one command's process group (start it before the command)."""

    def __init__(self) -> None:
        _prune()
        self._fd: int | None = None
        self._pgid: int | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        if not os.path.exists(_SHELL):
            return  # no POSIX shell: commands are still killed on timeouts, just not at exit
        read_end, write_end = os.pipe()
        try:
            self._watchdog = subprocess.Popen(
                [_SHELL, "-c", _SCRIPT],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            os.close(write_end)
            return
        finally:
            os.close(read_end)
        self._fd = write_end

    @property
    def fd(self) -> int | None:
        """The watchdog's pipe: a command that writes its own group id there before it runs
        leaves no moment unwatched (see :meth:`watched`)."""
        return self._fd

    def watch(self, pgid: int) -> None:
        """From now on, the end of this process kills the group ``pgid``."""
        self._pgid = pgid
        self._send(f"{pgid}\n")

    def watched(self, pgid: int) -> None:
        """The command told the watchdog its group id itself (through :attr:`fd`, before it
        ran): only remember it, for :meth:`finish`."""
        self._pgid = pgid

    def finish(self) -> None:
        """The command returned: stand down if its group is empty, else keep watching it
        until this process exits."""
        if self._pgid is not None and _alive(self._pgid):
            with _lock:
                _watched.append(self)
            return
        self._release()

    def _release(self) -> None:
        self._send("done\n")
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout=5)
            self._watchdog = None

    def _send(self, text: str) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, text.encode())
        except OSError:  # the watchdog is gone (someone killed it): nothing to tell
            os.close(self._fd)
            self._fd = None


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prune() -> None:
    """Release the watches of groups that have ended since their command returned."""
    with _lock:
        ended = [w for w in _watched if w._pgid is None or not _alive(w._pgid)]
        _watched[:] = [w for w in _watched if w not in ended]
    for watch in ended:
        watch._release()
