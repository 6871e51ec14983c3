"""The backends the store contract suite (``tests/test_store_contract*.py``) runs against.

Adding a backend is one line in :data:`BACKENDS` (plus its :class:`StoreFactory` class): every
contract test then runs against it through the ``store_factory`` fixture defined here. A
factory whose server does not answer calls ``pytest.skip`` with a one-line reason.

PostgreSQL: the server at ``$AGENTLOOP_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``); every test gets a fresh schema, dropped after it.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest

from sessions import (
    NewMessage,
    Role,
    Session,
    SessionStore,
    open_store,
)
from sessions._sql_search import catch_up
from sessions._sql_store import SqlSessionStore
from sessions._sql_transaction import SqlTransaction

POSTGRES_ENV = "AGENTLOOP_TEST_POSTGRES"
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


class InjectedFault(Exception):
    """Raised by a factory's fault injection; never by a store on its own."""


class Clock:
    """A clock that moves ``step`` per reading: orderings become deterministic."""

    def __init__(
        self, start: datetime | None = None, step: timedelta = timedelta(seconds=1)
    ) -> None:
        self.now = start or datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
        self.step = step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


class StoreFactory(Protocol):
    """One test's store on one backend; every handle it opens sees the same data."""

    name: str
    location: str
    """What ``open_store`` takes to open this store (a path or a URL), e.g. in a child process."""

    def open(self, *, clock: Callable[[], datetime] | None = None) -> SessionStore:
        """A new handle; ``clock`` (default: real time) stamps everything it writes."""
        ...

    def open_nowait(self) -> SessionStore:
        """A handle that raises :class:`StoreBusyError` at once when another writer holds the
        lock it needs, instead of waiting for it."""
        ...

    def fail_inside_transitions(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Until ``monkeypatch`` is undone, every write of a compaction entry raises
        :class:`InjectedFault` inside its transaction: for a transition, after the child, its
        messages and the parent's new status were written."""
        ...

    def close(self) -> None:
        """Close every handle this factory opened."""
        ...


def fail_inside_transitions(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: SqlTransaction, *args: Any, **kwargs: Any) -> None:
        raise InjectedFault("crash in the middle of the transaction")

    # Both transition() and record_without_child() write their entry last; both backends run it.
    monkeypatch.setattr(SqlTransaction, "_insert_entry", fail)


class _OpenedStores:
    """What the backends' factories share: handles on ``location``, closed at the end."""

    location: str
    _opened: list[SessionStore]

    def open(self, *, clock: Callable[[], datetime] | None = None) -> SessionStore:
        store = open_store(self.location, clock=clock)
        self._opened.append(store)
        return store

    def open_nowait(self) -> SessionStore:
        store = open_store(self.location, busy_timeout=0)
        self._opened.append(store)
        return store

    def fail_inside_transitions(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fail_inside_transitions(monkeypatch)

    def close(self) -> None:
        for store in self._opened:
            store.close()


class SqliteFactory(_OpenedStores):
    name = "sqlite"

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "store" / "sessions.db"
        self.location = str(self.path)
        self._opened: list[SessionStore] = []


def postgres_url() -> str:
    return os.environ.get(POSTGRES_ENV, "").strip() or DEFAULT_POSTGRES


@functools.cache
def postgres_unavailable() -> str | None:
    """Why the PostgreSQL tests cannot run here (None: they can). Asked once per test run."""
    try:
        import psycopg
    except ImportError:
        return 'psycopg is not installed (pip install -e ".[postgres]")'
    url = postgres_url()
    try:
        psycopg.connect(url, connect_timeout=3, autocommit=True).close()
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else "no answer"
        return f"no PostgreSQL server answers at {url} (set {POSTGRES_ENV}): {reason}"
    return None


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def fresh_schema() -> str:
    return f"agentloop_test_{os.getpid()}_{uuid.uuid4().hex[:10]}"


def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class PostgresFactory(_OpenedStores):
    name = "postgresql"

    def __init__(self, tmp_path: Path) -> None:
        reason = postgres_unavailable()
        if reason is not None:
            pytest.skip(reason)
        self.schema = fresh_schema()
        self.location = with_schema(postgres_url(), self.schema)
        self._opened: list[SessionStore] = []

    def close(self) -> None:
        super().close()
        drop_schema(self.schema)


BACKENDS: dict[str, Callable[[Path], StoreFactory]] = {
    "sqlite": SqliteFactory,
    "postgresql": PostgresFactory,
}
"""Backend name -> factory taking the test's ``tmp_path``."""


# ------------------------------------------------------------------ fixtures


@pytest.fixture(params=sorted(BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    factory = BACKENDS[request.param](tmp_path)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> SessionStore:
    return store_factory.open(clock=Clock())


# ------------------------------------------------------------------ helpers for the tests


def text(role: Role, value: str, tokens: int | None = 10) -> NewMessage:
    return NewMessage(role=role, content=[{"type": "text", "text": value}], token_estimate=tokens)


def user(value: str, **extra: Any) -> NewMessage:
    return NewMessage(role="user", content=[{"type": "text", "text": value}], **extra)


def assistant(value: str, **extra: Any) -> NewMessage:
    return NewMessage(role="assistant", content=[{"type": "text", "text": value}], **extra)


def conversation(n: int) -> list[NewMessage]:
    return [text("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(n)]


def tool_call(call_id: str) -> NewMessage:
    return NewMessage(
        role="assistant",
        content=[{"type": "tool_use", "id": call_id, "name": "read", "input": {"p": call_id}}],
        token_estimate=10,
    )


def tool_result(call_id: str) -> NewMessage:
    return NewMessage(
        role="user",
        content=[{"type": "tool_result", "tool_use_id": call_id, "content": "data"}],
        token_estimate=10,
    )


def new_session(store: SessionStore, messages: list[NewMessage]) -> str:
    session = store.create_session(model="m", workspace="/w")
    store.append_messages(session.id, messages)
    return session.id


def texts(store: SessionStore, session_id: str | None) -> list[Any]:
    assert session_id is not None
    blocks = [m.content[0] for m in store.get_messages(session_id)]
    return [b.get("text") or b.get("id") or b.get("tool_use_id") for b in blocks]


def chain(store: SessionStore, generations: int) -> list[Session]:
    """A root and ``generations - 1`` successive compaction children."""
    root = store.create_session(model="m", workspace="/w", title="t")
    store.append_messages(root.id, conversation(4))
    sessions = [root]
    for _ in range(generations - 1):
        child = store.transition(
            sessions[-1].id, messages=conversation(2), strategy="summarize", summary="s"
        )
        store.append_messages(child.id, conversation(2))
        sessions.append(child)
    return sessions


def snapshot(store: SessionStore, session_id: str) -> dict[str, Any]:
    """Everything the protocol shows about a session's lineage and the store's sessions."""
    return {
        "sessions": store.list_sessions(limit=None),
        "lineage": store.lineage(session_id),
        "messages": {s.id: store.get_messages(s.id) for s in store.lineage(session_id)},
        "history": store.compaction_history(session_id),
        "record": store.get_compaction_record(session_id),
    }


DETAIL = "The deploy key is called ORCHID-7; it lives in src/deploy/keys.py."


def index_rows(store: SessionStore) -> int:
    """Rows of the search index, read in the table itself once it caught up with the messages
    (SQLite indexes them in batches; a search catches up first)."""
    assert isinstance(store, SqlSessionStore)
    with store._transaction(write=True) as tx:
        catch_up(tx.db)
    with store._transaction(write=False) as tx:
        row = tx.db.one("SELECT count(*) FROM message_search")
    assert row is not None
    return int(row[0])


def call(call_id: str, name: str, **tool_input: Any) -> NewMessage:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}
    return NewMessage(role="assistant", content=[{"type": "text", "text": "Let me look."}, block])


def result(call_id: str, output: str) -> NewMessage:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    return NewMessage(role="user", content=[block])


def compacted_conversation(store: SessionStore, workspace: str = "/w") -> tuple[str, str, str]:
    """A root whose first turn holds :data:`DETAIL` and a tool round, compacted twice by a
    summary that leaves the detail out; returns (root, child, grandchild)."""
    root = store.create_session(model="m", workspace=workspace, title="deploying")
    store.append_messages(
        root.id,
        [
            user(DETAIL),
            call("toolu_1", "run_command", command="cat config/release.toml"),
            result("toolu_1", "[release]\nchannel = 'stable'\nsigned_by = 'HELIOTROPE'\n"),
            assistant("Noted the key and the release channel."),
        ],
    )
    child = store.transition(
        root.id,
        messages=[user("Summary: we are deploying."), assistant("Continuing.")],
        strategy="summarize",
        summary="we are deploying",
    )
    store.append_messages(child.id, [user("Now run the tests."), assistant("They pass.")])
    grandchild = store.transition(
        child.id,
        messages=[user("Summary: deploying, tests pass."), assistant("Continuing.")],
        strategy="summarize",
    )
    return root.id, child.id, grandchild.id
