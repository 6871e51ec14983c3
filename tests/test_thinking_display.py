"""The model's notes on the terminal (summarized thinking, dimmed and collapsed between tool
calls), ``--effort`` on the command line, and drop_block kept across a restart of the agent."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fake_api import text_reply
from support.agents import coding_agent
from support.cli import CLI

from agentloop._cli.main import agent_options, build_parser
from agentloop._cli.ui import THINKING_WIDTH, TerminalUI, thinking_lines
from agentloop._core.values.messages import Usage
from agentloop._core.values.model import ModelResponse
from agentloop._errors import ThinkingBindingError
from agentloop.testing import Reply, ScriptedModel
from sessions import SqliteSessionStore


def _ui(*, tty: bool = False) -> tuple[TerminalUI, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return TerminalUI(out, err, tty=tty), out, err


def test_thinking_lines_collapse_to_two() -> None:
    assert thinking_lines("") == [] and thinking_lines("\n \n") == []
    assert thinking_lines("Reading the file.") == ["  ✻ Reading the file."]
    two = thinking_lines("First   step.\n\nSecond step.\nThird step.")
    assert two == ["  ✻ First step.", "    Second step.…"]
    long = thinking_lines("x" * 300)
    assert len(long) == 1 and long[0].endswith("…") and len(long[0]) <= THINKING_WIDTH + 6


def test_notes_are_shown_before_the_tool_line_and_dimmed_on_a_terminal() -> None:
    ui, out, err = _ui(tty=True)
    for delta in ("I will read ", "a.py first.", "\n", "Then b.py."):
        ui.on_thinking(delta)
    assert err.getvalue() == ""  # gathered, not shown piecemeal
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}
    ui.on_reply(ModelResponse(content=(call,), usage=Usage()))
    ui.on_tool_call("read_file", {"path": "a.py"})
    shown = err.getvalue()
    assert "\033[2m  ✻ I will read a.py first.\033[0m" in shown
    assert shown.index("I will read") < shown.index("⏺ read_file")
    assert out.getvalue() == ""


def test_reasoning_before_an_answer_and_a_withdrawn_reply_show_nothing() -> None:
    ui, out, err = _ui()
    ui.on_thinking("Thinking it over.")
    ui.on_text("The answer.")
    ui.on_reply(ModelResponse(content=({"type": "text", "text": "The answer."},), usage=Usage()))
    assert err.getvalue() == "" and out.getvalue() == "The answer.\n"
    ui.on_thinking("Half a thought")
    ui.on_reply_incomplete("the stream broke")
    assert "Half a thought" not in err.getvalue()


def test_print_mode_shows_no_notes() -> None:
    out, err = io.StringIO(), io.StringIO()
    ui = TerminalUI(out, err, tty=False, stream=False)
    ui.on_thinking("hidden")
    ui.on_tool_call("read_file", {"path": "a.py"})
    assert "hidden" not in err.getvalue()


def test_effort_option() -> None:
    parser = build_parser()
    assert agent_options(parser.parse_args(["--effort", "xhigh"])).effort == "xhigh"
    assert agent_options(parser.parse_args([])).effort is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--effort", "extreme"])


def test_drop_block_survives_a_restart_of_the_agent(tmp_path: Path) -> None:
    error = ThinkingBindingError("the API refused a thinking block sent back (400): bound")
    model = ScriptedModel([Reply(error=error), "after the retry", "resumed"])
    store = SqliteSessionStore(tmp_path / "s.db")
    agent = coding_agent(store, tmp_path, model)
    with pytest.warns(UserWarning, match="drop_block"):  # the user is told
        agent.run_turn("hello")
    assert agent.loop.thinking.drop_block
    resumed = coding_agent(store, tmp_path, model, resume=agent.session_id)
    assert resumed.loop.thinking.drop_block and resumed.loop.thinking.binding_retries == 1
    resumed.run_turn("again")
    last = model.requests[-1]
    assert last.thinking is not None and last.thinking.drop_block
    store.close()


def test_the_command_line_sends_effort_and_room_to_think(cli: CLI) -> None:
    cli.script.add(text_reply("done"))
    run = cli.run("--effort", "high", "--context-window", "100000", stdin="hello\n")
    assert run.code == 0, run.err
    (body,) = [b for b in cli.fake_api.message_requests if "compaction" not in b]
    assert body["output_config"] == {"effort": "high"}
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    # The reply reserve (15 % of the window) stays the trigger's; max_tokens leaves room.
    assert 15_000 < body["max_tokens"] <= 100_000 - cli.fake_api.count_input_tokens(body)
    assert cli.fake_api.violations == []
