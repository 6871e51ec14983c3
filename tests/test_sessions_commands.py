"""``agentloop sessions``, second round (issue 19): JSON always, read-only stores, nothing created
by a command that fails, delete and prune that count what they would delete, durations with
seconds, a Markdown title escaped like the body, and ``fork`` in ``--help``.

Most run ``main()`` in-process against a temporary store (``AGENTLOOP_HOME`` is a temp dir for
every test); the read-only store is read by the console script as a user without write access.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.store_contract import drop_schema, fresh_schema, postgres_unavailable, postgres_url
from support.store_contract import with_schema as schema_url

from agentloop._cli.conversation_export import export_conversation
from agentloop._cli.main import main
from agentloop._cli.sessions_commands import parse_duration
from sessions import NewMessage, SessionStore, open_store, workspace_key

AGENTLOOP = Path(sys.executable).parent / "agentloop"


@dataclass
class Done:
    code: int
    out: str
    err: str


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory: the workspace the commands default to."""
    path = tmp_path / "project"
    path.mkdir()
    monkeypatch.chdir(path)
    monkeypatch.delenv("AGENTLOOP_STORE", raising=False)
    return path.resolve()


def sessions(capsys: pytest.CaptureFixture[str], *args: str) -> Done:
    """``agentloop sessions ARGS`` in-process, stdin not a terminal."""
    capsys.readouterr()
    try:
        code = main(["sessions", *args])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    return Done(code, captured.out, captured.err)


def exchange(text: str) -> list[NewMessage]:
    return [
        NewMessage(role="user", content=[{"type": "text", "text": f"{text}?"}]),
        NewMessage(role="assistant", content=[{"type": "text", "text": f"{text}."}]),
    ]


def chain(store: SessionStore, workspace: Path, generations: int, title: str = "t") -> list[str]:
    """A conversation compacted ``generations - 1`` times: its session ids, root first."""
    root = store.create_session(model="m", workspace=workspace_key(workspace), title=title)
    store.append_messages(root.id, exchange("start"))
    ids = [root.id]
    for n in range(generations - 1):
        child = store.transition(
            ids[-1], messages=exchange(f"kept {n}"), strategy="summarize", tokens_before=900
        )
        ids.append(child.id)
    return ids


def default_store() -> Path:
    return Path(os.environ["AGENTLOOP_HOME"]) / "sessions.db"


# -- list --json and tree --json print JSON always --------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a store would be, on either backend; nothing is there yet."""
    if request.param == "sqlite":
        yield str(tmp_path / "store" / "sessions.db")
        return
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    schema = fresh_schema()
    try:
        yield schema_url(postgres_url(), schema)
    finally:
        drop_schema(schema)


def test_list_and_tree_json_print_an_empty_array_on_a_missing_or_an_empty_store(
    here: Path, location: str, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = [
        ["list", "--json"],
        ["list", "--all", "--json"],
        ["list", "--all-generations", "--json"],
        ["tree", "--json"],
    ]
    for args in commands:  # no store
        done = sessions(capsys, *args, "--store", location)
        assert (done.code, json.loads(done.out), done.err) == (0, [], ""), args
    open_store(location).close()  # an empty store
    for args in commands:
        done = sessions(capsys, *args, "--store", location)
        assert (done.code, json.loads(done.out), done.err) == (0, [], ""), args
    # A store with conversations elsewhere only: this workspace has none.
    with open_store(location) as store:
        chain(store, here.parent, 2)
    for args in (["list", "--json"], ["tree", "--json"]):
        done = sessions(capsys, *args, "--store", location)
        assert (done.code, json.loads(done.out)) == (0, []), args
    # For people, words.
    assert sessions(capsys, "tree", "--store", location).out.startswith("No sessions in ")


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


# -- delete counts every later session ---------------------------------------------------------


def test_delete_counts_all_descendants_forks_included(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentloop._adapters.records import fork_session

    with open_store() as store:
        ids = chain(store, here, 3)  # root → child → grandchild
        fork = fork_session(store, ids[1])  # and a fork of the child
    done = sessions(capsys, "delete", ids[0], "--yes")
    assert done.code == 2
    assert done.err == (
        f"agentloop: error: session {ids[0][:8]} continues in 3 later sessions; "
        "--lineage deletes the whole conversation (4 sessions)\n"
    )
    middle = sessions(capsys, "delete", ids[1], "--yes")
    assert "continues in 2 later sessions" in middle.err
    assert sessions(capsys, "delete", fork, "--yes").out == "Deleted 1 session.\n"


# -- prune: how many, in the scope of list, durations with their units ------------------------


def test_prune_says_how_many_would_go_and_defaults_to_this_workspace(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = here.parent / "elsewhere"
    elsewhere.mkdir()
    old = datetime.now(UTC) - timedelta(days=45)
    with open_store(default_store(), clock=lambda: old) as store:
        mine = chain(store, here, 3, "mine")
        theirs = chain(store, elsewhere, 2, "theirs")
    with open_store() as store:
        recent = chain(store, here, 1, "recent")

    # Without --yes and without a terminal: the count, then nothing deleted.
    asked = sessions(capsys, "prune", "--older-than", "30d")
    assert asked.code == 2
    assert asked.err == (
        "agentloop: error: not deleting 1 conversation (3 sessions) without confirmation: "
        "add --yes (no terminal to ask)\n"
    )
    nothing = sessions(capsys, "prune", "--older-than", "60d", "--yes")
    assert nothing.out == f"No conversation in {here} is older than 60 days; nothing deleted.\n"

    pruned = sessions(capsys, "prune", "--older-than", "30d", "--yes")
    assert pruned.code == 0, pruned.err
    assert pruned.out == "Deleted 3 sessions.\n"
    with open_store() as store:
        left = {s.id for s in store.list_sessions(limit=None)}
    assert left == set(theirs) | set(recent)  # only this workspace's old conversation went
    assert not left & set(mine)

    everywhere = sessions(capsys, "prune", "--older-than", "4w", "--all", "--yes")
    assert everywhere.out == "Deleted 2 sessions.\n"
    with open_store() as store:
        assert [s.id for s in store.list_sessions(limit=None)] == recent


def test_prune_asks_with_the_count_on_a_terminal(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = datetime.now(UTC) - timedelta(hours=3)
    with open_store(default_store(), clock=lambda: old) as store:
        chain(store, here, 2)
        chain(store, here, 1)

    class Keyboard(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Keyboard("n\n"))
    done = sessions(capsys, "prune", "--older-than", "90m")
    assert done.err == (
        f"Delete 2 conversations (3 sessions) in {here} not active in the last 90 minutes? [y/N] "
    )
    assert done.out == "Nothing deleted.\n"


@pytest.mark.parametrize(
    ("text", "delta", "said"),
    [
        ("45s", timedelta(seconds=45), "45 seconds"),
        ("1s", timedelta(seconds=1), "1 second"),
        ("90m", timedelta(minutes=90), "90 minutes"),
        ("120 seconds", timedelta(minutes=2), "2 minutes"),
        ("12h", timedelta(hours=12), "12 hours"),
        ("30d", timedelta(days=30), "30 days"),
        ("3 days", timedelta(days=3), "3 days"),
        ("2w", timedelta(weeks=2), "2 weeks"),
    ],
)
def test_durations_take_seconds_and_say_their_units(text: str, delta: timedelta, said: str) -> None:
    from agentloop._cli.sessions_commands import age_text

    assert parse_duration(text) == delta
    assert age_text(delta) == said


def test_a_bad_duration_names_the_units(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = sessions(capsys, "prune", "--older-than", "5y")
    assert done.code == 2
    assert "s (seconds), m (minutes), h (hours), d (days), w (weeks)" in done.err
    helped = sessions(capsys, "prune", "--help")
    assert "s (seconds)" in helped.out and "--all" in helped.out


# -- the Markdown export's title ----------------------------------------------------------------


def test_the_export_escapes_the_title_like_the_body(tmp_path: Path) -> None:
    title = "Why <summary> vanished in `<b>` and issue #"
    with open_store(tmp_path / "s.db") as store:
        session = store.create_session(model="m", workspace="/w", title=title)
        store.append_messages(
            session.id, [NewMessage(role="user", content=[{"type": "text", "text": title}])]
        )
        out = io.StringIO()
        export_conversation(store, out, session.id)
    heading, *_ = out.getvalue().splitlines()
    assert heading == "# Why &lt;summary> vanished in `<b>` and issue \\#"
    # The body's own text is escaped the same way.
    assert "Why &lt;summary> vanished in `<b>`" in out.getvalue().split("### #1 User")[1]


# -- --help lists fork --------------------------------------------------------------------------


def test_help_lists_every_sessions_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["sessions", "--help"])
    sub = capsys.readouterr().out
    commands = ("list", "show", "search", "tree", "export", "fork", "delete", "prune", "copy")
    section = top.split("commands:")[1].split("slash commands")[0]
    for command in commands:
        assert command in section, command
        assert f"    {command} " in sub, command


def test_a_tree_of_a_named_session_on_a_missing_store_is_an_error(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["tree", "abcd"], ["tree", "abcd", "--json"]):
        done = sessions(capsys, *args)
        assert (done.code, done.out) == (2, ""), args
        assert done.err == "agentloop: error: no sessions yet (there is no session store)\n"
    assert not default_store().exists()
