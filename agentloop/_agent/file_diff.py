"""What write_file and edit_file changed, as a compact diff for the person watching.

The model gets its one-line result; the terminal shows :attr:`FileChange.diff` under the tool
line (a few numbered lines: ``-`` removed, ``+`` added, context unmarked), cut after
:data:`DIFF_MAX_LINES`. Files beyond :data:`DIFF_MAX_CHARS` get the counts only: a diff of
megabytes would cost more than it shows.
"""

from __future__ import annotations

import difflib

from agentloop._agent.secrets import redact
from agentloop._core.measuring.figures import plural
from agentloop._core.values.tool import ToolResult

__all__ = ["FileChange", "compact_diff"]

DIFF_MAX_LINES = 16
DIFF_MAX_CHARS = 400_000
DIFF_LINE_CHARS = 160


class FileChange(ToolResult):
    """A write_file/edit_file result that also carries the change, for display only: it
    equals the plain :class:`ToolResult` with the same content (what the model gets)."""

    __slots__ = ("diff",)
    diff: str

    def __init__(self, content: str, is_error: bool = False, *, diff: str = "") -> None:
        super().__init__(content, is_error)
        object.__setattr__(self, "diff", diff)  # frozen, as its base

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ToolResult):
            return (self.content, self.is_error) == (other.content, other.is_error)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.content, self.is_error))


def _summary(added: int, removed: int) -> str:
    if added and removed:
        return f"{plural(added, 'line')} added, {removed:,} removed"
    if added:
        return f"{plural(added, 'line')} added"
    if removed:
        return f"{plural(removed, 'line')} removed"
    return "no line changed"


def compact_diff(before: str | None, after: str) -> str:
    """The change from ``before`` (None: a new file) to ``after``: a summary line, then the
    changed lines with their numbers and one line of context (secrets redacted)."""
    old = [] if before is None else before.splitlines()
    new = after.splitlines()
    if len(after) + len(before or "") > DIFF_MAX_CHARS:
        return f"{plural(len(new), 'line')} now (too large to show the change)"
    lines: list[str] = []
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for group in matcher.get_grouped_opcodes(1):
        if lines:
            lines.append("     ⋮")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [_line(j1 + k + 1, " ", new[j1 + k]) for k in range(i2 - i1)]
                continue
            lines += [_line(i1 + k + 1, "-", old[i1 + k]) for k in range(i2 - i1)]
            lines += [_line(j1 + k + 1, "+", new[j1 + k]) for k in range(j2 - j1)]
            removed += i2 - i1
            added += j2 - j1
    head = "new file, " + plural(added, "line") if before is None else _summary(added, removed)
    if len(lines) > DIFF_MAX_LINES:
        hidden = len(lines) - DIFF_MAX_LINES
        lines = [*lines[:DIFF_MAX_LINES], f"     … {plural(hidden, 'more line')}"]
    return redact("\n".join([head, *lines]))


def _line(number: int, mark: str, text: str) -> str:
    text = text.expandtabs(4)
    if len(text) > DIFF_LINE_CHARS:
        text = text[: DIFF_LINE_CHARS - 1] + "…"
    return f"{number:>5} {mark} {text}"
