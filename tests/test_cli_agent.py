"""The ``agentloop`` command line end to end, against the fake Messages API on 127.0.0.1.

The stdin-driven mode runs the real console script in a subprocess (``ANTHROPIC_BASE_URL`` points
at the fake server, stdin is a pipe, so each line is one user turn). The other scenarios call
the same entry point, ``agentloop._cli.main.main``, in-process with stdin replaced by a pipe-like
text stream: identical code paths, without paying the SDK's import time for every case.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fake_api import (
    overloaded,
    prompt_too_long,
    text_reply,
    tool_reply,
    unauthorized,
)
from support.cli import CLI, WINDOW, _compacted_session, check_notices, conversation_lines
from support.loop_scripts import (
    PREFIX_START,
    SUMMARY,
    compaction_requests,
    filler,
    first_text,
    opens_with_api_summary,
    request_text,
    unmarked,
)

from agentloop._adapters.records import from_record
from agentloop._core.compaction.on_demand import CARRIED_OPEN
from agentloop._core.values.validation import DEFAULT_MODEL

# -- the stdin-driven mode, through the console script ----------------------------------------


@pytest.mark.heavy
def test_console_script_long_run_compacts_with_notices(cli: CLI, workspace: Path) -> None:
    lines = conversation_lines(14)
    replies = [filler(f"answer {n}", 300) for n in range(len(lines))]
    for reply in replies:
        cli.script.add(text_reply(reply))
    # The server refuses prompts above the window: every request must fit after compaction.
    cli.fake_api.context_window = int(WINDOW)

    run = cli.subprocess("--context-window", WINDOW, stdin="\n".join(lines) + "\n")

    assert run.code == 0, run.err
    assert "Traceback" not in run.err
    # Replies on stdout, in order; notices only on stderr.
    assert run.out.splitlines() == replies
    assert "Conversation compacted" not in run.out
    assert len(run.notices) >= 2
    # The API counted every compacted context (count_tokens): "after" is no estimate. The
    # "before" figure holds a local estimate of what came after the last reply: it says so.
    assert all(not n["after"].startswith("~") for n in run.notices)
    assert all(n["before"].startswith("~") for n in run.notices)
    counted = [r for r in cli.fake_api.requests if r.path == "/v1/messages/count_tokens"]
    assert len(counted) >= len(run.notices)
    # Each line was one turn: the last request holds the last line.
    assert lines[-1] in request_text(cli.script.conversation[-1])
    with cli.store() as store:
        children = check_notices(run, store, workspace)
        sessions = store.list_sessions(workspace=str(workspace), limit=None)
        lineage = store.lineage(children[-1])
        assert [s.id for s in lineage[1:]] == children
        assert {s.id for s in sessions} == {s.id for s in lineage}
        assert lineage[-1].status == "active"
        assert store.newest_descendant(lineage[0].id).id == children[-1]
        # The parent keeps all its messages: everything ever said is in the lineage's root.
        root_text = "\n".join(
            block.get("text", "")
            for message in store.get_messages(lineage[0].id)
            for block in message.content
        )
        assert lines[0] in root_text and replies[0] in root_text


def test_console_script_survives_overloaded_api(cli: CLI, workspace: Path) -> None:
    cli.script.add(text_reply("first answer"))
    cli.script.add(overloaded(), overloaded(), overloaded())  # the SDK's 2 retries fail too
    cli.script.add(text_reply("third answer"))

    run = cli.subprocess(
        "--context-window", WINDOW, stdin="first question\nsecond question\nthird question\n"
    )

    assert "Traceback" not in run.err
    errors = run.error_lines()
    assert len(errors) == 1
    assert "overloaded" in errors[0] and "529" in errors[0]
    assert "is saved" in run.err
    assert run.out.splitlines() == ["first answer", "third answer"]
    assert run.code == 1  # the run had a failed turn
    assert len(cli.script.conversation) == 5
    with cli.store() as store:
        (session,) = store.list_sessions(workspace=str(workspace))
        messages = store.get_messages(session.id)  # 5.x replies begin with thinking
        texts = [next((b["text"] for b in m.content if "text" in b), None) for m in messages]
        assert texts[:3] == ["first question", "first answer", "second question"]
        assert texts[-2:] == ["third question", "third answer"]


def test_no_api_key_and_no_base_url_points_to_the_demo(cli: CLI) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    run = cli.subprocess("-p", "hello", env=env)
    assert run.code == 2
    assert len(run.err.splitlines()) == 1
    assert "ANTHROPIC_API_KEY" in run.err and "agentloop demo" in run.err
    assert cli.fake_api.requests == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--compaction-threshold", "1.5"], "greater than 0 and at most 1"),
        (["--compaction-threshold", "0"], "greater than 0 and at most 1"),
        (["--compaction-threshold", "abc"], "'abc'"),
        (["--context-window", "-5"], "positive number of tokens, not '-5'"),
        (["--context-window", "lots"], "positive number of tokens, not 'lots'"),
    ],
)
def test_invalid_values_are_one_line_errors(cli: CLI, args: list[str], says: str) -> None:
    run = cli.subprocess(*args, "-p", "hello")
    assert run.code == 2
    assert run.err.startswith(f"agentloop: error: argument {args[0]}: ")
    assert len(run.err.splitlines()) == 1
    assert says in run.err
    assert cli.fake_api.requests == []


# -- compaction on and off ----------------------------------------------------------------


def test_disable_compaction_never_compacts(cli: CLI, workspace: Path) -> None:
    lines = conversation_lines(10)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 300)))

    run = cli.run("--context-window", WINDOW, "--disable-compaction", stdin="\n".join(lines))

    assert run.code == 0, run.err
    assert run.notices == [] and "compact" not in run.err.lower()
    assert cli.script.summaries == []
    last = cli.script.conversation[-1]
    # Past the threshold (85% of 6,000) and sent whole: every message is still there.
    assert cli.fake_api.count_input_tokens(last) > 0.85 * int(WINDOW)
    assert len(last["messages"]) == 2 * len(lines) - 1
    with cli.store() as store:
        (session,) = store.list_sessions(workspace=str(workspace))
        assert session.parent_id is None and store.children(session.id) == []


def test_disable_compaction_prompt_too_long_names_compact(cli: CLI, workspace: Path) -> None:
    lines = conversation_lines(10)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 300)))
    first = cli.run("--context-window", WINDOW, "--disable-compaction", stdin="\n".join(lines))
    assert first.code == 0, first.err
    # The API's real window is smaller than this conversation: it answers "prompt is too long".
    cli.fake_api.context_window = 5000

    run = cli.run("--context-window", WINDOW, "--disable-compaction", "--continue", "-p", "more")

    assert run.code != 0
    assert "Traceback" not in run.err
    (error,) = run.error_lines()
    assert "prompt is too long" in error and "/compact" in error
    assert run.notices == [] and cli.script.summaries == []
    with cli.store() as store:
        (session,) = store.list_sessions(workspace=str(workspace))
        assert store.children(session.id) == []
        assert store.lineage(session.id) == [session]


@pytest.mark.parametrize("api_writes", [True, False], ids=["api-summary", "own-summary"])
def test_compact_with_instructions_reaches_the_summarizer(
    cli: CLI, workspace: Path, api_writes: bool
) -> None:
    if not api_writes:
        cli.fake_api.models_without_compaction.add(DEFAULT_MODEL)
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    cli.script.add(text_reply("after compaction"))
    stdin = "\n".join(
        [*conversation_lines(4, 200), "/compact keep the decisions about calc.py", "what now?"]
    )

    run = cli.run("--context-window", WINDOW, stdin=stdin)

    assert run.code == 0, run.err
    assert len(run.notices) == 1
    # The /compact request carries the instructions; a summary prepared in the background
    # before it (without them) is not what the compaction used.
    asked = "Instructions for this summary:\nkeep the decisions about calc.py"
    after = cli.script.conversation[-1]
    if api_writes:
        summaries = compaction_requests(cli.fake_api.message_requests)
        assert summaries and cli.script.summaries == []
        assert asked in summaries[-1]["compaction"]["instructions"]
        assert all(asked not in body["compaction"]["instructions"] for body in summaries[:-1])
        assert opens_with_api_summary(after)
    else:
        assert cli.script.summaries
        assert compaction_requests(cli.fake_api.message_requests) == []
        assert asked in request_text(cli.script.summaries[-1])
        assert all(asked not in request_text(body) for body in cli.script.summaries[:-1])
        assert first_text(after).startswith(PREFIX_START) and SUMMARY in first_text(after)
    assert run.out.splitlines()[-1] == "after compaction"
    with cli.store() as store:
        check_notices(run, store, workspace)


def test_compact_works_with_compaction_disabled(cli: CLI, workspace: Path) -> None:
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    stdin = "\n".join([*conversation_lines(4, 200), "/compact", "go on"])

    run = cli.run("--context-window", WINDOW, "--disable-compaction", stdin=stdin)

    assert run.code == 0, run.err
    assert len(run.notices) == 1
    assert opens_with_api_summary(cli.script.conversation[-1])
    with cli.store() as store:
        check_notices(run, store, workspace)


def test_emergency_compaction_through_the_cli(cli: CLI, workspace: Path) -> None:
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    cli.script.add(prompt_too_long(), text_reply("made it"))

    run = cli.run("--context-window", WINDOW, stdin="\n".join(conversation_lines(5, 200)))

    assert run.code == 0, run.err
    assert run.out.splitlines()[-1] == "made it"
    assert len(run.notices) == 1
    assert run.error_lines() == []
    with cli.store() as store:
        (child,) = check_notices(run, store, workspace)
        (entry,) = store.compaction_history(child)
        assert entry.strategy.endswith("(emergency)")


# -- resuming ---------------------------------------------------------------------------------


def test_resume_of_a_compacted_parent_continues_at_the_newest_child(cli: CLI) -> None:
    parent, child = _compacted_session(cli)
    with cli.store() as store:
        parent_before = store.get_session(parent).message_count
        child_before = store.get_session(child).message_count
    cli.script.add(text_reply("resumed"))

    run = cli.run("--context-window", WINDOW, "--resume", parent[:8], "-p", "where were we?")

    assert run.code == 0, run.err
    assert run.out.strip() == "resumed"
    assert f"Resuming session {child[:8]}" in run.err
    request = cli.script.conversation[-1]
    assert opens_with_api_summary(request)
    # The new message, then what /compact carried and kept waiting across the exit.
    asked, carried = request["messages"][-2:]
    assert asked["content"][0]["text"] == "where were we?"
    assert carried["role"] == "system" and CARRIED_OPEN in carried["content"][0]["text"]
    with cli.store() as store:
        assert store.get_session(parent).message_count == parent_before
        assert store.get_session(child).message_count == child_before + 3
        stored = store.get_messages(child)
        # As sent (the system message is stored as a user record marked so).
        sent = [from_record(m).to_param() for m in stored[:-1]]
        assert sent == unmarked(request["messages"])
        # 5.x replies begin with thinking: the reply's text block.
        assert [b["text"] for b in stored[-1].content if b["type"] == "text"] == ["resumed"]


def test_resume_without_an_id_takes_the_latest_here(cli: CLI) -> None:
    _, child = _compacted_session(cli)
    cli.script.add(text_reply("latest"))
    run = cli.run("--context-window", WINDOW, "--resume", "-p", "hi")
    assert run.code == 0, run.err
    assert f"Resuming session {child[:8]}" in run.err


@pytest.mark.parametrize("ref", ["zzzzzzzz", "!!bad!!", "ab"])
def test_resume_unknown_or_malformed_id_is_a_one_line_error(cli: CLI, ref: str) -> None:
    run = cli.run("--context-window", WINDOW, "--resume", ref, "-p", "hi")
    assert run.code == 2
    assert "Traceback" not in run.err
    assert len(run.err.splitlines()) == 1 and run.err.startswith("agentloop: error: ")
    assert cli.script.conversation == []


def test_continue_picks_the_latest_session_of_this_workspace(
    cli: CLI, workspace: Path, tmp_path: Path
) -> None:
    cli.script.add(text_reply("one"), text_reply("two"), text_reply("elsewhere"))
    assert cli.run("--context-window", WINDOW, "-p", "first session").code == 0
    assert cli.run("--context-window", WINDOW, "-p", "second session").code == 0
    other = tmp_path / "other"
    other.mkdir()
    # The most recent session overall is in another workspace.
    assert cli.run("--context-window", WINDOW, "-p", "other place", cwd=other).code == 0
    cli.script.add(text_reply("continued"))

    run = cli.run("--context-window", WINDOW, "--continue", "-p", "and then?")

    assert run.code == 0, run.err
    request = cli.script.conversation[-1]
    # 5.x replies begin with thinking: the first text block of each message.
    assert [next(b["text"] for b in m["content"] if "text" in b) for m in request["messages"]] == [
        "second session",
        "two",
        "and then?",
    ]
    with cli.store() as store:
        sessions = store.list_sessions(workspace=str(workspace))
        assert len(sessions) == 2
        assert sessions[0].message_count == 4
        assert store.get_messages(sessions[0].id)[0].content[0]["text"] == "second session"


def test_continue_goes_to_the_newest_descendant_of_the_latest_session(cli: CLI) -> None:
    parent, child = _compacted_session(cli)
    with cli.store() as store:
        # The parent is touched after the compaction (a rename): it is now the most recently
        # updated session here, but the conversation goes on in its child.
        store.update_session(parent, title="renamed later")
        assert store.list_sessions(workspace=str(cli.workspace), limit=1)[0].id == parent
        child_before = store.get_session(child).message_count
    cli.script.add(text_reply("continued in the child"))

    run = cli.run("--context-window", WINDOW, "--continue", "-p", "go on")

    assert run.code == 0, run.err
    assert opens_with_api_summary(cli.script.conversation[-1])
    with cli.store() as store:  # the message, what /compact carried, the reply
        assert store.get_session(child).message_count == child_before + 3


def test_continue_with_no_session_here_is_an_error(cli: CLI) -> None:
    run = cli.run("--context-window", WINDOW, "--continue", "-p", "hi")
    assert run.code == 2
    assert run.err.startswith("agentloop: error: no session to continue")
    assert len(run.err.splitlines()) == 1


# -- tools through the agent ----------------------------------------------------------------


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def test_path_escapes_are_refused(cli: CLI, workspace: Path) -> None:
    secret = "TOP-SECRET-4242"
    (workspace.parent / "outside.txt").write_text(secret + "\n")
    cli.script.add(
        tool_reply(
            ("read_file", {"path": "../outside.txt"}),
            ("read_file", {"path": str(workspace.parent / "outside.txt")}),
            ("write_file", {"path": "../planted.txt", "content": "x"}),
        ),
        text_reply("could not read it"),
    )

    run = cli.run("--context-window", WINDOW, "--yes", "-p", "read ../outside.txt")

    assert run.code == 0, run.err
    results = _tool_results(cli.script.conversation[-1])
    assert len(results) == 3
    for result in results:
        assert result.get("is_error") is True
        assert "outside the workspace" in str(result["content"])
    assert all(secret not in request_text(body) for body in cli.fake_api.message_requests)
    assert secret not in str(cli.fake_api.message_requests)
    assert not (workspace.parent / "planted.txt").exists()


def test_shell_commands_need_consent_without_a_terminal(cli: CLI, workspace: Path) -> None:
    cli.script.add(
        tool_reply(("run_command", {"command": "touch created.txt"})), text_reply("refused")
    )

    run = cli.run("--context-window", WINDOW, "-p", "create a file")

    assert run.code == 0, run.err
    (result,) = _tool_results(cli.script.conversation[-1])
    assert result.get("is_error") is True
    assert "--yes" in str(result["content"])
    assert not (workspace / "created.txt").exists()


def test_shell_commands_run_with_yes(cli: CLI, workspace: Path) -> None:
    cli.script.add(
        tool_reply(("run_command", {"command": "touch created.txt && echo made"})),
        text_reply("created"),
    )

    run = cli.run("--context-window", WINDOW, "--yes", "-p", "create a file")

    assert run.code == 0, run.err
    (result,) = _tool_results(cli.script.conversation[-1])
    assert not result.get("is_error")
    assert "made" in str(result["content"])
    assert (workspace / "created.txt").exists()


# -- API errors ----------------------------------------------------------------------------


def test_unauthorized_is_a_clear_message(cli: CLI) -> None:
    cli.script.add(unauthorized())
    run = cli.run("--context-window", WINDOW, "-p", "hi")
    assert run.code == 1
    assert "Traceback" not in run.err
    (error,) = run.error_lines()
    assert "authentication failed" in error and "ANTHROPIC_API_KEY" in error
