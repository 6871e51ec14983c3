"""A one-line spinner on the terminal: ``⠹ Thinking… (12s · Ctrl-C to interrupt)``.

The time counts from when the spinner started (a new label, e.g. after a tool call, keeps it).

:meth:`Spinner.stop` joins the drawing thread and clears the line before it returns, so nothing
written afterwards (a reply, a notice, the prompt) can be drawn over, and an interrupt never
leaves a thread behind.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
CLEAR_LINE = "\r\033[K"
INTERRUPT_HINT = "Ctrl-C to interrupt"


def elapsed(seconds: float) -> str:
    """``7s``, ``1m 05s``, ``1h 02m``: how long the spinner has been turning."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def spinner_line(frame: str, label: str, seconds: float) -> str:
    """One drawing of the spinner."""
    return f"{frame} {label} ({elapsed(seconds)} · {INTERRUPT_HINT})"


class Spinner:
    """Draws ``label`` with a turning frame on ``stream`` until stopped; off when not enabled."""

    def __init__(self, stream: TextIO, *, enabled: bool, interval: float = 0.1) -> None:
        self.stream = stream
        self.enabled = enabled
        self.interval = interval
        self._label = ""
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._drawn = False
        self._started = 0.0

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, label: str) -> None:
        """Show ``label`` (a running spinner just changes its label)."""
        if not self.enabled:
            return
        with self._lock:
            self._label = label
            if self._thread is not None:
                return
            stop = threading.Event()
            self._started = time.monotonic()
            thread = threading.Thread(
                target=self._spin, args=(stop,), name="agentloop-spinner", daemon=True
            )
            self._stop, self._thread = stop, thread
        thread.start()

    def stop(self) -> None:
        """Stop drawing and clear the line; returns once the drawing thread has ended."""
        with self._lock:
            stop, thread = self._stop, self._thread
            self._stop = self._thread = None
        if stop is None or thread is None:
            return
        stop.set()
        thread.join()
        with self._lock:
            if self._drawn:
                self._drawn = False
                self.stream.write(CLEAR_LINE)
                self.stream.flush()

    def _spin(self, stop: threading.Event) -> None:
        index = 0
        # The first frame waits one interval: a quick answer shows no spinner at all.
        while not stop.wait(self.interval):
            with self._lock:
                if stop.is_set():
                    return
                frame = FRAMES[index % len(FRAMES)]
                line = spinner_line(frame, self._label, time.monotonic() - self._started)
                self.stream.write(CLEAR_LINE + line)
                self.stream.flush()
                self._drawn = True
            index += 1
