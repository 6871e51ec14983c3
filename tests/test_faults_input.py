"""Fault injection, hostile input through the console script: bytes that are not
UTF-8 (on stdin, in arguments, in file names, file contents and command output), a secret in
a command's output, and a 5 MB line against a small window.

Bytes that are not UTF-8 never crash anything and the store holds exactly what the model was
sent; the API key never reaches a request body or the store file; a message that cannot fit
the window is refused before anything is sent, in one line, and the session goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_api import FakeAnthropicServer, ToolCall, text_reply, tool_reply
from support.faults import SECRET, Agent, make_agent, sound, texts, tool_results
from support.processes import AGENTLOOP, check_store

WINDOW = "6000"
OTHER_SECRET = "ghp_faultinjection0123456789abcdef"


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    yield from make_agent(tmp_path)


def uncached(messages: object) -> list[dict[str, object]]:
    """Messages as the API reads them, without the prompt cache's markers (the store has none)."""
    assert isinstance(messages, list)
    return [
        {
            **message,
            "content": [
                {k: v for k, v in block.items() if k != "cache_control"}
                for block in message["content"]
            ],
        }
        for message in messages
    ]


# -- bytes that are not UTF-8 -------------------------------------------------------------------


def test_non_utf8_stdin_file_names_and_output_carry_replacements_and_agree(agent: Agent) -> None:
    name = b"caf\xe9.txt"
    with open(os.fsencode(agent.workspace) + b"/" + name, "wb") as handle:
        handle.write(b"menu: caf\xe9 cr\xe8me\n")
    agent.script.add(
        text_reply("one"),
        text_reply("two"),
        tool_reply(
            ToolCall("list_files", {}),
            ToolCall("grep", {"pattern": "menu"}),
            ToolCall("read_file", {"path": "caf\\xe9.txt"}),
            ToolCall("run_command", {"command": "printf 'out: caf\\351\\n'; ls"}),
        ),
        text_reply("three"),
        text_reply("four", thinking=False),  # the stored reply: its text only
    )
    stdin = b"Turn 1 plain\nTurn 2: caf\xe9 \xff\xfe\nTurn 3: look at the files\nTurn 4: \xc3\n"

    process = agent.run("--context-window", WINDOW, "--yes", stdin=stdin)

    sound(process)
    assert process.printed_lines() == ["one", "two", "three", "four"]
    sent = agent.script.conversation
    said = [body["messages"][-1]["content"][0].get("text") for body in sent]
    assert said[1] == "Turn 2: caf\ufffd \ufffd\ufffd"
    assert said[-1] == "Turn 4: \ufffd"
    listed, grepped, read, ran = (str(r["content"]) for r in tool_results(sent[3]))
    assert listed == "caf\\xe9.txt"
    assert grepped.startswith("caf\\xe9.txt:1: menu: caf")
    assert read.endswith("menu: caf\ufffd cr\ufffdme")  # the escaped name finds the file
    assert ran.startswith("out: caf\ufffd\ncaf\ufffd.txt\n")  # command output: replaced
    # What the model received is what the store holds, byte for byte.
    stored = agent.stored_params()
    assert stored[:-1] == uncached(sent[-1]["messages"])
    assert stored[-1] == {"role": "assistant", "content": [{"type": "text", "text": "four"}]}
    check_store(agent.store)


def test_non_utf8_argument_and_piped_bytes_in_print_mode(agent: Agent) -> None:
    agent.script.add(text_reply("answered", thinking=False))  # the stored reply: its text only

    process = agent.run(
        "--context-window", WINDOW, "-p", b"explain caf\xe9", stdin=b"piped \xff bytes\n"
    )

    sound(process)
    assert process.printed_lines() == ["answered"]
    (body,) = agent.script.conversation
    text = body["messages"][0]["content"][0]["text"]
    assert text.startswith("explain caf\ufffd") and "piped \ufffd bytes" in text
    assert agent.stored_params() == [
        *uncached(body["messages"]),
        {"role": "assistant", "content": [{"type": "text", "text": "answered"}]},
    ]


# -- secrets -----------------------------------------------------------------------------------


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[Agent]:
    yield from make_agent(tmp_path, api_key=SECRET)


@pytest.mark.heavy
def test_the_api_key_never_reaches_the_context_or_the_store(keyed: Agent) -> None:
    (keyed.workspace / "config.txt").write_text(f"key={SECRET}\ntoken={OTHER_SECRET}\n")
    commands = [
        "env",
        "echo key=$ANTHROPIC_API_KEY token=$GITHUB_TOKEN",
        "printenv | grep -i -e anthropic -e github; true",
        "cat config.txt",
    ]
    keyed.script.add(
        tool_reply(*(ToolCall("run_command", {"command": c}) for c in commands)),
        tool_reply(
            ToolCall("read_file", {"path": "config.txt"}), ToolCall("grep", {"pattern": "key"})
        ),
        text_reply("nothing to see"),
    )

    process = keyed.run(
        "--context-window",
        WINDOW,
        "--yes",
        stdin=b"show me the key\n",
        env={"ANTHROPIC_API_KEY": SECRET, "GITHUB_TOKEN": OTHER_SECRET},
    )

    sound(process)
    assert process.printed_lines() == ["nothing to see"]
    results = [str(r["content"]) for r in tool_results(keyed.script.conversation[1])]
    env_output, echoed, listed_env, cat = results
    for listing in (env_output, listed_env):
        assert "ANTHROPIC_API_KEY" not in listing and "GITHUB_TOKEN" not in listing
    assert echoed.startswith("key= token=")  # the commands never had them...
    assert "[redacted $ANTHROPIC_API_KEY]" in cat  # ...and their values are redacted
    assert "[redacted $GITHUB_TOKEN]" in cat
    later = [str(r["content"]) for r in tool_results(keyed.script.conversation[2])]
    assert all("[redacted $ANTHROPIC_API_KEY]" in result for result in later)
    # Not in any request body (the key goes in a header only), nor anywhere in the store files.
    for request in keyed.server.requests:
        assert SECRET not in json.dumps(request.body)
        assert OTHER_SECRET not in json.dumps(request.body)
    for path in keyed.home.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
            assert OTHER_SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in process.text_out + process.text_err


# -- a message larger than the window ---------------------------------------------------------

HUGE = ("lorem ipsum dolor sit amet " * 200_000)[:5_000_000]  # one 5 MB line


def no_request_carries(server: FakeAnthropicServer, marker: str) -> None:
    for request in server.requests:
        body = json.dumps(request.body)
        assert marker not in body and len(body) < 1_000_000


@pytest.mark.heavy
def test_a_5mb_line_is_refused_before_sending_and_the_session_goes_on(agent: Agent) -> None:
    agent.script.add(text_reply("before answer"), text_reply("after answer"))
    stdin = b"before\n" + HUGE.encode() + b"\nafter\n"

    process = agent.run("--context-window", WINDOW, stdin=stdin)

    assert "Traceback" not in process.text_err
    assert process.popen.returncode == 1  # a turn failed
    (error,) = process.error_lines()
    assert "it was not sent" in error and "6,000-token window" in error
    assert process.printed_lines() == ["before answer", "after answer"]
    no_request_carries(agent.server, "lorem ipsum dolor")
    assert len(agent.script.conversation) == 2
    history = check_store(agent.store).messages
    (messages,) = history.values()
    assert texts(messages) == ["before", "before answer", "after", "after answer"]


def test_a_5mb_pipe_in_print_mode_is_refused_and_nothing_is_sent(agent: Agent) -> None:
    process = agent.run("--context-window", WINDOW, "-p", "summarize this", stdin=HUGE.encode())

    assert "Traceback" not in process.text_err
    assert process.popen.returncode == 1
    (error,) = process.error_lines()
    assert "it was not sent" in error
    assert process.text_out == ""
    assert agent.server.message_requests == []
    no_request_carries(agent.server, "lorem ipsum dolor")
    if agent.store.exists():
        assert check_store(agent.store).sessions == 0  # nothing kept


PEAK_MEMORY_MB = 350
"""A bound far above the process's own size (about 130 MB with the SDK and the tokenizer) and
far below what tokenizing a 10 MB line whole took (633 MB): it is refused from its size."""


def peak_memory_run(agent: Agent, args: list[str], stdin: bytes) -> tuple[int, float, str]:
    """Run the console script to its end: its exit code, its peak memory (MB: the kernel's
    high-water mark of the program's own memory, ``VmHWM``, read until it exits) and its
    stderr. (Not ``ru_maxrss``: Linux carries it over exec from the fork of this test
    process, whose own size then counts.)"""
    process = subprocess.Popen(
        [str(AGENTLOOP), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=agent.workspace,
        env=agent.env(),
    )
    stdin_pipe, stderr_pipe = process.stdin, process.stderr
    assert stdin_pipe is not None and stderr_pipe is not None
    errors: list[bytes] = []
    reader = threading.Thread(target=lambda: errors.append(stderr_pipe.read()))
    reader.start()
    peaks: list[int] = [0]
    done = threading.Event()

    def sample() -> None:
        status = Path(f"/proc/{process.pid}/status")
        while not done.is_set():
            with contextlib.suppress(OSError, ValueError):
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peaks.append(int(line.split()[1]))
            done.wait(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    with contextlib.suppress(BrokenPipeError):
        stdin_pipe.write(stdin)
        stdin_pipe.close()
    process.wait()
    done.set()
    sampler.join()
    reader.join()
    return process.returncode, max(peaks) / 1024, errors[0].decode("utf-8", "replace")


@pytest.mark.heavy
def test_a_10mb_line_is_refused_from_its_size_in_bounded_memory(agent: Agent) -> None:
    agent.script.add(text_reply("after answer"))
    line = ("lorem ipsum dolor sit amet " * 400_000)[:10_000_000].encode()

    code, peak, err = peak_memory_run(agent, ["--context-window", WINDOW], line + b"\nafter\n")

    assert "Traceback" not in err, err
    assert code == 1
    assert "more than the 6,000-token window: it was not sent" in err
    assert 0 < peak < PEAK_MEMORY_MB, f"peaked at {peak:.0f} MB"
    assert len(agent.script.conversation) == 1  # the next line went on
    no_request_carries(agent.server, "lorem ipsum dolor")
