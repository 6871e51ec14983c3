"""Command-line conventions: ``-p`` with its output formats and piped context, a positional first
message, ``--version``/``--help``, slash-command suggestions, refused settings, where a run
starts (``--continue``/``--resume``), what a failed run leaves behind, and ``--store``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_api import text_reply, tool_reply, unauthorized
from support.cli import CLI, WINDOW, _compacted_session
from support.loop_scripts import filler

from sessions import open_store, workspace_key

REPO = Path(__file__).resolve().parents[1]


def last_user_text(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    content = messages[-1]["content"]
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


# -- -p and its output formats ---------------------------------------------------------------


def test_print_mode_prints_only_the_final_answer(cli: CLI) -> None:
    cli.script.add(
        tool_reply(("list_files", {}), text="Let me look around first."), text_reply("Final.")
    )
    run = cli.run("--context-window", WINDOW, "-p", "what is here?")
    assert run.code == 0, run.err
    assert run.out == "Final.\n"
    assert "list_files" in run.err  # tool activity stays on stderr


def test_print_mode_json_has_text_session_usage_and_compactions(cli: CLI) -> None:
    cli.script.add(tool_reply(("list_files", {})), text_reply("Done."))
    run = cli.run("--context-window", WINDOW, "-p", "--output-format", "json", "list")
    assert run.code == 0, run.err
    result = json.loads(run.out)
    assert result["type"] == "result" and result["is_error"] is False
    assert result["text"] == "Done."
    assert result["tool_calls"] == 1
    assert result["compactions"] == []
    usage = result["usage"]
    # The fake API caches prompts: the input may all be cache writes and reads.
    sent = sum(usage.get(key, 0) for key in ("input_tokens", *_CACHE_KEYS))
    assert usage["output_tokens"] > 0 and sent > 0
    with cli.store() as store:
        session = store.get_session(result["session_id"])
        assert session.message_count == 4


_CACHE_KEYS = ("cache_creation_input_tokens", "cache_read_input_tokens")


def test_print_mode_json_reports_compactions(cli: CLI) -> None:
    lines = [filler(f"request {n}", 300) for n in range(10)]
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 300)))
    seeded = cli.run("--context-window", WINDOW, "--disable-compaction", stdin="\n".join(lines))
    assert seeded.code == 0, seeded.err
    with cli.store() as store:
        (before,) = store.list_sessions(limit=None)
    cli.script.add(text_reply("after compaction"))
    # Past the threshold: this turn compacts before its request is sent.
    run = cli.run("--context-window", WINDOW, "-c", "-p", "--output-format", "json", "more")
    assert run.code == 0, run.err
    result = json.loads(run.out)
    assert result["text"] == "after compaction"
    (compaction,) = result["compactions"]
    assert compaction["from_session_id"] == before.id
    assert compaction["session_id"] == result["session_id"] != before.id
    assert compaction["messages_before"] == 21
    assert compaction["tokens_after"] < compaction["tokens_before"]


def test_print_mode_stream_json_is_one_event_per_line(cli: CLI) -> None:
    cli.script.add(tool_reply(("list_files", {})), text_reply("Streamed answer."))
    run = cli.run("--context-window", WINDOW, "-p", "--output-format", "stream-json", "go")
    assert run.code == 0, run.err
    events = [json.loads(line) for line in run.out.splitlines()]
    kinds = [event["type"] for event in events]
    assert kinds[0] == "start" and kinds[-1] == "result"
    assert "tool_call" in kinds and "tool_result" in kinds
    streamed = "".join(event["text"] for event in events if event["type"] == "text")
    assert streamed.endswith("Streamed answer.")
    assert events[-1]["text"] == "Streamed answer."


def test_piped_stdin_is_context_for_the_prompt(cli: CLI) -> None:
    cli.script.add(text_reply("Looks fine."))
    diff = "diff --git a/x b/x\n+print('hi')\n"
    run = cli.run("--context-window", WINDOW, "-p", "review this", stdin=diff)
    assert run.code == 0, run.err
    sent = last_user_text(cli.script.conversation[-1])
    assert sent.startswith("review this\n\n<stdin>\n")
    assert "diff --git a/x b/x\n+print('hi')\n</stdin>" in sent


def test_piped_stdin_alone_is_the_prompt(cli: CLI) -> None:
    cli.script.add(text_reply("42"))
    run = cli.run("--context-window", WINDOW, "-p", stdin="what is six times seven?\n")
    assert run.code == 0, run.err
    assert last_user_text(cli.script.conversation[-1]) == "what is six times seven?"
    assert run.out == "42\n"


def test_print_mode_without_any_prompt_is_an_error(cli: CLI) -> None:
    run = cli.run("-p", stdin="")
    assert run.code == 2
    assert run.err == "agentloop: error: -p needs a prompt: an argument, or text piped to stdin\n"


def test_output_format_needs_print_mode(cli: CLI) -> None:
    run = cli.run("--output-format", "json", stdin="")
    assert run.code == 2 and "needs -p" in run.err
    assert cli.fake_api.requests == []


def test_a_positional_prompt_is_the_first_message(cli: CLI) -> None:
    cli.script.add(text_reply("one"), text_reply("two"))
    run = cli.run("--context-window", WINDOW, "fix the tests", stdin="and then this\n")
    assert run.code == 0, run.err
    texts = [last_user_text(body) for body in cli.script.conversation]
    assert texts == ["fix the tests", "and then this"]
    assert run.out.splitlines() == ["one", "two"]


def test_short_options(cli: CLI) -> None:
    cli.script.add(text_reply("first"), text_reply("second"))
    assert cli.run("--context-window", WINDOW, "-m", "claude-haiku-4-5", "-p", "hi").code == 0
    assert cli.script.conversation[-1]["model"] == "claude-haiku-4-5"
    run = cli.run("--context-window", WINDOW, "-m", "claude-haiku-4-5", "-c", "-p", "more")
    assert run.code == 0, run.err
    assert len(cli.script.conversation[-1]["messages"]) == 3


# -- --version, --help, slash commands, refused settings --------------------------------------


def test_version(cli: CLI) -> None:
    run = cli.run("--version")
    assert run.code == 0
    assert run.out.startswith("agentloop ") and run.out.count("\n") == 1


def test_help_lists_environment_and_slash_commands_without_the_sdk() -> None:
    code = (
        "import sys\n"
        "from agentloop._cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('anthropic', 'httpx', 'httpx2', 'pydantic', 'tiktoken', 'prompt_toolkit'))\n"
        "print('HEAVY', heavy)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    for needle in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "AGENTLOOP_STORE",
        "AGENTLOOP_HOME",
        "/compact",
        "/context",
        "/quit",
        "--output-format",
        "--continue",
        "sessions",
    ):
        assert needle in done.stdout, needle
    assert "HEAVY []" in done.stdout


def test_unknown_slash_command_suggests_the_closest(cli: CLI) -> None:
    run = cli.run("--context-window", WINDOW, stdin="/contxt\n/qiut\n")
    assert run.code == 0
    assert "unknown command /contxt; did you mean /context?" in run.err
    assert "unknown command /qiut; did you mean /quit?" in run.err
    assert cli.fake_api.message_requests == []


def test_a_path_is_a_message_not_a_command(cli: CLI) -> None:
    cli.script.add(text_reply("noted"))
    run = cli.run("--context-window", WINDOW, stdin="/usr/bin/env is broken\n")
    assert run.code == 0, run.err
    assert last_user_text(cli.script.conversation[-1]) == "/usr/bin/env is broken"


def test_a_window_smaller_than_the_system_prompt_and_tools_is_refused(cli: CLI) -> None:
    run = cli.run("--context-window", "1", "-p", "hi")
    assert run.code == 2
    assert len(run.err.splitlines()) == 1
    assert "too small" in run.err and "system prompt and tool definitions" in run.err
    assert cli.fake_api.message_requests == []


# -- where a run starts ----------------------------------------------------------------------


def test_resume_with_an_empty_id_is_an_error(cli: CLI) -> None:
    cli.script.add(text_reply("one"))
    assert cli.run("--context-window", WINDOW, "-p", "first").code == 0
    run = cli.run("--context-window", WINDOW, "--resume", "", "-p", "hi")
    assert run.code == 2
    assert run.err.startswith("agentloop: error: invalid session id ''")
    assert len(cli.script.conversation) == 1


def test_continue_skips_a_session_without_messages(cli: CLI, workspace: Path) -> None:
    cli.script.add(text_reply("real answer"), text_reply("continued"))
    assert cli.run("--context-window", WINDOW, "-p", "the real conversation").code == 0
    with cli.store() as store:
        store.create_session(model="claude-sonnet-5-5", workspace=workspace_key(workspace))
    run = cli.run("--context-window", WINDOW, "-c", "-p", "go on")
    assert run.code == 0, run.err
    sent = cli.script.conversation[-1]["messages"]
    texts = [next(b["text"] for b in m["content"] if "text" in b) for m in sent]
    assert texts == ["the real conversation", "real answer", "go on"]


def test_resume_orients_the_user(cli: CLI, tmp_path: Path) -> None:
    parent, child = _compacted_session(cli)
    cli.script.add(text_reply("resumed"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = cli.run("--context-window", WINDOW, "--resume", parent[:8], "-p", "hi", cwd=elsewhere)
    assert run.code == 0, run.err
    lines = run.err.splitlines()
    assert lines[0].startswith(f"Resuming session {child[:8]} (")
    assert (
        f"{parent[:8]} was compacted; continuing at its newest descendant (1 generation later)"
        in lines[0]
    )
    assert any(line.startswith("  you: ") for line in lines)
    assert any(line.startswith("  agentloop: answer 3") for line in lines)
    assert any(line.startswith("context ") and "compacts at" in line for line in lines)
    assert any(
        line.startswith(f"warning: this session ran in {cli.workspace}; tools now work in")
        for line in lines
    )


# -- what a run leaves behind ----------------------------------------------------------------


def test_a_failed_print_run_leaves_no_session(cli: CLI) -> None:
    cli.script.add(unauthorized())
    run = cli.run("--context-window", WINDOW, "-p", "hi")
    assert run.code == 1
    (error,) = run.error_lines()
    assert "authentication failed" in error
    assert "saved" not in run.err and "continue" not in run.err
    with cli.store() as store:
        assert store.list_sessions(limit=None) == []


def test_a_failed_turn_of_a_resumed_session_says_it_is_saved(cli: CLI) -> None:
    cli.script.add(text_reply("first"), unauthorized())
    assert cli.run("--context-window", WINDOW, "-p", "hello").code == 0
    run = cli.run("--context-window", WINDOW, "-c", "-p", "again")
    assert run.code == 1
    assert "is saved; continue with `agentloop --resume" in run.err


@pytest.mark.heavy
def test_non_utf8_stdin_is_carried_with_replacement(cli: CLI, workspace: Path) -> None:
    cli.script.add(text_reply("one"), text_reply("two"), text_reply("three"))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "--context-window", WINDOW],
        input=b"Turn 1\nTurn 2: caf\xe9\nTurn 3\n",
        capture_output=True,
        cwd=workspace,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    texts = [last_user_text(body) for body in cli.script.conversation]
    assert texts == ["Turn 1", "Turn 2: caf\ufffd", "Turn 3"]
    with cli.store() as store:
        (session,) = store.list_sessions(limit=None)
        stored = [m.content[0].get("text") for m in store.get_messages(session.id)]
        assert stored[2] == "Turn 2: caf\ufffd"


def test_store_option_and_environment_choose_the_store(cli: CLI, tmp_path: Path) -> None:
    cli.script.add(text_reply("in the option's store"), text_reply("in the variable's store"))
    chosen = tmp_path / "chosen.db"
    assert cli.run("--context-window", WINDOW, "--store", str(chosen), "-p", "a").code == 0
    cli.monkeypatch.setenv("AGENTLOOP_STORE", str(tmp_path / "env.db"))
    assert cli.run("--context-window", WINDOW, "-p", "b").code == 0
    with open_store(chosen) as store:
        assert [s.title for s in store.list_sessions(limit=None)] == ["a"]
    with open_store(tmp_path / "env.db") as store:
        assert [s.title for s in store.list_sessions(limit=None)] == ["b"]
    cli.monkeypatch.delenv("AGENTLOOP_STORE")
    with cli.store() as store:
        assert store.list_sessions(limit=None) == []


def test_a_session_in_use_is_refused_with_one_line(cli: CLI, workspace: Path) -> None:
    cli.script.add(text_reply("first"))
    assert cli.run("--context-window", WINDOW, "-p", "hello").code == 0
    with cli.store() as store:
        (session,) = store.list_sessions(limit=None)
        lease = store.acquire_lease(session.id, owner="pid 1 on elsewhere", ttl=60)
        run = cli.run("--context-window", WINDOW, "-c", "-p", "again")
        store.release_lease(lease)
    assert run.code == 2
    assert len(run.err.splitlines()) == 1
    assert "in use by another agentloop process (pid 1 on elsewhere)" in run.err
    assert len(cli.script.conversation) == 1
