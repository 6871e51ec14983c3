"""``agentloop sessions`` run in-process against a temporary store (``AGENTLOOP_HOME`` is a temp
dir for every test), and the stores such a test starts from: conversations compacted a number of
times, on SQLite or PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentloop._cli.main import main
from sessions import NewMessage, SessionStore, workspace_key
from support.store_contract import drop_schema, fresh_schema, postgres_unavailable, postgres_url
from support.store_contract import with_schema as schema_url


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
