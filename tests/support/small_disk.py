"""A real full disk for the fault suite: a small tmpfs mounted for one test (root only; a test
without it is skipped with the reason), filled with a file that leaves as many bytes free as a
test asks, and freed again."""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.store_contract import (
    drop_schema,
    fresh_schema,
    postgres_unavailable,
    postgres_url,
    with_schema,
)

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


def mount_error(directory: Path, size: str, owner: tuple[int, int] | None = None) -> str | None:
    """Mount a tmpfs of ``size`` at ``directory`` (its root owned by ``owner``, uid and gid);
    the reason it could not be (None: mounted)."""
    if os.geteuid() != 0:
        return "mounting a small tmpfs (a real full disk) needs root"
    if shutil.which("mount") is None:
        return "no mount command"
    options = f"size={size},mode=0755"
    if owner is not None:
        options += f",uid={owner[0]},gid={owner[1]}"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
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
def small_disk(
    directory: Path, size: str = "256k", owner: tuple[int, int] | None = None
) -> Iterator[SmallDisk]:
    """A tmpfs of ``size`` at ``directory`` (made) for the block; skips the test when it
    cannot be mounted; unmounted afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    reason = mount_error(directory, size, owner)
    if reason is not None:
        pytest.skip(reason)
    try:
        yield SmallDisk(directory)
    finally:
        unmount(directory)


def _move_to_tablespace(disk: SmallDisk, schema: str, name: str) -> None:
    """The store's tables and indexes in ``schema`` moved onto the tmpfs, as tablespace
    ``name`` (the server's own log stays on its disk, as when a data volume fills)."""
    import psycopg
    from psycopg import sql

    postgres = pwd.getpwnam("postgres")
    where = disk.root / "pg"
    where.mkdir()
    os.chown(where, postgres.pw_uid, postgres.pw_gid)
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(
                sql.Identifier(name), sql.Literal(str(where))
            )
        )
        for kind, listing, column in (
            ("TABLE", "pg_tables", "tablename"),
            ("INDEX", "pg_indexes", "indexname"),
        ):
            rows = conn.execute(
                sql.SQL("SELECT {} FROM {} WHERE schemaname = %s").format(
                    sql.Identifier(column), sql.Identifier(listing)
                ),
                (schema,),
            ).fetchall()
            for (relation,) in rows:
                conn.execute(
                    sql.SQL("ALTER {} {} SET TABLESPACE {}").format(
                        sql.SQL(kind), sql.Identifier(schema, relation), sql.Identifier(name)
                    )
                )


def _drop_tablespace(name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLESPACE IF EXISTS {}").format(sql.Identifier(name)))


@contextlib.contextmanager
def postgres_on_small_disk(size: str = "4m") -> Iterator[tuple[SmallDisk, str]]:
    """A PostgreSQL store (its URL) whose tables live on a tmpfs of ``size``; skips the test
    when no server answers or no tmpfs can be mounted; all of it dropped afterwards."""
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs (a real full disk) needs root")
    from sessions import open_store

    # Outside pytest's private temporary directory: the server's user must reach it.
    mount = Path(f"/tmp/agentloop-faults-{uuid.uuid4().hex[:10]}")
    schema, name = fresh_schema(), f"agentloop_full_{uuid.uuid4().hex[:10]}"
    with contextlib.ExitStack() as stack:
        stack.callback(mount.rmdir)  # (last: once unmounted)
        disk = stack.enter_context(small_disk(mount, size=size))
        stack.callback(_drop_tablespace, name)
        stack.callback(drop_schema, schema)
        location = with_schema(postgres_url(), schema)
        open_store(location).close()  # the schema, then its tables onto the small disk
        _move_to_tablespace(disk, schema, name)
        yield disk, location
