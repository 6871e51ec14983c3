"""Text measured in terminal cells, not characters: a CJK character or an emoji takes two
cells, a combining accent none. Tables, ``/help`` and the pickers fit the terminal by these.

wcwidth (Unicode's East Asian Width and emoji tables) is imported only for text that is not
ASCII, so the listing commands start as fast as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "cells",
    "cut_cells",
    "cut_words",
    "fit",
    "joined",
    "pad",
    "paragraph",
    "two_columns",
    "wrap_cells",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


_NARROW = str.maketrans(dict.fromkeys("·…↑↓←→—–×✓◀▶⎿", "x"))
"""Characters agentloop itself prints that take one cell each: text of ASCII and these is
measured without loading wcwidth's tables (``agentloop --help`` holds a few)."""


def cells(text: str) -> int:
    """How many terminal cells ``text`` takes (control characters count for nothing)."""
    if text.isprintable() and (text.isascii() or text.translate(_NARROW).isascii()):
        return len(text)
    from wcwidth import wcswidth

    width = wcswidth(text)
    return width if width >= 0 else max(wcswidth(_CONTROL.sub("", text)), 0)


def _prefix(text: str, width: int) -> str:
    """The longest start of ``text`` that fits ``width`` cells."""
    low, high = 0, len(text)
    while low < high:  # prefix widths never shrink as the prefix grows
        middle = (low + high + 1) // 2
        if cells(text[:middle]) <= width:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def _suffix(text: str, width: int) -> str:
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if cells(text[len(text) - middle :]) <= width:
            low = middle
        else:
            high = middle - 1
    return text[len(text) - low :]


def cut_cells(text: str, width: int, *, keep_end: bool = False) -> str:
    """``text`` in at most ``width`` cells, ``…`` marking what was cut (at the start when
    ``keep_end``: paths)."""
    if cells(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    return "…" + _suffix(text, width - 1) if keep_end else _prefix(text, width - 1) + "…"


def cut_words(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, cut after a whole word with ``…`` (inside a word only
    when the first word alone does not fit)."""
    if cells(text) <= width:
        return text
    head = _prefix(text, max(width - 1, 0))
    if text[len(head) : len(head) + 1] not in (" ", ""):  # the cut fell inside a word
        whole = head.rsplit(" ", 1)[0] if " " in head else ""
        head = whole or head
    return head.rstrip(" ,;:.-–—") + "…"


def pad(text: str, width: int, *, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` cells (on the left when ``right``)."""
    fill = " " * max(width - cells(text), 0)
    return fill + text if right else text + fill


def wrap_cells(text: str, width: int) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` cells (a word longer than a
    line is cut into pieces)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        while cells(word) > width > 0:
            if line:
                lines.append(line)
                line = ""
            piece = _prefix(word, width) or word[0]
            lines.append(piece)
            word = word[len(piece) :]
        if not word:
            continue
        if line and cells(line) + 1 + cells(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line or not lines:
        lines.append(line)
    return lines


def two_columns(
    rows: Sequence[tuple[str, str]], width: int | None, *, indent: int = 2, gap: int = 2
) -> list[str]:
    """``rows`` as a left column and a text wrapped beside it within ``width`` cells (None:
    unwrapped); too narrow for both side by side, the text goes under its left cell."""
    left = max(cells(name) for name, _ in rows)
    beside = None if width is None else width - indent - left - gap
    lines: list[str] = []
    for name, text in rows:
        if beside is None:
            lines.append(f"{' ' * indent}{pad(name, left)}{' ' * gap}{text}".rstrip())
        elif beside >= 20 and all(cells(word) <= beside for word in text.split()):
            first, *more = wrap_cells(text, beside)
            lines.append(f"{' ' * indent}{pad(name, left)}{' ' * gap}{first}".rstrip())
            lines += [" " * (indent + left + gap) + line for line in more]
        else:
            assert width is not None
            lines.append(cut_cells(" " * indent + name, width))
            under = " " * (indent + 4)
            lines += [under + line for line in wrap_cells(text, max(width - len(under), 1))]
    return lines


def joined(label: str, items: Sequence[str], width: int | None, sep: str = " · ") -> list[str]:
    """``label`` then ``items`` separated by ``sep``, broken between items to fit ``width``
    cells (continuation lines indented under the first item)."""
    indent = " " * cells(label)
    lines: list[str] = []
    line = label
    for item in items:
        fresh = line in (label, indent)
        candidate = line + ("" if fresh else sep) + item
        if width is None or cells(candidate) <= width or fresh:
            line = candidate
            continue
        lines.append(line)
        line = indent + item
    lines.append(line)
    if width is None:
        return lines
    return [part for one in lines for part in _fold(one, width, indent)]


def _fold(line: str, width: int, indent: str) -> list[str]:
    # One item alone wider than the terminal: wrapped at its spaces, under the first item.
    if cells(line) <= width:
        return [line]
    prefix = indent if indent and line.startswith(indent) else ""
    first, *more = wrap_cells(line[len(prefix) :], max(width - len(indent), 1))
    return [prefix + first, *(indent + part for part in more)]


def paragraph(text: str, width: int | None) -> list[str]:
    """``text`` wrapped to ``width`` cells (None: its own lines)."""
    return text.splitlines() if width is None else wrap_cells(text, width)


HANG = 2
"""How much further than its line a wrapped line's continuation is indented."""


def fit(text: str, width: int | None) -> str:
    """``text`` for a terminal of ``width`` cells (None: as it is): each line that does not fit
    is broken at spaces, never inside a word that fits a line, its continuations indented
    under the line's own indent plus :data:`HANG` (the one wrapping rule of what the terminal
    prints: notices, reports, the start and exit lines)."""
    if width is None:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        if cells(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip(" "))]
        hang = indent + " " * HANG
        if cells(hang) >= width // 2:  # too deep to leave room for words: no hanging indent
            indent = hang = ""
        first, *more = wrap_cells(line, width - cells(indent))
        out.append(indent + first)
        rest = " ".join(more)
        if rest:
            out += [hang + part for part in wrap_cells(rest, width - cells(hang))]
    return "\n".join(out)
