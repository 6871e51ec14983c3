"""The ``-r`` picker on a terminal: the recent conversations of the workspace as a numbered
table that fits the terminal, one of them marked; ↑/↓ or a number moves the mark, Enter
resumes the marked one, ``q`` (or Esc, Ctrl-D) resumes none."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from agentloop._cli.resume import NothingChosen, Picker

if TYPE_CHECKING:
    from agentloop._sessions import Conversation

MARK = "›"
_NONE = frozenset({"q", "Q", "n", "N", "escape", "eof", "interrupt"})


def _prompt(count: int, chosen: int) -> str:
    if count == 1:
        return "Resume it? [Enter: yes, q: no] "
    return f"Resume which? [↑↓ or 1-{count}, Enter: resume, q: none] {chosen}"


def terminal_picker(read_key: Callable[[], str], screen: TextIO) -> Picker:
    """A :data:`~agentloop._cli.resume.Picker` drawn on ``screen``, answered with the keys
    ``read_key`` returns (see :meth:`~agentloop._cli.terminal.TerminalInput.read_key`)."""

    def pick(recent: Sequence[Conversation], workspace: str) -> str:
        from datetime import UTC, datetime

        from agentloop._cli.render import Column, ago, fit_table, home_short, one_line
        from agentloop._cli.render import terminal_width as width_of

        now = datetime.now(UTC)
        columns = [
            Column("#", right=True),
            Column("UPDATED"),
            Column("ID"),
            Column("MSGS", right=True),
            Column("TITLE", flex=True, min_width=12),
        ]
        rows = [
            [
                str(number),
                ago(c.updated_at, now),
                c.head.id[:8],
                f"{c.head.message_count:,}",
                one_line(c.head.title) if c.head.title else "-",
            ]
            for number, c in enumerate(recent, start=1)
        ]
        width = width_of(screen)
        # Two cells for the mark and its space: the table and they fit the terminal together.
        table = fit_table(columns, rows, None if width is None else width - 2)
        header, lines = table[0], table[1:]
        screen.write(f"Recent conversations in {home_short(workspace)}:\n  {header}\n")
        chosen, typed = 1, ""

        def draw(again: bool) -> None:
            if again:  # back over the rows and the prompt line
                screen.write(f"\r\x1b[{len(lines)}A")
            for number, line in enumerate(lines, start=1):
                mark = MARK if number == chosen else " "
                screen.write(f"\r\x1b[K{mark} {line}\n")
            screen.write(f"\r\x1b[K{_prompt(len(recent), chosen)}")
            screen.flush()

        draw(again=False)
        while True:
            key = read_key()
            if key in _NONE:
                screen.write("\n")
                raise NothingChosen("no session resumed (none chosen)")
            if key == "enter":
                screen.write("\n")
                return recent[chosen - 1].head.id
            if key == "up":
                chosen, typed = max(chosen - 1, 1), ""
            elif key == "down":
                chosen, typed = min(chosen + 1, len(recent)), ""
            elif key.isdigit() and 1 <= int(typed + key) <= len(recent):
                typed += key
                chosen = int(typed)
            elif key.isdigit() and 1 <= int(key) <= len(recent):
                typed, chosen = key, int(key)
            elif key == "backspace":
                typed = typed[:-1]
            else:
                continue
            draw(again=True)

    return pick
