"""Text for the ``agentloop sessions`` commands: times, tables that fit the terminal, store values
as JSON-ready data. Pure functions; nothing here reads the store (messages as text and Markdown
are in :mod:`agentloop._cli.markup`).

Imports nothing heavy (no pydantic, no store) so that the sessions commands stay fast.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from agentloop._cli.cells import cells, cut_cells, cut_words, pad
from agentloop._core.measuring.figures import plural, recorded_sources, token_figure

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


def one_line(text: str) -> str:
    return " ".join(text.split())


def table(rows: Sequence[Sequence[str]], *, right: Iterable[int] = ()) -> list[str]:
    aligned_right = set(right)
    widths = [max(cells(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        padded = [pad(cell, widths[i], right=i in aligned_right) for i, cell in enumerate(row)]
        lines.append("  ".join(padded).rstrip())
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
    """``text`` in at most ``width`` terminal cells, ``…`` marking what was cut."""
    return cut_cells(text, width, keep_end=keep_end)


def fit_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None
) -> list[str]:
    """Rows under a header, in at most ``width`` columns (None: as wide as the cells)."""
    active = list(range(len(columns)))

    def natural(i: int) -> int:
        return max([cells(columns[i].name), *(cells(row[i]) for row in rows)])

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
        shown = []
        for i in active:
            column = columns[i]
            if column.flex and not column.keep_end:  # text (a title): cut after a word, with …
                cell = cut_words(row[i], widths[i])
            else:
                cell = cut(row[i], widths[i], keep_end=column.keep_end)
            shown.append(pad(cell, widths[i], right=column.right))
        lines.append(fit("  ".join(shown).rstrip(), width))
    return lines


def fit(line: str, width: int | None) -> str:
    if width is None or cells(line) <= width:
        return line
    return cut_cells(line, max(width, 1))


def styled() -> bool:
    """Whether colors and other text attributes may be drawn: not when ``NO_COLOR`` is set to
    anything but the empty string (https://no-color.org)."""
    return not os.environ.get("NO_COLOR")


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


def compaction_figures(entry: CompactionEntry, metadata: Mapping[str, Any] | None) -> str:
    """A compaction's token figures, ``(17,194 → ~8,988 tokens)``, marked by the sources
    recorded in its child's ``metadata`` (see ``_core.measuring.figures``); "" if none."""
    before, after = recorded_sources(metadata)
    if entry.tokens_before is not None and entry.tokens_after is not None:
        return (
            f"({token_figure(entry.tokens_before, before)} → "
            f"{token_figure(entry.tokens_after, after)} tokens)"
        )
    if entry.tokens_before is not None:
        return f"({token_figure(entry.tokens_before, before)} tokens before)"
    return ""


def compaction_note(entry: CompactionEntry, metadata: Mapping[str, Any] | None = None) -> str:
    """``← compacted 19 → 3 msgs (4,224 → ~3,228 tokens) by summarize`` (``metadata``: the
    child's, where the figures' sources are recorded)."""
    note = f"← compacted {entry.messages_before:,} → {plural(entry.messages_after, 'msg')}"
    figures = compaction_figures(entry, metadata)
    if figures:
        note += f" {figures}"
    return f"{note} by {strategy_name(entry.strategy)}"


STRATEGY_NAMES = {"api_summary": "the API's summary", "server": "server-side compaction"}
"""Strategies as the user knows them: ``api_summary`` is a summary the API wrote (for
``auto``/``summarize``), ``server`` the README's server-side compaction."""


def strategy_name(strategy: str) -> str:
    """How a stored compaction's strategy is shown (the ``--compaction-strategy`` names)."""
    return STRATEGY_NAMES.get(strategy, strategy)


def compaction_json(
    entry: CompactionEntry, metadata: Mapping[str, Any] | None = None
) -> dict[str, object]:
    """A compaction entry as JSON-ready data, with where its figures came from
    (``tokens_before_source``/``tokens_after_source``: ``api``, ``api+estimate``,
    ``estimate``, or null when not recorded)."""
    before, after = recorded_sources(metadata)
    data = plain(entry)
    data["tokens_before_source"] = before if entry.tokens_before is not None else None
    data["tokens_after_source"] = after if entry.tokens_after is not None else None
    return data
