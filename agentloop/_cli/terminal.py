"""The user's terminal while the agent works: what is typed meanwhile is neither echoed over the
reply nor lost, and never taken as the answer to a question it was not typed for.

While a turn runs (:meth:`TerminalInput.busy`) the terminal does not echo and does not wait for
whole lines, but Ctrl-C still interrupts. Keys typed then stay queued, and the next prompt reads
them as if typed there (type-ahead). Before a question (the shell-command consent) the queue is
taken out (:meth:`TerminalInput.take_pending`) and kept for the next prompt, so the answer is
what the user types after seeing the question.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import termios
from collections.abc import Iterator
from typing import Any

# Escape sequences (arrow keys, bracketed-paste markers...) are not text to keep.
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|O.|.)?", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_typed(text: str) -> str:
    """Typed keys as text: escape sequences and control characters dropped, CR as newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", _ESCAPES.sub("", text))


_KEYS = (
    ("\x1b[A", "up"),
    ("\x1bOA", "up"),
    ("\x1b[B", "down"),
    ("\x1bOB", "down"),
    ("\r\n", "enter"),
    ("\r", "enter"),
    ("\n", "enter"),
    ("\x7f", "backspace"),
    ("\x08", "backspace"),
    ("\x04", "eof"),
    ("\x03", "interrupt"),
    ("\x1b", "escape"),
)


class TerminalInput:
    """The terminal on file descriptor ``fd`` (standard input)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._kept: list[str] = []
        self._keys = ""
        """Keys read and not yet returned by :meth:`read_key` (several may come at once)."""

    def _attrs(self) -> list[Any] | None:
        try:
            return termios.tcgetattr(self.fd)
        except termios.error:
            return None

    def _set(self, attrs: list[Any]) -> None:
        # TCSANOW: TCSAFLUSH would throw away what the user typed ahead.
        with contextlib.suppress(termios.error):
            termios.tcsetattr(self.fd, termios.TCSANOW, attrs)

    @contextlib.contextmanager
    def _local_modes(self, on: int, off: int) -> Iterator[None]:
        """The terminal's local modes with ``on`` set and ``off`` cleared, restored after (no
        change where stdin is no terminal)."""
        saved = self._attrs()
        if saved is None:
            yield
            return
        changed = [list(item) if isinstance(item, list) else item for item in saved]
        lflag = changed[3]
        assert isinstance(lflag, int)
        changed[3] = (lflag & ~off) | on
        self._set(changed)
        try:
            yield
        finally:
            self._set(saved)

    def busy(self) -> contextlib.AbstractContextManager[None]:
        """While the agent works: no echo, no line buffering; Ctrl-C still interrupts."""
        return self._local_modes(on=termios.ISIG, off=termios.ECHO | termios.ICANON)

    def take_pending(self) -> str:
        """Read what was typed and not yet read (without waiting) and keep it for later."""
        chunks: list[bytes] = []
        with contextlib.suppress(OSError, ValueError):
            while select.select([self.fd], [], [], 0)[0]:
                chunk = os.read(self.fd, 4096)
                if not chunk:
                    break
                chunks.append(chunk)
        text = clean_typed(b"".join(chunks).decode("utf-8", "replace"))
        if text:
            self._kept.append(text)
        return text

    def kept(self) -> str:
        """What :meth:`take_pending` kept, once (a trailing newline dropped); then empty."""
        text = "".join(self._kept).rstrip("\n")
        self._kept.clear()
        return text

    def read_key(self) -> str:
        """One key typed now, not echoed: ``up``, ``down``, ``enter``, ``backspace``, ``eof``
        (Ctrl-D, or the terminal closed), ``interrupt`` (Ctrl-C), ``escape`` or the character."""
        with self._local_modes(on=0, off=termios.ECHO | termios.ICANON | termios.ISIG):
            while not self._keys:
                chunk = os.read(self.fd, 64)
                if not chunk:
                    return "eof"
                self._keys += chunk.decode("utf-8", "replace")
            for sequence, key in _KEYS:
                if self._keys.startswith(sequence):
                    self._keys = self._keys[len(sequence) :]
                    return key
            if self._keys[:2] in ("\x1b[", "\x1bO") and len(self._keys) > 2:
                self._keys = self._keys[3:]  # another arrow or function key: ignored
                return "other"
            key, self._keys = self._keys[0], self._keys[1:]
            return key

    def cooked(self) -> contextlib.AbstractContextManager[None]:
        """What is typed now is echoed and edited by the terminal, a line at a time (a question
        shown inside it has its answer echoed however fast it is typed)."""
        return self._local_modes(on=termios.ECHO | termios.ICANON | termios.ISIG, off=0)

    def read_line(self, prompt: str = "") -> str:
        """One line typed now, echoed (the terminal's own line editing); EOFError at Ctrl-D."""
        with self.cooked():
            data = b""
            while not data.endswith(b"\n"):
                chunk = os.read(self.fd, 4096)
                if not chunk:
                    if not data:
                        raise EOFError
                    break
                data += chunk
            return data.decode("utf-8", "replace").rstrip("\r\n")
