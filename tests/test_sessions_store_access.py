"""How ``agentloop sessions`` opens the store (``_cli/store_access``): a read-only store (a
read-only file, or a PostgreSQL role that may only select) can be listed, shown, searched and
exported, and writing to it is refused in one line; a command that finds no store creates none.

Most run ``main()`` in-process against a temporary store; the read-only file is read by the
console script as a user without write access.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.sessions_cli import chain, default_store, here, location, sessions
from support.store_contract import drop_schema, fresh_schema, postgres_unavailable, postgres_url
from support.store_contract import with_schema as schema_url

from sessions import open_store

__all__ = ["here", "location"]  # the fixtures, used here

AGENTLOOP = Path(sys.executable).parent / "agentloop"


# -- a read-only store can be listed, shown and exported --------------------------------------


def _as_a_reader_without_write_access() -> list[str]:
    """A command prefix under which the store's file and directory cannot be written: none for
    an ordinary user (the modes do it); root ignores modes, so it runs in a user namespace
    without privileges (root's files are then read by their owner's mode bits only)."""
    if os.geteuid() != 0:
        return []
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("running as root without unshare: a read-only file cannot be made")
    probe = subprocess.run([unshare, "-U", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("running as root and user namespaces are not available")
    return [unshare, "-U"]


@pytest.fixture
def archived(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A store in a read-only directory, itself read-only (as unpacked from an archive, or
    another user's shared file), holding a compacted conversation; and its session ids."""
    folder = tmp_path / "archive"
    path = folder / "sessions.db"
    with open_store(path) as store:
        ids = chain(store, tmp_path, 2, title="archived work")
    assert not Path(f"{path}-wal").exists()  # the last connection folded its log in
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    yield path, ids
    folder.chmod(stat.S_IRWXU)


def test_a_read_only_store_can_be_listed_shown_searched_and_exported(
    archived: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, ids = archived
    prefix = _as_a_reader_without_write_access()
    env = dict(os.environ, AGENTLOOP_HOME=str(tmp_path / "home"))
    env.pop("AGENTLOOP_STORE", None)

    def agentloop(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, str(AGENTLOOP), "sessions", *args, "--store", str(path)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
        )

    before = sorted(os.listdir(path.parent))
    listed = agentloop("list", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [row["id"] for row in json.loads(listed.stdout)] == [ids[-1]]
    table = agentloop("list", "--all")
    assert table.returncode == 0 and "archived work" in table.stdout, table.stderr
    shown = agentloop("show", ids[0])
    assert shown.returncode == 0 and f"Session     {ids[0]}" in shown.stdout, shown.stderr
    exported = agentloop("export", ids[1])
    assert exported.returncode == 0 and "# archived work" in exported.stdout, exported.stderr
    tree = agentloop("tree", ids[0])
    assert tree.returncode == 0 and "resume continues here" in tree.stdout, tree.stderr
    found = agentloop("search", "kept", "--all", "--json")
    assert found.returncode == 0 and json.loads(found.stdout), found.stderr
    # Writing is refused in one line, and nothing was made beside the file.
    refused = agentloop("delete", ids[0], "--lineage", "--yes")
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0 and "read-only" in refused.stderr
    assert sorted(os.listdir(path.parent)) == before


def test_a_shared_postgres_store_read_by_a_role_that_may_only_select(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg
    from psycopg import sql

    schema, role = fresh_schema(), f"agentloop_reader_{uuid.uuid4().hex[:10]}"
    url = schema_url(postgres_url(), schema)
    with open_store(url) as store:
        ids = chain(store, here, 2, title="shared work")
    admin = psycopg.connect(postgres_url(), autocommit=True)
    try:
        for statement in (
            "CREATE ROLE {role} LOGIN",
            "GRANT USAGE ON SCHEMA {schema} TO {role}",
            "GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}",
        ):
            admin.execute(
                sql.SQL(statement).format(role=sql.Identifier(role), schema=sql.Identifier(schema))
            )
        parts = urlsplit(url)
        reader = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}"))
        listed = sessions(capsys, "list", "--json", "--store", reader)
        assert [row["id"] for row in json.loads(listed.out)] == [ids[-1]], listed.err
        shown = sessions(capsys, "show", ids[0], "--store", reader)
        assert shown.code == 0 and "shared work" in shown.out, shown.err
        exported = sessions(capsys, "export", ids[1], "--store", reader)
        assert exported.code == 0 and exported.out.startswith("# shared work\n"), exported.err
        refused = sessions(capsys, "delete", ids[0], "--lineage", "--yes", "--store", reader)
        assert refused.code == 2 and refused.err.count("\n") == 1
    finally:
        drop_schema(schema)
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.close()


# -- commands that fail on a missing store create none ----------------------------------------


def test_commands_that_find_no_store_create_none(
    here: Path, location: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["delete", "abcd", "--yes"], ["fork", "abcd"], ["show", "abcd"]):
        done = sessions(capsys, *args, "--store", location)
        assert done.code == 2, args
        assert done.err == "agentloop: error: no sessions yet (there is no session store)\n"
    pruned = sessions(capsys, "prune", "--older-than", "30d", "--yes", "--store", location)
    assert (pruned.code, pruned.out) == (0, "No sessions yet.\n")
    # Nothing was created: a read-only open still finds no store.
    from sessions import StoreMissingError

    with pytest.raises(StoreMissingError):
        open_store(location, read_only=True)
    if "://" not in location:
        assert not Path(location).parent.exists()


def test_the_default_store_is_not_created_by_delete_fork_or_prune(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["delete", "abcd", "--yes"], ["fork", "abcd"], ["prune", "--older-than", "1d"]):
        sessions(capsys, *args)
    assert not default_store().exists()


def test_a_tree_of_a_named_session_on_a_missing_store_is_an_error(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["tree", "abcd"], ["tree", "abcd", "--json"]):
        done = sessions(capsys, *args)
        assert (done.code, done.out) == (2, ""), args
        assert done.err == "agentloop: error: no sessions yet (there is no session store)\n"
    assert not default_store().exists()
