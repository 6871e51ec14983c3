"""The workspace: the one directory the coding tools may touch, and path confinement to it.

Confinement is checked twice, in two ways. :meth:`Workspace.resolve` resolves a model-given
path (symlinks and ``..``) and refuses it when it lands outside, with a message that says why.
:meth:`Workspace.open_resolved` then opens that path without trusting that it is still the
same: it walks from a descriptor of the workspace root one component at a time
(``openat`` with ``O_NOFOLLOW``), so a directory swapped for a symlink between the check and
the use is refused rather than followed out of the workspace. The check and the use are one
operation.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from pathlib import Path

from agentloop._errors import AgentloopError

__all__ = ["Workspace", "WorkspaceError", "display_path"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC

# A name byte that is not UTF-8 is shown as `\xNN` (see display_path); a path the model copies
# back in that form is turned into those bytes again.
_ESCAPED_BYTE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class WorkspaceError(AgentloopError):
    """A path outside the workspace, or a workspace root that is not a directory."""


def display_path(text: str) -> str:
    """``text`` without lone surrogates: a file-name byte that is not UTF-8 (which Python carries
    as a surrogate) becomes ``\\xNN``, any other lone surrogate becomes U+FFFD. Such text can be
    encoded as UTF-8, stored and sent to the API."""
    if not _LONE_SURROGATE.search(text):
        return text

    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"

    return _LONE_SURROGATE.sub(escape, text)


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
        if _ESCAPED_BYTE.search(expanded) and not os.path.lexists(candidate):
            raw = self._root / _ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m[1], 16)), expanded)
            if os.path.lexists(raw):
                candidate = raw
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as error:
            raise WorkspaceError(f"cannot resolve path {path!r}: {error}") from None
        if resolved == self._root or resolved.is_relative_to(self._root):
            return resolved
        lexical = Path(os.path.normpath(candidate))
        if lexical == self._root or lexical.is_relative_to(self._root):
            raise WorkspaceError(
                f"path {path!r} leads through a symlink to {display_path(str(resolved))}, which "
                f"is outside the workspace {self._root}; only files inside the workspace can be "
                "used"
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

    def open_resolved(
        self, resolved: Path, flags: int, *, mode: int = 0o666, make_parents: bool = False
    ) -> int:
        """A descriptor for ``resolved`` (a path :meth:`resolve` returned), opened by walking
        from the root one component at a time without following any symlink.

        ``resolve`` already followed the symlinks that stay inside, so a symlink met here
        appeared after the check: it is refused (:class:`WorkspaceError`), never followed.
        ``make_parents`` creates missing directories on the way. Other failures are the
        ``OSError`` of the system call (``FileNotFoundError``, ``IsADirectoryError``...).
        """
        try:
            parts = resolved.relative_to(self._root).parts
        except ValueError:
            raise WorkspaceError(f"{resolved} is outside the workspace {self._root}") from None
        dir_fd = os.open(self._root, _DIR_FLAGS)
        try:
            for name in parts[:-1]:
                next_fd = self._open_dir(dir_fd, name, resolved, make_parents)
                os.close(dir_fd)
                dir_fd = next_fd
            last = parts[-1] if parts else "."
            try:
                return os.open(last, flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dir_fd)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise self._changed(resolved) from None
                raise
        finally:
            os.close(dir_fd)

    def _open_dir(self, dir_fd: int, name: str, resolved: Path, make_parents: bool) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not make_parents:
                raise
        except OSError as error:
            if error.errno == errno.ENOTDIR and _is_symlink(dir_fd, name):
                raise self._changed(resolved) from None
            if error.errno == errno.ELOOP:
                raise self._changed(resolved) from None
            raise
        # Made meanwhile by someone else? Opening it below checks what it is.
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=dir_fd)
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(dir_fd, name):
                raise self._changed(resolved) from None
            raise

    def _changed(self, resolved: Path) -> WorkspaceError:
        return WorkspaceError(
            f"path {display_path(self.relative(resolved))!r} changed while it was being opened "
            "(a symlink appeared on the way); refused, because it could lead outside the "
            "workspace"
        )


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
