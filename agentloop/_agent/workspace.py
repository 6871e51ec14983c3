"""The workspace: the one directory the coding tools may touch, and path confinement to it."""

from __future__ import annotations

import os
from pathlib import Path

from agentloop._errors import AgentloopError

__all__ = ["Workspace", "WorkspaceError"]


class WorkspaceError(AgentloopError):
    """A path outside the workspace, or a workspace root that is not a directory."""


class Workspace:
    """The directory the agent works in; resolves model-given paths and refuses escapes."""

    def __init__(self, root: Path | str) -> None:
        try:
            resolved = Path(root).expanduser().resolve(strict=True)
        except (OSError, RuntimeError) as error:
            raise WorkspaceError(f"workspace {root} does not exist: {error}") from None
        if not resolved.is_dir():
            raise WorkspaceError(f"workspace {root} is not a directory")
        self._root = resolved

    @property
    def root(self) -> Path:
        """The workspace directory, absolute and with symlinks resolved."""
        return self._root

    def contains(self, path: Path) -> bool:
        """Whether ``path`` (after resolving ``..`` and symlinks) lies inside the workspace."""
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            return False
        return resolved == self._root or resolved.is_relative_to(self._root)

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-resolved path for ``path``; raises :class:`WorkspaceError`
        when it is empty, invalid, or lands outside the workspace."""
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError("path must be a non-empty string")
        if "\x00" in path:
            raise WorkspaceError("path must not contain NUL characters")
        # `~` means the home directory to the model; expanding it makes "~/x" an honest refusal
        # (unless the workspace is the home directory) instead of a file literally named "~".
        expanded = os.path.expanduser(path)
        candidate = self._root / expanded
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as error:
            raise WorkspaceError(f"cannot resolve path {path!r}: {error}") from None
        if resolved == self._root or resolved.is_relative_to(self._root):
            return resolved
        lexical = Path(os.path.normpath(candidate))
        if lexical == self._root or lexical.is_relative_to(self._root):
            raise WorkspaceError(
                f"path {path!r} leads through a symlink to {resolved}, which is outside the "
                f"workspace {self._root}; only files inside the workspace can be used"
            )
        raise WorkspaceError(
            f"path {path!r} is outside the workspace {self._root}; only files inside the "
            "workspace can be used (give paths relative to it)"
        )

    def relative(self, path: Path) -> str:
        """``path`` relative to the root in POSIX form (``.`` for the root itself)."""
        try:
            rel = path.relative_to(self._root)
        except ValueError:
            return str(path)
        text = rel.as_posix()
        return text if text else "."
