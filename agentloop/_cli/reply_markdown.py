"""A streamed reply shown as Markdown on a terminal (rich): headings, emphasis, lists, code
blocks highlighted, tables.

The reply arrives in pieces; a block is drawn once it is complete (a blank line outside a code
block, or the fence that closes one), so that nothing drawn has to be taken back. What is left
is drawn when the reply ends or is interrupted. rich is imported on the first block, never at
start-up (``--help`` and ``sessions list`` stay fast).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TextIO

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_THEME = "ansi_dark"
"""Code in the terminal's own colours, readable on light and dark backgrounds alike."""


def complete_blocks(text: str) -> tuple[list[str], str]:
    """``text`` split into the Markdown blocks that are complete and the rest."""
    blocks: list[str] = []
    start = 0
    fence: str | None = None
    position = 0
    lines = text.split("\n")
    # The last piece has no newline yet: it may still grow.
    for line in lines[:-1]:
        end = position + len(line) + 1
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
                if line.strip() == opening.group(1):  # a closing fence ends the block
                    blocks.append(text[start:end])
                    start = end
        elif opening:
            fence = opening.group(1)
        elif not line.strip():
            if text[start:position].strip():
                blocks.append(text[start:position])
            start = end
        position = end
    return blocks, text[start:]


class MarkdownStream:
    """Draws the Markdown of a streamed reply on ``out`` as its blocks complete;
    ``before_draw`` is called before each (the spinner goes); ``width`` None: the terminal's."""

    def __init__(
        self, out: TextIO, before_draw: Callable[[], None], width: int | None = None
    ) -> None:
        self.out = out
        self.before_draw = before_draw
        self.width = width
        self._pending = ""
        self._drawn = 0

    def feed(self, delta: str) -> None:
        """Take more of the reply; draw the blocks it completes."""
        self._pending += delta
        blocks, self._pending = complete_blocks(self._pending)
        for block in blocks:
            self._draw(block)

    @property
    def pending(self) -> bool:
        """Whether part of the reply is received and not drawn yet."""
        return bool(self._pending.strip())

    def finish(self) -> None:
        """Draw what is left (the reply ended or was interrupted); the next reply starts anew."""
        rest, self._pending = self._pending, ""
        if rest.strip():
            self._draw(rest)
        self._drawn = 0

    def _draw(self, block: str) -> None:
        text = render(block, self.width)
        self.before_draw()
        self.out.write(("\n" if self._drawn else "") + text + "\n")
        self.out.flush()
        self._drawn += 1


_TRAILING_SPACE = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)


def render(block: str, width: int | None = None) -> str:
    """One Markdown block as terminal text (no trailing spaces, no blank lines around it)."""
    import io
    import shutil

    from rich.console import Console
    from rich.markdown import Markdown

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or shutil.get_terminal_size().columns,
        force_terminal=True,
        highlight=False,
    )
    console.print(Markdown(block.strip("\n"), code_theme=CODE_THEME, hyperlinks=False))
    # rich pads every line to the full width: copied text would carry the spaces.
    lines = _TRAILING_SPACE.sub(r"\1", buffer.getvalue()).split("\n")
    while lines and not _visible(lines[0]):
        lines.pop(0)
    while lines and not _visible(lines[-1]):
        lines.pop()
    return "\n".join(lines)


def _visible(line: str) -> bool:
    return bool(re.sub(r"\x1b\[[0-9;]*m", "", line).strip())
