"""Fault injection, a disk that fills in the middle of a session, for real on both
backends: SQLite with its store on a small tmpfs, PostgreSQL with the store's tables moved to a
tablespace on one (the server's own log stays on its disk, as when a data volume fills).

Nothing is printed that is not stored (``-p`` prints an answer only once it is), the user is
told in one line, no further paid call is made, and the next run, once there is room, continues
the same session. The test skips with the reason where a tmpfs cannot be mounted or no
PostgreSQL server answers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, text_reply
from support.processes import AgentProcess, cli_env
from support.small_disk import SmallDisk, postgres_on_small_disk, small_disk

from agentloop._adapters.records import from_record
from sessions import open_store

LONG = "the whole build log follows: " + os.urandom(30_000).hex()
"""Long, and not compressible (PostgreSQL compresses what it stores): storing it needs new
pages (a small row may fit a page already there)."""


@dataclass
class Place:
    """A store on a disk that can be filled, and the console script against a fake API."""

    location: str
    disk: SmallDisk
    root: Path
    server: FakeAnthropicServer
    answers: list[ReplySpec | Callable[[], ReplySpec]] = field(default_factory=list)

    def handler(self, body: dict[str, Any]) -> ReplySpec:
        if not self.answers:
            return text_reply("(unexpected request)")
        answer = self.answers.pop(0)
        return answer() if callable(answer) else answer

    def run(self, *args: str) -> AgentProcess:
        env = cli_env(self.root / "home", self.server.base_url, AGENTLOOP_STORE=self.location)
        process = AgentProcess(list(args), cwd=self.root / "project", env=env, forked=True)
        process.finish()
        assert "Traceback" not in process.text_err, process.text_err
        return process

    def stored(self) -> list[str]:
        """The text of each stored message (thinking, which a model may send first, left out)."""
        with open_store(self.location) as store:
            (session,) = store.list_sessions(limit=None)
            return [
                "".join(
                    str(b.get("text", "")) for b in from_record(m).content if b["type"] == "text"
                )
                for m in store.get_messages(session.id)
            ]


@pytest.fixture(params=["sqlite", "postgresql"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    (tmp_path / "project").mkdir()
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(FakeAnthropicServer())
        if request.param == "sqlite":
            disk = stack.enter_context(small_disk(tmp_path / "disk", size="2m"))
            made = Place(str(disk.root / "sessions.db"), disk, tmp_path, server)
        else:
            disk, location = stack.enter_context(postgres_on_small_disk())
            made = Place(location, disk, tmp_path, server)
        server.handler = made.handler
        yield made
        assert server.violations == []


def test_a_run_on_a_full_disk_pays_nothing_says_so_and_the_next_run_continues(
    place: Place,
) -> None:
    def by_question() -> ReplySpec:
        last = str(place.server.message_requests[-1]["messages"][-1]["content"])
        return text_reply("third answer" if "third question" in last else "never shown")

    place.answers = [text_reply("first answer"), by_question, by_question]
    first = place.run("-p", "first question")
    assert first.popen.returncode == 0, first.text_err
    assert first.printed_lines() == ["first answer"]

    place.disk.fill(0)
    full = place.run("-c", "-p", LONG)
    assert full.popen.returncode != 0
    assert full.text_out == ""  # nothing printed: nothing could be stored
    (error,) = full.error_lines()
    assert "the disk is full" in error
    # No paid call where the store cannot even be opened (SQLite: no room for its shared
    # memory); else at most the one whose reply could not be stored (PostgreSQL), none after.
    assert len(place.server.message_requests) <= 2

    place.disk.free()
    third = place.run("-c", "-p", "third question")
    assert third.popen.returncode == 0, third.text_err
    assert third.printed_lines() == ["third answer"]
    sent = place.server.message_requests[-1]["messages"]
    assert "first answer" in str(sent) and "third question" in str(sent)
    assert place.stored()[:2] == ["first question", "first answer"]
    assert place.stored()[-2:] == ["third question", "third answer"]


def test_a_disk_filling_while_the_reply_streams_prints_nothing_unstored_and_the_next_run_goes_on(
    place: Place,
) -> None:
    def filling() -> ReplySpec:
        place.disk.fill(0)  # the disk fills while the reply is on its way
        return text_reply(LONG)

    place.answers = [text_reply("first answer"), filling, text_reply("third answer")]
    first = place.run("-p", "first question")
    assert first.popen.returncode == 0, first.text_err

    lost = place.run("-c", "-p", "second question")
    assert lost.popen.returncode == 1
    assert lost.text_out == ""  # printed only once stored: it was not
    (error,) = lost.error_lines()
    assert "the reply was not saved" in error and "the disk is full" in error
    assert len(place.server.message_requests) == 2  # nothing more was asked

    place.disk.free()
    third = place.run("-c", "-p", "third question")
    assert third.popen.returncode == 0, third.text_err
    assert third.printed_lines() == ["third answer"]
    stored = place.stored()
    assert stored[:2] == ["first question", "first answer"]
    assert stored[-2:] == ["third question", "third answer"]
    assert LONG not in stored  # the lost reply was never stored, nor shown
