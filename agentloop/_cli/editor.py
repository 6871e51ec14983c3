"""Reading the user's messages: a line editor on a terminal, one line per message from a pipe.

On a terminal (prompt_toolkit): line editing, history (↑) kept across runs, a bracketed paste is
one message, ``\\`` at the end of a line or Alt-Enter starts a new line, Ctrl-C clears the line
(and only that: quitting takes two presses on an empty line), Ctrl-D on an empty line quits.

A long paste shows as ``[pasted 300 lines]`` in the line (and so in the history, which keeps no
megabytes); the message sent holds the pasted text. The history file is cut to its newest
entries when it outgrows :data:`HISTORY_MAX_BYTES`, and an entry over
:data:`HISTORY_MAX_ENTRY_CHARS` is not kept in it.

From a pipe: one message per line, bytes that are not UTF-8 replaced (never a crash).
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, TextIO

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.styles import BaseStyle

PROMPT = "› "
QUIT_HINT = "Press Ctrl-C again to quit (Ctrl-D or /exit also quit)"
HISTORY_FILE = "history"
HISTORY_MAX_BYTES = 1_000_000
HISTORY_MAX_ENTRY_CHARS = 10_000
PASTE_FOLD_LINES = 10
"""A paste of this many lines or more is shown folded, as ``[pasted N lines]``."""
PASTE_FOLD_CHARS = 1_000
_ENTRY_START = re.compile(rb"(?=\n# )")  # prompt_toolkit's entries: "\n# time\n+line\n..."


class Reader(Protocol):
    """Where messages come from; ``read`` returns None when the user is done."""

    def read(self, default: str = "") -> str | None: ...


def clean_text(text: str) -> str:
    """``text`` as valid UTF-8: lone surrogates (undecodable bytes) become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "replace")
    return raw.decode("utf-8", "replace")


class PipeReader:
    """One message per line of a stream (bytes decoded with replacement)."""

    def __init__(self, stream: TextIO) -> None:
        self._binary: BinaryIO | None = getattr(stream, "buffer", None)
        self._text = stream

    def read(self, default: str = "") -> str | None:
        if self._binary is not None:
            raw = self._binary.readline()
            if not raw:
                return None
            return raw.decode("utf-8", "replace").rstrip("\r\n")
        line = self._text.readline()
        if line == "":
            return None
        return clean_text(line.rstrip("\r\n"))


def history_path(directory: Path) -> Path | None:
    """The history file (mode 0600: messages may hold secrets); None if it cannot be made.
    One grown past :data:`HISTORY_MAX_BYTES` is cut to its newest entries first."""
    path = directory / HISTORY_FILE
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        if path.stat().st_size > HISTORY_MAX_BYTES:
            trim_history(path)
    except OSError:
        return None
    return path


def trim_history(path: Path) -> None:
    """Keep the newest entries of the history file that fit in half of
    :data:`HISTORY_MAX_BYTES` (entries over :data:`HISTORY_MAX_ENTRY_CHARS` dropped)."""
    data = path.read_bytes()
    bounds = [0, *(m.start() for m in _ENTRY_START.finditer(data)), len(data)]
    entries = [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    kept: list[bytes] = []
    size = 0
    for entry in reversed(entries):
        if len(entry) > 4 * HISTORY_MAX_ENTRY_CHARS + 100:  # (UTF-8: up to 4 bytes a char)
            continue
        if size + len(entry) > HISTORY_MAX_BYTES // 2:
            break
        kept.append(entry)
        size += len(entry)
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(b"".join(reversed(kept)))
    os.replace(temporary, path)


class Pastes:
    """Long pastes folded into a label in the line; :meth:`expand` puts them back."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def fold(self, text: str) -> str:
        """What to insert for the pasted ``text``: itself, or a label when it is long."""
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.rstrip("\n").count("\n") + 1
        if lines < PASTE_FOLD_LINES and len(text) < PASTE_FOLD_CHARS:
            return text
        size = f"{lines:,} lines" if lines > 1 else f"{len(text):,} characters"
        label = f"[pasted {size}]"
        number = 1
        while self._texts.get(label, text) != text:
            number += 1
            label = f"[pasted {size} #{number}]"
        self._texts[label] = text
        return label

    def expand(self, line: str) -> str:
        """``line`` with every label of this run replaced by what was pasted."""
        for label, text in self._texts.items():
            if label in line:
                line = line.replace(label, text)
        return line


class _Armed:
    """Whether the last key was a Ctrl-C that left the line empty (the next one quits)."""

    def __init__(self) -> None:
        self.on = False


class TerminalReader:
    """The line editor on the terminal (prompt_toolkit); prompt and editing drawn on ``output``."""

    def __init__(self, *, history: Path | None, output: TextIO) -> None:
        self._armed = _Armed()
        self._pastes = Pastes()
        self._output = output
        self._session = _prompt_session(history, output, self._armed, self._pastes)

    def read(self, default: str = "") -> str | None:
        """The next message; None when the user quits (Ctrl-D on an empty line, Ctrl-C twice)."""
        self._armed.on = False
        try:
            text = self._session.prompt(PROMPT, default=default)
        except (EOFError, KeyboardInterrupt):
            return None
        self._echo(text)
        return clean_text(self._pastes.expand(text))

    def _echo(self, text: str) -> None:
        """What was typed, drawn again wrapped at words (the editor wraps it at any character
        while it is edited, and erases it when done)."""
        from agentloop._cli.cells import fit
        from agentloop._cli.render import terminal_width

        shown = PROMPT + text.replace("\n", "\n" + " " * len(PROMPT))
        self._output.write(fit(shown, terminal_width(self._output)) + "\n")
        self._output.flush()


class InputReader:
    """The terminal without prompt_toolkit: ``input()`` with the same Ctrl-C/Ctrl-D rules."""

    def __init__(self, output: TextIO) -> None:
        self._output = output

    def read(self, default: str = "") -> str | None:
        armed = False
        while True:
            try:
                text = input(PROMPT)
            except EOFError:
                return None
            except KeyboardInterrupt:
                if armed:
                    return None
                armed = True
                self._output.write(f"\n{QUIT_HINT}\n")
                continue
            return clean_text(text)


def terminal_reader(*, history: Path | None, output: TextIO) -> Reader:
    """The line editor (prompt_toolkit), or plain ``input()`` where it is not installed."""
    try:
        return TerminalReader(history=history, output=output)
    except ImportError:
        return InputReader(output)


def _prompt_session(
    history: Path | None, output: TextIO, armed: _Armed, pastes: Pastes
) -> PromptSession[str]:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.formatted_text import FormattedText
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.keys import Keys
    from prompt_toolkit.output import create_output

    class CappedHistory(FileHistory):
        def store_string(self, string: str) -> None:
            if len(string) <= HISTORY_MAX_ENTRY_CHARS:  # the file stays small
                super().store_string(string)

    bindings = KeyBindings()

    @bindings.add(Keys.BracketedPaste)
    def _paste(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text(pastes.fold(event.data))

    @bindings.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text:  # clears the line; only Ctrl-C on an empty line arms quitting
            buffer.reset()
            armed.on = False
        elif armed.on:
            event.app.exit(exception=KeyboardInterrupt())
        else:
            armed.on = True

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        before = buffer.document.text_before_cursor
        if before.endswith("\\") and not buffer.document.text_after_cursor.strip():
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
            return
        buffer.validate_and_handle()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    def placeholder() -> FormattedText:
        return FormattedText([("class:placeholder", QUIT_HINT if armed.on else "")])

    session: PromptSession[str] = PromptSession(
        history=CappedHistory(str(history)) if history is not None else InMemoryHistory(),
        key_bindings=bindings,
        output=create_output(stdout=output),
        placeholder=placeholder,
        prompt_continuation=lambda width, _line, _wrap: " " * width,
        erase_when_done=True,  # then drawn again, wrapped at words (TerminalReader._echo)
        style=_style(),
    )

    # Typing after a Ctrl-C disarms it: only Ctrl-C, Ctrl-C quits.
    def disarm(_buffer: object) -> None:
        if session.default_buffer.text:
            armed.on = False

    session.default_buffer.on_text_changed += disarm
    return session


def _style() -> BaseStyle:
    from prompt_toolkit.styles import Style

    return Style.from_dict({"placeholder": "#888888"})
