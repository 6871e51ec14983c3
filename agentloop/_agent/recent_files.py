"""The files the agent was working on, brought back after a compaction.

:class:`RecentFiles` follows the tool calls: every file that ``read_file``, ``write_file`` or
``edit_file`` touched, newest first. :class:`FileRestorer` is a preserved-state hook: when the
conversation is compacted it puts the *current* contents of the few most recent of them into
the compacted context, within a token budget, so the agent need not read them again (and does
not refill the context re-reading them). Text files only, read through the workspace's safe
open (never a file outside it), never a binary, never one over the budget (refused whole, not
cut), never one carried elsewhere (``exclude``: e.g. the instruction files already in the
system prompt). A file changed on disk since the agent saw it comes back as it is now, and
says so. :func:`recent_files_hook` builds the hook for any :class:`~agentloop.AgentLoop`.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentloop._agent.base import ToolStateError
from agentloop._agent.files import read_all
from agentloop._agent.secrets import redact
from agentloop._agent.workspace import Workspace, WorkspaceError, display_path
from agentloop._core.facts.preserved_state import PreservedStateHook
from agentloop._core.values.tool_facts import FileTouched, ToolFact

__all__ = [
    "DEFAULT_RESTORE_FILES",
    "DEFAULT_RESTORE_FRACTION",
    "FILE_TOOLS",
    "RESTORE_MARK",
    "FileRestorer",
    "RecentFiles",
    "RestoreReport",
    "SeenFile",
    "recent_files_hook",
]

FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file"})
DEFAULT_RESTORE_FILES = 5
DEFAULT_RESTORE_FRACTION = 0.05
"""The default restore budget: this fraction of the context window."""
RESTORE_MARK = "current contents after compaction"

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BYTES_PER_TOKEN_MAX = 16  # no text tokenizes above this: a bigger file cannot fit
_HEADER = (
    f"## Files you were working on ({RESTORE_MARK})\n"
    "The files you touched most recently, newest first, as they are on disk now. Their "
    "contents below are current: you need not read them again."
)

Signature = tuple[int, int, int]
"""``(mtime_ns, size, inode)``: enough to tell that a file changed since it was seen."""


@dataclass(frozen=True, slots=True)
class SeenFile:
    """A file the agent touched: its workspace-relative path, and how it was then."""

    path: str
    signature: Signature | None = None


class RecentFiles:
    """The files the file tools touched, newest first (at most ``limit``)."""

    def __init__(self, workspace: Workspace | Path | str, *, limit: int = 20) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.limit = limit
        self._files: deque[SeenFile] = deque()

    @property
    def files(self) -> tuple[SeenFile, ...]:
        """Newest first."""
        return tuple(self._files)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self._files)

    def follow(self, facts: Iterable[ToolFact]) -> None:
        """Follow one tool call by its facts: a path it read, wrote or edited is touched (a
        deleted one leaves the list)."""
        for fact in facts:
            if isinstance(fact, FileTouched):
                if fact.action == "deleted":
                    self._files = deque(f for f in self._files if f.path != fact.path)
                else:
                    self.touch(fact.path)

    def record(self, name: str, tool_input: Mapping[str, Any], *, is_error: bool) -> None:
        """Follow one call of the coding agent's own file tools (kept for callers of earlier
        versions; :meth:`follow` takes any tool's facts)."""
        path = tool_input.get("path") if isinstance(tool_input, Mapping) else None
        if name in FILE_TOOLS and not is_error and isinstance(path, str):
            self.follow([FileTouched(path, "read")])

    def touch(self, path: str) -> None:
        """``path`` (as the model gave it) was just seen or written."""
        try:
            resolved = self.workspace.resolve(path)
        except WorkspaceError:
            return
        # Kept as shown to the model (`\\xNN` for a name byte that is not UTF-8): the
        # workspace maps it back, and the metadata it is saved in must be valid UTF-8.
        rel = display_path(self.workspace.relative(resolved))
        if rel == ".":
            return
        self._add(SeenFile(rel, _signature(resolved)), newest=True)

    def _add(self, seen: SeenFile, *, newest: bool) -> None:
        kept = [f for f in self._files if f.path != seen.path]
        self._files = deque(([seen, *kept] if newest else [*kept, seen])[: self.limit])

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": [
                {"path": f.path, "signature": list(f.signature) if f.signature else None}
                for f in self._files
            ]
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], workspace: Workspace | Path | str, *, limit: int = 20
    ) -> RecentFiles:
        """The tracker saved by :meth:`to_dict` (session metadata)."""
        tracker = cls(workspace, limit=limit)
        files = data.get("files") if isinstance(data, Mapping) else None
        if not isinstance(files, list):
            raise ToolStateError("saved recent files must be an object with a 'files' list")
        for entry in files:
            path = entry.get("path") if isinstance(entry, Mapping) else None
            raw = entry.get("signature") if isinstance(entry, Mapping) else None
            if not isinstance(path, str) or not (raw is None or _is_signature(raw)):
                raise ToolStateError(f"malformed saved recent file entry: {entry!r}")
            signature = (int(raw[0]), int(raw[1]), int(raw[2])) if raw is not None else None
            tracker._add(SeenFile(path, signature), newest=False)
        return tracker


def _is_signature(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 3
        and all(isinstance(n, int) and not isinstance(n, bool) for n in value)
    )


def _signature(path: Path) -> Signature | None:
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return _of(info)


def _of(info: os.stat_result) -> Signature:
    return (info.st_mtime_ns, info.st_size, info.st_ino)


@dataclass(frozen=True, slots=True)
class RestoreReport:
    """What one rendering brought back, and what it left out and why."""

    restored: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    tokens: int = 0
    budget_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "restored": list(self.restored),
            "skipped": [list(item) for item in self.skipped],
            "tokens": self.tokens,
            "budget_tokens": self.budget_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RestoreReport:
        restored = data.get("restored")
        skipped = data.get("skipped")
        if not (
            isinstance(restored, list)
            and all(isinstance(p, str) for p in restored)
            and isinstance(skipped, list)
            and all(
                isinstance(s, list) and len(s) == 2 and all(isinstance(x, str) for x in s)
                for s in skipped
            )
        ):
            raise ToolStateError("saved restored files must have 'restored' and 'skipped' lists")
        tokens, budget = data.get("tokens", 0), data.get("budget_tokens", 0)
        return cls(
            tuple(restored),
            tuple((s[0], s[1]) for s in skipped),
            tokens if isinstance(tokens, int) else 0,
            budget if isinstance(budget, int) else 0,
        )


class FileRestorer:
    """Renders the current contents of the most recently touched files (the hook's work).

    ``budget_tokens`` caps the whole section (0 turns it off), ``count`` the number of files;
    ``count_tokens`` measures text (default: the tiktoken estimator); ``exclude`` names files
    carried elsewhere (paths, or a function returning them at render time). :attr:`last` is
    the report of the latest rendering.
    """

    def __init__(
        self,
        workspace: Workspace | Path | str,
        tracker: RecentFiles,
        *,
        budget_tokens: int,
        count: int = DEFAULT_RESTORE_FILES,
        count_tokens: Callable[[str], int] | None = None,
        exclude: Iterable[str] | Callable[[], Iterable[str]] = (),
    ) -> None:
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.tracker = tracker
        self.budget_tokens = max(0, budget_tokens)
        self.count = max(0, count)
        self._count_tokens = count_tokens
        self._exclude = exclude if callable(exclude) else tuple(exclude)
        self.last: RestoreReport | None = None

    def hook(self, *, name: str = "recent files", timeout: float = 5.0) -> PreservedStateHook:
        """This restorer as a preserved-state hook."""
        return PreservedStateHook(name, self.render, timeout)

    def render(self) -> str:
        """The section for the compacted context ('' when nothing is brought back)."""
        report, text = self._build()
        self.last = report
        return text

    def _tokens(self, text: str) -> int:
        if self._count_tokens is None:
            from agentloop._adapters.tokens import TokenEstimator

            self._count_tokens = TokenEstimator().count_text
        return self._count_tokens(text)

    def _excluded(self) -> set[str]:
        names = self._exclude() if callable(self._exclude) else self._exclude
        out: set[str] = set()
        for name in names:
            try:
                out.add(display_path(self.workspace.relative(self.workspace.resolve(name))))
            except WorkspaceError:
                continue
        return out

    def _build(self) -> tuple[RestoreReport, str]:
        if self.budget_tokens <= 0 or self.count <= 0:
            return RestoreReport(budget_tokens=self.budget_tokens), ""
        excluded = self._excluded()
        header_tokens = self._tokens(_HEADER)
        left = self.budget_tokens - header_tokens
        restored: list[str] = []
        skipped: list[tuple[str, str]] = []
        sections: list[str] = []
        for seen in self.tracker.files:
            if len(restored) >= self.count:
                break
            shown = seen.path
            if seen.path in excluded:
                skipped.append((shown, "already carried elsewhere"))
                continue
            text, changed, problem = self._read(seen, left)
            if problem:
                skipped.append((shown, problem))
                continue
            section = _section(shown, text, changed)
            tokens = self._tokens(section)
            if tokens > left:
                # Shown inside parentheses after the path: none of its own (no "((" / "))").
                skipped.append((shown, f"over the budget: {tokens:,} tokens, {left:,} left"))
                continue
            left -= tokens
            restored.append(shown)
            sections.append(section)
        used = self.budget_tokens - left if sections else 0
        report = RestoreReport(tuple(restored), tuple(skipped), used, self.budget_tokens)
        return report, "\n\n".join([_HEADER, *sections]) if sections else ""

    def _read(self, seen: SeenFile, left: int) -> tuple[str, bool, str]:
        """The file's current text, whether it changed since it was seen, and why it is not
        brought back ('' if it is)."""
        try:
            resolved = self.workspace.resolve(seen.path)
            fd = self.workspace.open_resolved(resolved, os.O_RDONLY | _NONBLOCK)
        except FileNotFoundError:
            return "", False, "no longer exists"
        except WorkspaceError:
            return "", False, "outside the workspace"
        except OSError as error:
            return "", False, error.strerror or type(error).__name__
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return "", False, "not a regular file"
            if info.st_size > max(left, 0) * _BYTES_PER_TOKEN_MAX:
                return "", False, f"over the budget: {info.st_size:,} bytes, {left:,} tokens left"
            data = read_all(fd, info.st_size + 1)
        finally:
            os.close(fd)
        if b"\x00" in data:
            return "", False, "binary"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return "", False, "not UTF-8 text"
        changed = seen.signature is not None and seen.signature != _of(info)
        return redact(text), changed, ""


def _section(path: str, text: str, changed: bool) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    note = " (changed on disk since you last saw it)" if changed else ""
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"### {path} — {RESTORE_MARK}{note}\n{fence}\n{body}{fence}"


def recent_files_hook(
    workspace: Workspace | Path | str,
    tracker: RecentFiles,
    budget_tokens: int,
    count: int = DEFAULT_RESTORE_FILES,
    *,
    count_tokens: Callable[[str], int] | None = None,
    exclude: Iterable[str] | Callable[[], Iterable[str]] = (),
    timeout: float = 5.0,
) -> PreservedStateHook:
    """A preserved-state hook that brings back the current contents of the ``count`` files
    ``tracker`` saw most recently, within ``budget_tokens`` (see :class:`FileRestorer`)."""
    restorer = FileRestorer(
        workspace,
        tracker,
        budget_tokens=budget_tokens,
        count=count,
        count_tokens=count_tokens,
        exclude=exclude,
    )
    return restorer.hook(timeout=timeout)
