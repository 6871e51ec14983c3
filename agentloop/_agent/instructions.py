"""Project instructions: the ``AGENTS.md`` convention (and ``CLAUDE.md``, ``AGENTLOOP.md``) read
from the workspace and from the user's config directory, for the system prompt.

The system prompt is never summarized, so rules placed there survive every compaction by
construction; it is read once per session, so it stays byte-stable and prompt caching keeps
working. The files share a token budget (by default 10 % of the context window): a file that
does not fit what is left of it is refused with a warning, never truncated silently. The
project's files are taken first, then the user's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentloop._agent.secrets import redact
from agentloop._agent.workspace import Workspace, WorkspaceError, display_path

__all__ = [
    "CONFIG_DIR_ENV",
    "INSTRUCTION_FILES",
    "InstructionFile",
    "Instructions",
    "load_instructions",
    "user_config_dir",
]

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", "AGENTLOOP.md")
CONFIG_DIR_ENV = "AGENTLOOP_CONFIG_DIR"
"""Overrides the user's config directory (platformdirs' ``user_config_dir("agentloop")``)."""

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BYTES_PER_TOKEN_MAX = 16  # no text tokenizes above this: a bigger file cannot fit the budget

_HEADER = (
    "# Instructions from the user's instruction files\n\n"
    "The files below hold standing instructions for this work. Follow them. Where they "
    "conflict, the project's files take precedence over the user's general ones."
)


def user_config_dir() -> Path:
    """``$AGENTLOOP_CONFIG_DIR`` if set, else the user config directory for agentloop."""
    override = os.environ.get(CONFIG_DIR_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    from platformdirs import user_config_dir as platform_config_dir

    return Path(platform_config_dir("agentloop", appauthor=False))


@dataclass(frozen=True, slots=True)
class InstructionFile:
    """One instruction file in the system prompt."""

    label: str
    """How it is named to the user: relative to the workspace, or ``~/...`` for the user's."""
    scope: Literal["project", "user"]
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Instructions:
    """The instruction files found for a session, and what was refused."""

    files: tuple[InstructionFile, ...] = ()
    warnings: tuple[str, ...] = ()
    budget_tokens: int = 0
    searched: tuple[str, ...] = ()
    """The directories looked in, for the user."""

    @property
    def tokens(self) -> int:
        return sum(f.tokens for f in self.files)

    def render(self) -> str:
        """The system prompt section ('' when there are no files): the user's files first,
        then the project's."""
        if not self.files:
            return ""
        ordered = sorted(self.files, key=lambda f: f.scope != "user")
        sections = [_section(f.label, f.scope, f.text) for f in ordered]
        return "\n\n".join([_HEADER, *sections])

    def summary_line(self) -> str:
        """One line for ``/context``: the files and their token cost."""
        if self.files:
            listed = ", ".join(f"{f.label} (~{f.tokens:,} tokens)" for f in self.files)
            return f"Instructions: {listed}"
        if self.budget_tokens <= 0:
            return "Instructions: off"
        where = " or ".join(self.searched) if self.searched else "the workspace"
        return f"Instructions: none ({', '.join(INSTRUCTION_FILES)} in {where})"

    def to_dict(self) -> dict[str, Any]:
        """For the session metadata: which files were used, their cost, and the warnings."""
        return {
            "files": [{"label": f.label, "scope": f.scope, "tokens": f.tokens} for f in self.files],
            "warnings": list(self.warnings),
            "budget_tokens": self.budget_tokens,
        }


def _section(label: str, scope: str, text: str) -> str:
    return f'<instructions file="{label}" scope="{scope}">\n{text.strip()}\n</instructions>'


def load_instructions(
    workspace: Workspace,
    *,
    config_dir: Path | None,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> Instructions:
    """Read the instruction files of ``workspace`` and ``config_dir`` within ``budget_tokens``
    (0 turns instructions off). Never raises for a file: problems become warnings."""
    searched = [str(workspace.root)] + ([_label_path(config_dir)] if config_dir else [])
    if budget_tokens <= 0:
        return Instructions(budget_tokens=0, searched=tuple(searched))
    candidates: list[tuple[str, Literal["project", "user"], Callable[[], int]]] = []
    for name in INSTRUCTION_FILES:
        candidates.append((name, "project", _workspace_opener(workspace, name)))
    if config_dir is not None:
        for name in INSTRUCTION_FILES:
            path = config_dir / name
            candidates.append((_label_path(path), "user", _plain_opener(path)))

    files: list[InstructionFile] = []
    warnings: list[str] = []
    seen: set[tuple[int, int]] = set()
    texts: set[str] = set()
    left = budget_tokens
    for label, scope, opener in candidates:
        try:
            fd = opener()
        except FileNotFoundError:
            continue
        except (OSError, WorkspaceError) as error:
            warnings.append(f"{label} was not read: {_reason(error)}")
            continue
        try:
            text, identity, problem = _read_text(fd, left)
        finally:
            os.close(fd)
        if identity in seen:
            continue  # CLAUDE.md as a link to AGENTS.md: one file, read once
        seen.add(identity)
        if problem:
            warnings.append(f"{label} was refused: {problem}")
            continue
        text = redact(text).strip()
        if not text or text in texts:
            continue
        texts.add(text)
        tokens = count_tokens(_section(label, scope, text))
        if tokens > left:
            warnings.append(
                f"{label} was refused: it is {tokens:,} tokens, more than the {left:,} left of "
                f"the instruction budget ({budget_tokens:,} tokens); shorten it"
            )
            continue
        left -= tokens
        files.append(InstructionFile(label, scope, text, tokens))
    return Instructions(tuple(files), tuple(warnings), budget_tokens, tuple(searched))


def _workspace_opener(workspace: Workspace, name: str) -> Callable[[], int]:
    def opener() -> int:
        resolved = workspace.resolve(name)  # a link to a file outside is refused
        return workspace.open_resolved(resolved, os.O_RDONLY | _NONBLOCK)

    return opener


def _plain_opener(path: Path) -> Callable[[], int]:
    return lambda: os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))


def _read_text(fd: int, budget_tokens: int) -> tuple[str, tuple[int, int], str]:
    """The file's text, its identity, and why it is refused ('' if it is not)."""
    info = os.fstat(fd)
    identity = (info.st_dev, info.st_ino)
    if not stat.S_ISREG(info.st_mode):
        return "", identity, "it is not a regular file"
    if info.st_size > max(budget_tokens, 1) * _BYTES_PER_TOKEN_MAX:
        return (
            "",
            identity,
            (
                f"it is {info.st_size:,} bytes, far more than the instruction budget of "
                f"{budget_tokens:,} tokens; shorten it"
            ),
        )
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    data = b"".join(chunks)
    if b"\x00" in data:
        return "", identity, "it is a binary file"
    return data.decode("utf-8", errors="replace"), identity, ""


def _label_path(path: Path) -> str:
    """``path`` with the home directory shown as ``~``."""
    try:
        return display_path("~/" + path.relative_to(Path.home()).as_posix())
    except ValueError:
        return display_path(str(path))


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return str(error)
