"""`agentloop sessions list` never imports pydantic (it was 75 % of the command's time).

The listing reads through :mod:`sessions._list_handle` (plain rows, the backends' connections only);
these tests run it in a fresh interpreter, on both backends, and check what was loaded, and
that the plain rows say exactly what the store's pydantic values say.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import support.store_contract as store_contract
from support.store_contract import StoreFactory, conversation, user

from sessions import Conversation, Session, SessionStore, open_store
from sessions._list_handle import open_listing
from sessions._sql_listing import SESSION_FIELDS, ConversationRow

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("pydantic", "pydantic_core", "sessions._types", "sessions._sql_store", "anthropic")
VARIANTS = (
    ["sessions", "list"],
    ["sessions", "list", "--all"],
    ["sessions", "list", "--all", "--json"],
    ["sessions", "list", "--all-generations"],
    ["sessions", "list", "--all-generations", "--all", "--json", "--limit", "0"],
    ["sessions"],
)
# Runs every variant in one fresh interpreter, then reports what it loaded (last line).
SCRIPT = f"""
import json, sys
from agentloop._cli.main import main
codes = [main(argv + sys.argv[1:]) for argv in {VARIANTS!r}]
sys.stdout.flush()
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r} or m in {HEAVY!r})
print(json.dumps({{"codes": codes, "heavy": heavy}}))
"""

store_factory = store_contract.store_factory


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLOOP_", "ANTHROPIC_"))}
    env.update(AGENTLOOP_HOME=str(home), PYTHONPATH=str(REPO))
    return env


def seed(store: SessionStore, workspace: str) -> tuple[str, str, str]:
    """A compacted conversation here (root and child) and a lone one elsewhere."""
    root = store.create_session(model="m", workspace=workspace, title="compacted one")
    store.append_messages(root.id, conversation(4))
    child = store.transition(root.id, messages=[user("summary")], strategy="summarize")
    lone = store.create_session(model="m", workspace="/elsewhere", title="lone one")
    store.append_messages(lone.id, conversation(2))
    return root.id, child.id, lone.id


def run_listing(home: Path, cwd: Path, *extra: str) -> tuple[str, dict[str, list[object]]]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *extra],
        cwd=cwd,
        env=environment(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    output, _, report = done.stdout.rstrip("\n").rpartition("\n")
    return output, json.loads(report)


def test_sessions_list_never_imports_pydantic(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with open_store(tmp_path / "home" / "sessions.db") as store:
        root, child, lone = seed(store, str(work))
    output, report = run_listing(tmp_path / "home", work)
    assert report == {"codes": [0] * len(VARIANTS), "heavy": []}
    # It listed for real: the conversation's head, the lone one (--all), every generation.
    assert child[:8] in output and lone[:8] in output and root in output
    assert '"generations": 1' in output


def test_sessions_list_as_started_from_the_shell_imports_no_pydantic(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with open_store(tmp_path / "home" / "sessions.db") as store:
        _, child, _ = seed(store, str(work))
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentloop", "sessions", "list"],
        cwd=work,
        env=environment(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert child[:8] in done.stdout
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()}
    assert "sessions._list_handle" in imported  # (importtime did report the imports)
    assert not {name for name in imported if name.split(".")[0] in HEAVY or name in HEAVY}


def test_listing_a_postgresql_store_imports_no_pydantic(tmp_path: Path) -> None:
    factory = store_contract.PostgresFactory(tmp_path)  # (skips without a server)
    try:
        work = tmp_path / "work"
        work.mkdir()
        with open_store(factory.location) as store:
            _, child, lone = seed(store, str(work))
        output, report = run_listing(tmp_path / "home", work, "--store", factory.location)
    finally:
        factory.close()
    assert report == {"codes": [0] * len(VARIANTS), "heavy": []}
    assert child[:8] in output and lone[:8] in output


def test_the_plain_rows_have_the_fields_of_the_store_values() -> None:
    # The JSON of `sessions list` is built from these names: it stays what the values hold.
    assert tuple(Session.model_fields) == SESSION_FIELDS
    names = tuple(field.name for field in dataclasses.fields(ConversationRow))
    assert names == tuple(Conversation.model_fields)


def test_the_listing_says_what_the_store_says(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    seed(store, "/w")
    third = store.create_session(model="m", workspace="/w")
    store.append_messages(third.id, conversation(2))
    with open_listing(store_factory.location) as listing:
        for workspace in (None, "/w", "/nowhere"):
            for limit, offset in ((None, 0), (1, 1), (0, 0)):
                rows = listing.list_conversations(workspace=workspace, limit=limit, offset=offset)
                values = store.list_conversations(workspace=workspace, limit=limit, offset=offset)
                assert [dataclasses.asdict(row) for row in rows] == [
                    {**value.model_dump(), "head": value.head.model_dump()} for value in values
                ]
                sessions = listing.list_sessions(workspace=workspace, limit=limit, offset=offset)
                expected = store.list_sessions(workspace=workspace, limit=limit, offset=offset)
                assert [dataclasses.asdict(row) for row in sessions] == [
                    value.model_dump() for value in expected
                ]
            count = store.count_sessions(workspace=workspace)
            assert listing.count_sessions(workspace=workspace) == count
            count = store.count_conversations(workspace=workspace)
            assert listing.count_conversations(workspace=workspace) == count
        for bad in (-1, True, "2"):
            with pytest.raises(ValueError):
                listing.list_conversations(limit=bad)  # type: ignore[arg-type]


def test_listing_creates_no_store(tmp_path: Path) -> None:
    from sessions import StoreMissingError

    with pytest.raises(StoreMissingError):
        open_listing(tmp_path / "none.db")
    assert not (tmp_path / "none.db").exists()


def test_listing_postgresql_without_psycopg_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from sessions import StoreError

    for name in ("psycopg", "psycopg_pool"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
    for name in ("sessions._postgres_db", "sessions._postgres_schema"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(StoreError, match=r"needs psycopg: pip install 'agentloop\[postgres\]'"):
        open_listing("postgresql://postgres@127.0.0.1/test")
