"""A real full disk for the fault suite: a small tmpfs mounted for one test (root only; a test
without it is skipped with the reason), filled with a file that leaves as many bytes free as a
test asks, and freed again."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

FILLER = ".filler"
CHUNK = 64 * 1024


class SmallDisk:
    """A mounted tmpfs at ``root``: ``fill`` it (leaving ``leave`` bytes), ``free`` it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def filler(self) -> Path:
        return self.root / FILLER

    def available(self) -> int:
        room = os.statvfs(self.root)
        return room.f_bavail * room.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Write until the file system is full, then give back ``leave`` bytes (to the page)."""
        with open(self.filler, "ab", buffering=0) as handle:
            chunk = CHUNK
            while chunk >= 512:
                try:
                    handle.write(b"\0" * chunk)
                except OSError as error:
                    if error.errno != errno.ENOSPC:
                        raise
                    chunk //= 2
        os.truncate(self.filler, max(0, os.path.getsize(self.filler) - leave))
        assert self.available() >= leave

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.filler.unlink()

    def clear(self) -> None:
        """Remove everything on it (a fresh disk for the next round)."""
        for entry in self.root.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def mount_error(directory: Path, size: str) -> str | None:
    """Mount a tmpfs of ``size`` at ``directory``; the reason it could not be (None: mounted)."""
    if os.geteuid() != 0:
        return "mounting a small tmpfs (a real full disk) needs root"
    if shutil.which("mount") is None:
        return "no mount command"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
    return None


def unmount(directory: Path) -> None:
    done = subprocess.run(["umount", str(directory)], capture_output=True, check=False)
    if done.returncode != 0:  # still held by a process that is ending: detach it
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


@contextlib.contextmanager
def small_disk(directory: Path, size: str = "256k") -> Iterator[SmallDisk]:
    """A tmpfs of ``size`` at ``directory`` (made) for the block; skips the test when it
    cannot be mounted; unmounted afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    reason = mount_error(directory, size)
    if reason is not None:
        pytest.skip(reason)
    try:
        yield SmallDisk(directory)
    finally:
        unmount(directory)
