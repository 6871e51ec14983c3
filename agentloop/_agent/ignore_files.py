"""Ignore files as ripgrep reads them, for the search tools (list_files, grep).

``.ignore`` files apply everywhere; ``.gitignore`` files and ``.git/info/exclude`` apply inside
a git repository (a directory holding ``.git``), up to its root. The deepest file with a rule
for a path decides, and any ``.ignore`` rule wins over any ``.gitignore`` rule (ripgrep's
precedence). A directory that is ignored is not entered. Patterns are git's (pathspec's
:class:`GitIgnoreSpec`: negation, anchoring, ``**``, directory-only patterns).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = ["DirectoryRules", "rules_for"]

IGNORE_FILE = ".ignore"
GITIGNORE_FILE = ".gitignore"
_READ_LIMIT = 1 << 20  # an ignore file larger than this is read only so far
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True, slots=True)
class _Spec:
    directory: tuple[str, ...]
    """Where the ignore file lies (its patterns are relative to it), as path components."""
    spec: GitIgnoreSpec


@dataclass(frozen=True, slots=True)
class DirectoryRules:
    """The rules in force inside one directory (its own ignore files and its parents')."""

    parts: tuple[str, ...]
    """The directory's path components (from the filesystem's root)."""
    ignore: tuple[_Spec, ...] = ()
    """``.ignore`` specs, shallowest first."""
    git: tuple[_Spec, ...] = ()
    """``.gitignore`` and exclude specs of the repository this directory is in, shallowest first."""
    in_repo: bool = False

    def ignored(self, name: str, *, is_dir: bool) -> bool:
        """Whether the entry ``name`` of this directory is ignored."""
        path = (*self.parts, name)
        for specs in (self.ignore, self.git):
            for spec in reversed(specs):  # the deepest file with a rule for the path decides
                relative = "/".join(path[len(spec.directory) :]) + ("/" if is_dir else "")
                include = spec.spec.check_file(relative).include
                if include is not None:
                    return include
        return False

    def child(self, name: str, dir_fd: int | None) -> DirectoryRules:
        """The rules inside the subdirectory ``name``, whose descriptor is ``dir_fd``."""
        parts = (*self.parts, name)
        return _with_files(parts, self.ignore, self.git, self.in_repo, dir_fd)


def _read(name: str, dir_fd: int | None, directory: Path | None = None) -> list[str] | None:
    try:
        if dir_fd is not None:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=dir_fd)
        else:
            assert directory is not None
            fd = os.open(directory / name, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(_READ_LIMIT)
        except OSError:  # a directory named .gitignore, a FIFO...
            return None
    return data.decode("utf-8", "replace").splitlines()


def _has_git(dir_fd: int | None, directory: Path | None = None) -> bool:
    with contextlib.suppress(OSError):
        if dir_fd is not None:
            os.stat(".git", dir_fd=dir_fd, follow_symlinks=False)
        else:
            assert directory is not None
            os.stat(directory / ".git", follow_symlinks=False)
        return True
    return False


def _spec(parts: tuple[str, ...], lines: list[str] | None) -> _Spec | None:
    if not lines:
        return None
    from pathspec import GitIgnoreSpec

    spec = GitIgnoreSpec.from_lines(lines)
    return _Spec(parts, spec) if len(spec) else None


def _with_files(
    parts: tuple[str, ...],
    ignore: tuple[_Spec, ...],
    git: tuple[_Spec, ...],
    in_repo: bool,
    dir_fd: int | None,
    *,
    directory: Path | None = None,
) -> DirectoryRules:
    # A repository's root: the .gitignore files above it are not its own (ripgrep stops there).
    if _has_git(dir_fd, directory):
        in_repo = True
        exclude = _read("exclude", None, directory / ".git" / "info") if directory else None
        if dir_fd is not None:
            with contextlib.suppress(OSError):
                info = os.open(".git/info", os.O_RDONLY | _NOFOLLOW, dir_fd=dir_fd)
                try:
                    exclude = _read("exclude", info)
                finally:
                    os.close(info)
        git = tuple(s for s in (_spec(parts, exclude),) if s)
    own_ignore = _spec(parts, _read(IGNORE_FILE, dir_fd, directory))
    own_git = _spec(parts, _read(GITIGNORE_FILE, dir_fd, directory))
    if own_ignore is not None:
        ignore = (*ignore, own_ignore)
    if own_git is not None:
        git = (*git, own_git)
    return DirectoryRules(parts, ignore, git if in_repo else (), in_repo)


def rules_for(root: Path, base: Path) -> DirectoryRules | None:
    """The rules in force in ``base`` (a directory inside the workspace ``root``), from the
    ignore files of its parents and its own, as ripgrep finds them (parents above the
    workspace included). None when ``base`` or a directory between the workspace's root and it
    is itself ignored: asked for by name, nothing under it is ignored then."""
    rules = DirectoryRules(())
    for directory in [*reversed(base.parents), base]:
        if (
            directory != root
            and directory.is_relative_to(root)
            and rules.ignored(directory.name, is_dir=True)
        ):
            return None
        rules = _with_files(
            tuple(directory.parts[1:]),
            rules.ignore,
            rules.git,
            rules.in_repo,
            None,
            directory=directory,
        )
    return rules
