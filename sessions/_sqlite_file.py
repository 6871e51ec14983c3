"""The SQLite store's file: create it whole, refuse a foreign or damaged one, connect, migrate,
and map SQLite's errors onto the one-line :class:`SessionError` family.

A file that is not an agentloop store is refused before SQLite may write to it.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from contextlib import suppress
from pathlib import Path

from . import _migrations
from ._paths import FILE_MODE, ensure_private_dir
from ._store_errors import (
    SessionError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
)

SQLITE_MAGIC = b"SQLite format 3\x00"


def check_header(path: Path) -> None:
    """Refuse, without opening it with SQLite, a file that cannot be an intact SQLite database."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
        size = path.stat().st_size
    except OSError as error:
        raise StoreError(f"cannot read session store {path}: {error.strerror}", path=path) from None
    problem = None
    if not header:
        problem = "the file is empty"
    elif not header.startswith(SQLITE_MAGIC):
        problem = "the file is not a SQLite database"
    elif len(header) < 100:
        problem = "the SQLite header is truncated"
    else:
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        if (
            page_size < 512
            or page_size & (page_size - 1)
            or header[18] not in (1, 2)
            or header[19] not in (1, 2)
            or header[21:24] != b"\x40\x20\x20"
        ):
            problem = "the SQLite header is damaged"
        elif size % page_size:
            problem = "the file is truncated"
    if problem:
        raise StoreCorruptError(
            f"{path} is not a valid agentloop session store ({problem}); "
            "it was left untouched — move it away or pass another store path",
            path=path,
        )


def map_error(error: sqlite3.Error, path: Path, busy_timeout: float) -> SessionError:
    """The one-line :class:`SessionError` a user sees for a SQLite error."""
    text = str(error)
    lowered = text.lower()
    if isinstance(error, sqlite3.OperationalError) and ("locked" in lowered or "busy" in lowered):
        held = (
            f"kept it locked for more than {busy_timeout:g}s"
            if busy_timeout > 0
            else "holds its write lock"
        )
        return StoreBusyError(
            f"session store {path} is busy: another process {held}; try again", path=path
        )
    if _cannot_share(error) and "readonly" in lowered.replace("-", "").replace(" ", ""):
        return StoreError(
            f"session store {path} cannot be written (the file or its directory is "
            "read-only); nothing was changed",
            path=path,
        )
    if isinstance(error, sqlite3.ProgrammingError) and "closed" in lowered:
        return StoreError(f"session store {path} is closed", path=path)
    if isinstance(error, sqlite3.OperationalError) and is_disk_full(error, path.parent):
        return StoreError(
            f"session store {path}: the disk is full ({text}); nothing more was written",
            path=path,
        )
    if isinstance(error, sqlite3.OperationalError | sqlite3.IntegrityError):
        return StoreError(f"session store {path}: {text}", path=path)
    return StoreCorruptError(
        f"{path} is not a valid agentloop session store ({text}); "
        "it was left untouched — move it away or pass another store path",
        path=path,
    )


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(
        str(path), timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def _temporary_name(path: Path) -> str:
    return f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def _remove_stale_temporaries(path: Path) -> None:
    """Remove what a creator killed mid-way left behind (its process is gone)."""
    try:
        candidates = list(path.parent.glob(f".{path.name}.*.tmp*"))
    except OSError:
        return
    for candidate in candidates:
        parts = candidate.name[len(path.name) + 2 :].split(".")
        if not parts[0].isdigit() or int(parts[0]) == os.getpid():
            continue
        try:
            os.kill(int(parts[0]), 0)
        except ProcessLookupError:
            with suppress(OSError):
                candidate.unlink()
        except OSError:
            continue  # alive under another user, or unknowable: leave it


def _create_store(path: Path) -> None:
    """Build a complete store beside ``path``, check it, and link it into place.

    The store appears at ``path`` only once fully written and checked, so neither a crash nor a
    full disk during creation ever leaves a half-made file behind (and an empty file is never
    mistaken for a store). It is built with its rollback journal in memory, so every page it
    holds is in the file itself when COMMIT returns (a write-ahead log would hold them until a
    checkpoint at close, which fails silently on a full disk); it is switched to WAL last.
    """
    temporary = path.with_name(_temporary_name(path))
    descriptor = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    os.close(descriptor)
    try:
        os.chmod(temporary, FILE_MODE)  # the umask may have narrowed it; never let it widen.
        conn = sqlite3.connect(str(temporary), isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = MEMORY")  # a failure discards the whole file
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("BEGIN IMMEDIATE")
            _migrations.apply_pending(conn)
            conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        _check_created(temporary)
        _sync(temporary)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process created the store first: use theirs.
        except OSError as error:
            if error.errno in _FULL_ERRNOS:
                raise
            # No hard links on this file system: a rename could replace a store created in
            # the meantime, so only rename onto a path that is still free.
            if not path.exists():
                os.replace(temporary, path)
        with suppress(OSError):
            _sync(path.parent)  # the new name survives a power cut (best effort)
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with suppress(FileNotFoundError):
                os.unlink(f"{temporary}{suffix}")


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_SQLITE_IOERR, _SQLITE_FULL = 10, 13
_LOW_SPACE = 1 << 20
"""Below this many free bytes, an I/O error is taken for a full disk (SQLite says "disk I/O
error" when its shared-memory or log file cannot grow)."""


def is_disk_full(error: BaseException, directory: Path | None = None) -> bool:
    """Whether ``error`` says the disk (or the user's quota, or the file-size limit) is full;
    with ``directory``, also an I/O error where that file system has almost no room left."""
    if isinstance(error, OSError):
        return error.errno in _FULL_ERRNOS
    code = getattr(error, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == _SQLITE_FULL or "disk is full" in str(error):
        return True
    if directory is None or not (primary == _SQLITE_IOERR or "disk I/O error" in str(error)):
        return False
    try:
        room = os.statvfs(directory)
    except OSError:
        return False
    return room.f_bavail * room.f_frsize < _LOW_SPACE


class _NotWhole(Exception):
    """A store just built that did not read back complete (it is never linked into place)."""


def _check_created(temporary: Path) -> None:
    """Refuse a new store that is not whole: anything left in a log beside it, a failed
    ``quick_check``, or a schema short of the migrations it was built with."""
    log = Path(f"{temporary}-wal")
    if log.exists() and log.stat().st_size > 0:
        raise _NotWhole("its pages could not all be written to the file")
    conn = sqlite3.connect(f"{temporary.absolute().as_uri()}?mode=ro", uri=True)
    try:
        checked = conn.execute("PRAGMA quick_check").fetchall()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
    if checked != [("ok",)] or version != len(_migrations.MIGRATIONS):
        raise _NotWhole("the new file did not read back whole")


def _sync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def creation_error(path: Path, error: BaseException) -> StoreError:
    """The one line for a store that could not be created (nothing was left at ``path``)."""
    if is_disk_full(error, path.parent):
        return StoreError(
            f"cannot create session store {path}: the disk is full (no space left in "
            f"{path.parent}); nothing was created — free some space and run again",
            path=path,
        )
    why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return StoreError(f"cannot create session store {path}: {why}; nothing was created", path=path)


def _refuse_foreign(conn: sqlite3.Connection, path: Path) -> set[str]:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and _migrations.MIGRATIONS_TABLE not in tables:
        raise StoreCorruptError(
            f"{path} is a SQLite database but not an agentloop session store; "
            "it was left untouched — pass another store path",
            path=path,
        )
    return tables


def newer_error(path: Path, why: str) -> StoreVersionError:
    return StoreVersionError(
        f"session store {path} was written by a newer version of agentloop ({why}); "
        "it is not written to — upgrade agentloop, or open it read-only",
        path=path,
    )


def _prepare(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a foreign or newer database; apply pending migrations (nothing is written
    otherwise)."""
    tables = _refuse_foreign(conn, path)
    if tables:
        why = _migrations.newer_schema(conn)
        if why is not None:
            raise newer_error(path, why)
        if not _migrations.pending_migrations(conn):
            return  # the common case: nothing to write.
    if not tables:
        # An empty SQLite file becomes a store: make it as private as one created here.
        os.chmod(path, FILE_MODE)
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated (or even upgraded past us) while we waited.
        why = _migrations.newer_schema(conn) if tables else None
        if why is not None:
            raise newer_error(path, why)
        _migrations.apply_pending(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _prepare_read_only(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a foreign database; make an older schema readable without writing to it."""
    if not _refuse_foreign(conn, path):
        raise StoreMissingError(f"no session store at {path} yet (it is empty)", path=path)
    if _migrations.newer_schema(conn) is None:
        missing = _migrations.shim_pending(conn)
        if missing is not None:
            raise StoreVersionError(
                f"session store {path} needs an upgrade ({missing}) that cannot be done "
                "read-only; open it once for writing",
                path=path,
            )


def _sidecars(path: Path) -> list[Path]:
    return [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm")]


def open_connection(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """A connection to the store at ``path``, created (0600, in a 0700 directory) if missing."""
    try:
        if path.exists() or path.is_symlink():
            if not path.is_file():
                raise StoreCorruptError(
                    f"{path} is not a valid agentloop session store (not a regular file)",
                    path=path,
                )
            check_header(path)
        else:
            ensure_private_dir(path.parent)
            _create_store(path)
        _remove_stale_temporaries(path)
    except (OSError, sqlite3.Error, _NotWhole) as error:
        raise creation_error(path, error) from None
    sidecars = _sidecars(path)
    existed = [sidecar.exists() for sidecar in sidecars]
    conn: sqlite3.Connection | None = None
    try:
        conn = _connect(path, busy_timeout)
        _prepare(conn, path)
    except (sqlite3.Error, SessionError) as error:
        if conn is not None:
            conn.close()
        mapped = error if isinstance(error, SessionError) else map_error(error, path, busy_timeout)
        if isinstance(mapped, StoreCorruptError):
            # Connecting may have created empty WAL/SHM files beside a foreign file.
            for sidecar, was_there in zip(sidecars, existed, strict=True):
                if not was_there:
                    with suppress(OSError):
                        sidecar.unlink()
        raise mapped from None
    return conn


_READ_ONLY_FAILURES = (8, 14)  # SQLITE_READONLY, SQLITE_CANTOPEN (primary result codes)


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _has_log(path: Path) -> bool:
    """Whether a write-ahead log holding changes lies beside the store."""
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except OSError:
        return False


def _connect_read_only(path: Path, busy_timeout: float, *, immutable: bool) -> sqlite3.Connection:
    # `immutable` reads the file alone, with no lock and no shared-memory file: the only way
    # to read a WAL store where neither it nor its directory may be written.
    mode = "immutable=1" if immutable else "mode=ro"
    return sqlite3.connect(
        f"{path.absolute().as_uri()}?{mode}",
        uri=True,
        timeout=busy_timeout,
        isolation_level=None,
        check_same_thread=False,
    )


def _cannot_share(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _READ_ONLY_FAILURES


def open_read_only(path: Path, busy_timeout: float) -> tuple[sqlite3.Connection, bool]:
    """A read-only connection to the existing store at ``path`` (nothing is created or
    written), and whether SQLite's WAL/SHM files beside it must be tidied after closing.

    A store that may not be written (an archived or shared file, a read-only directory) and has
    no write-ahead log beside it is read as an immutable file: SQLite would otherwise need to
    create its shared-memory file next to it. One with a log is read through the log.
    """
    try:
        if not (path.exists() or path.is_symlink()):
            raise StoreMissingError(f"no session store at {path} yet", path=path)
        if not path.is_file():
            raise StoreCorruptError(
                f"{path} is not a valid agentloop session store (not a regular file)", path=path
            )
    except OSError as error:
        raise StoreError(f"cannot read session store {path}: {error.strerror}", path=path) from None
    check_header(path)
    tidy = not any(sidecar.exists() for sidecar in _sidecars(path))
    immutable = tidy and not _writable(path)
    conn: sqlite3.Connection | None = None
    try:
        try:
            conn = _connect_read_only(path, busy_timeout, immutable=immutable)
            _prepare_read_only(conn, path)
        except sqlite3.Error as error:
            # No shared-memory file could be made beside it: read the file as it is, unless
            # a log holds changes that reading it alone would miss.
            if immutable or not _cannot_share(error) or _has_log(path):
                raise
            if conn is not None:
                conn.close()
                conn = None
            if tidy:
                tidy_sidecars(path)
            immutable = True
            conn = _connect_read_only(path, busy_timeout, immutable=True)
            _prepare_read_only(conn, path)
    except (sqlite3.Error, SessionError) as error:
        if conn is not None:
            conn.close()
        mapped = error if isinstance(error, SessionError) else map_error(error, path, busy_timeout)
        if isinstance(error, sqlite3.Error) and _cannot_share(error) and _has_log(path):
            mapped = StoreError(
                f"cannot read session store {path}: its write-ahead log ({path.name}-wal) can "
                f"only be read with write access to {path.parent}",
                path=path,
            )
        if tidy and not immutable:
            tidy_sidecars(path)
            if isinstance(mapped, StoreCorruptError):
                # A store whose schema cannot be read cannot be opened to tidy them away.
                _remove_empty_sidecars(path)
        raise mapped from None
    return conn, tidy and not immutable


def _remove_empty_sidecars(path: Path) -> None:
    """Remove an empty WAL (nothing was ever written through it) and then a SHM file without
    its WAL: what a reader left beside a file it could not read."""
    wal, shm = _sidecars(path)
    with suppress(OSError):
        if wal.exists() and wal.stat().st_size == 0:
            wal.unlink()
        if shm.exists() and not wal.exists():
            shm.unlink()


def tidy_sidecars(path: Path) -> None:
    """Remove the empty WAL/SHM files a read-only connection leaves behind (it may not delete
    them itself): a last connection that may write removes them when it closes."""
    with suppress(sqlite3.Error, OSError):
        if not any(sidecar.exists() for sidecar in _sidecars(path)):
            return
        conn = sqlite3.connect(str(path), isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        finally:
            conn.close()
