"""Fault injection, replies that go wrong in new ways, through the console script and
the real ``anthropic`` SDK against the test server: a stream line that is not JSON, an event of
the wrong shape, an ``error`` event mid-stream, a stream that stalls.

Each is a broken reply: what was shown is marked as not kept (on stderr, in pipe mode too),
the request is sent once more, nothing partial is stored, the reason given is the true one (no
"after 2 retries" that never happened), and the turns after it run.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable

import pytest
from fake_api import (
    FakeAnthropicServer,
    Reply,
    error_event_reply,
    injected_reply,
    stalled_reply,
    text_reply,
)
from support.cli import CLI, WINDOW, Run
from support.faults import PARTIAL, clean, only_session, request, store_path, texts

from agentloop._adapters.anthropic import AnthropicModel
from agentloop._errors import IncompleteReplyError

WHOLE = PARTIAL + "REPLY whole answer"
NOT_JSON = b"event: content_block_delta\ndata: {this is not json\n\n"
WRONG_SHAPE = b'event: content_block_delta\ndata: {"type": "content_block_delta"}\n\n'

MALFORMED: dict[str, Callable[[], Reply]] = {
    "a line that is not JSON": lambda: injected_reply(WHOLE, NOT_JSON),
    "an event of the wrong shape": lambda: injected_reply(WHOLE, WRONG_SHAPE),
    "an error event": lambda: error_event_reply(WHOLE),
}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("fault", list(MALFORMED))
def test_a_malformed_stream_is_a_broken_reply_at_the_adapter(
    fake_api: FakeAnthropicServer, fault: str, asynchronous: bool
) -> None:
    make = MALFORMED[fault]
    fake_api.enqueue(make())
    model = AnthropicModel(api_key="test-key", base_url=fake_api.base_url)
    shown: list[str] = []
    with pytest.raises(IncompleteReplyError) as caught:
        if asynchronous:
            asyncio.run(model.acomplete(request(), shown.append))
        else:
            model.complete(request(), shown.append)
    reason = str(caught.value)
    assert "\n" not in reason and "retr" not in reason  # one line; no retry claimed
    if fault == "an error event":
        assert reason == "the API reported an error mid-reply (overloaded_error: Overloaded)"
    else:
        assert reason.startswith("the API's reply was malformed (")
    assert "".join(shown) == PARTIAL  # what came before the fault was shown, and only that


@pytest.mark.heavy
def test_each_new_fault_is_withdrawn_asked_again_and_the_session_goes_on(cli: CLI) -> None:
    release = threading.Event()
    cli.script.add(
        injected_reply(WHOLE, NOT_JSON, framing="chunked"),
        text_reply("answer 1"),
        error_event_reply(WHOLE),
        text_reply("answer 2"),
        stalled_reply(WHOLE, seconds=60, release=release),
        text_reply("answer 3"),
        injected_reply(WHOLE, WRONG_SHAPE),
        text_reply("answer 4"),
    )
    env = {**os.environ, "AGENTLOOP_STREAM_TIMEOUT": "0.5"}
    try:
        run = cli.subprocess(
            "--context-window", WINDOW, stdin="turn 1\nturn 2\nturn 3\nturn 4\n", env=env
        )
    finally:
        release.set()

    clean(run)
    assert run.code == 0 and run.error_lines() == [], run.err
    # Each broken part is shown, then its line is ended and the whole answer follows.
    assert run.out.splitlines() == [
        *(line for n in range(1, 5) for line in (PARTIAL, f"answer {n}"))
    ]
    notices = [line for line in run.err.splitlines() if "the reply broke off" in line]
    assert len(notices) == 4  # said on stderr, though stdout is a pipe
    assert "malformed" in notices[0] and "malformed" in notices[3]
    assert "the API reported an error mid-reply (overloaded_error: Overloaded)" in notices[1]
    assert "stalled: nothing came for 0.5 s" in notices[2]
    assert all("the part above is not kept" in notice for notice in notices)
    assert "retries" not in run.err
    history = only_session(store_path())
    assert texts(history) == [t for n in range(1, 5) for t in (f"turn {n}", f"answer {n}")]
    assert PARTIAL not in str([m.content for m in history])
    assert len(cli.script.conversation) == 8  # each asked exactly twice


def test_a_bad_stream_timeout_is_one_line(cli: CLI) -> None:
    env = {**os.environ, "AGENTLOOP_STREAM_TIMEOUT": "soon"}
    run: Run = cli.subprocess("--context-window", WINDOW, stdin="hello\n", env=env)
    assert run.code == 2
    assert run.err.strip() == (
        "agentloop: error: AGENTLOOP_STREAM_TIMEOUT must be a number of seconds above 0, not 'soon'"
    )
    assert cli.script.conversation == []
