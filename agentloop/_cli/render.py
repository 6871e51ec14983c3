"""Text for the ``agentloop sessions`` commands: times, tables that fit the terminal, store values
as JSON-ready data. Pure functions; nothing here reads the store (messages as text and Markdown
are in :mod:`agentloop._cli.markup`).

Imports nothing heavy (no pydantic, no store) so that the sessions commands stay fast.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple, TextIO

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentloop._sessions import CompactionEntry


# ---------------------------------------------------------------------------- JSON


def print_json(value: object, out: TextIO) -> None:
    import json

    json.dump(value, out, ensure_ascii=False, indent=2)
    out.write("\n")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def plain(model: BaseModel) -> dict[str, object]:
    """A store value as JSON-ready data.

    Written out by hand: pydantic's serializer would build its schema on first use, which costs
    more than the whole of `sessions list` (its plugin discovery scans every installed package).
    """
    return {
        name: iso(value) if isinstance(value, datetime) else value
        for name in type(model).model_fields
        for value in (getattr(model, name),)
    }


# ---------------------------------------------------------------------------- words and tables


def when(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def ago(moment: datetime, now: datetime) -> str:
    seconds = (now - moment).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h ago"
    if seconds < 7 * 86400:
        return f"{int(seconds // 86400)}d ago"
    return moment.astimezone().strftime("%Y-%m-%d")


def home_short(path: str) -> str:
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def one_line(text: str) -> str:
    return " ".join(text.split())


def table(rows: Sequence[Sequence[str]], *, right: Iterable[int] = ()) -> list[str]:
    aligned_right = set(right)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in aligned_right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


class Column(NamedTuple):
    """A column of :func:`fit_table`: ``flex`` columns shrink (cut with …) down to
    ``min_width``; columns with ``drop`` > 0 are left out when even that does not fit, the
    highest first; ``keep_end`` cuts from the left (paths)."""

    name: str
    right: bool = False
    flex: bool = False
    min_width: int = 0
    drop: int = 0
    keep_end: bool = False


def cut(text: str, width: int, *, keep_end: bool = False) -> str:
    """``text`` in at most ``width`` characters, ``…`` marking what was cut."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    return "…" + text[len(text) - width + 1 :] if keep_end else text[: width - 1] + "…"


def fit_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None
) -> list[str]:
    """Rows under a header, in at most ``width`` columns (None: as wide as the cells)."""
    active = list(range(len(columns)))

    def natural(i: int) -> int:
        return max([len(columns[i].name), *(len(row[i]) for row in rows)])

    while True:
        widths = {i: natural(i) for i in active}
        if width is None or sum(widths.values()) + 2 * (len(active) - 1) <= width:
            break
        least = {
            i: min(widths[i], columns[i].min_width) if columns[i].flex else widths[i]
            for i in active
        }
        spare = width - sum(least.values()) - 2 * (len(active) - 1)
        droppable = [i for i in active if columns[i].drop]
        if spare < 0 and droppable:
            active.remove(max(droppable, key=lambda i: columns[i].drop))
            continue
        for i in active:
            if columns[i].flex:
                extra = min(widths[i] - least[i], max(spare, 0))
                widths[i] = least[i] + extra
                spare -= extra
        break
    lines = []
    for row in [[c.name for c in columns], *rows]:
        cells = []
        for i in active:
            column = columns[i]
            cell = cut(row[i], widths[i], keep_end=column.keep_end)
            cells.append(cell.rjust(widths[i]) if column.right else cell.ljust(widths[i]))
        lines.append(fit("  ".join(cells).rstrip(), width))
    return lines


def fit(line: str, width: int | None) -> str:
    if width is None or len(line) <= width:
        return line
    return line[: max(width - 1, 0)] + "…"


def fit_keeping_end(line: str, end: str, width: int | None) -> str:
    """``line`` then ``end``, cutting ``line`` (not ``end``) to fit ``width``."""
    if not end:
        return fit(line, width)
    if width is None or len(line) + 2 + len(end) <= width:
        return f"{line}  {end}"
    return f"{cut(line, max(width - len(end) - 2, 1))}  {end}"


def terminal_width(out: TextIO) -> int | None:
    # Only a person at a terminal wants lines cut to fit; pipes get everything.
    if not out.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError):
        return 100


def compaction_note(entry: CompactionEntry) -> str:
    note = f"← compacted {entry.messages_before:,} → {plural(entry.messages_after, 'msg')}"
    if entry.tokens_before is not None and entry.tokens_after is not None:
        note += f" ({entry.tokens_before:,} → {entry.tokens_after:,} tokens)"
    elif entry.tokens_before is not None:
        note += f" ({entry.tokens_before:,} tokens before)"
    return f"{note} by {entry.strategy}"
