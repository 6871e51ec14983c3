"""A one-line spinner on the terminal ("Thinking…", "Compacting conversation…").

:meth:`Spinner.stop` joins the drawing thread and clears the line before it returns, so nothing
written afterwards (a reply, a notice, the prompt) can be drawn over, and an interrupt never
leaves a thread behind.
"""

from __future__ import annotations

import threading
from typing import TextIO

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
CLEAR_LINE = "\r\033[K"


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
                self.stream.write(f"{CLEAR_LINE}{FRAMES[index % len(FRAMES)]} {self._label}")
                self.stream.flush()
                self._drawn = True
            index += 1
