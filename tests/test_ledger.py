"""The artifact ledger: derived from the tool calls, merged across compactions,
byte-stable, within a budget, in every compacted context; and read_file's "unchanged since you
read it" instead of sending a file again."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.agents import coding_agent
from transcripts import CORPUS
from transcripts.recorded import calculator_session

from agentloop import (
    CompactionSettings,
    ConversationCompacter,
    Message,
    as_messages,
    default_tool_facts,
)
from agentloop._agent.files import ReadFileTool
from agentloop._agent.workspace import Workspace
from agentloop._core.facts import ledger
from agentloop._core.facts.ledger import Ledger, find_ledger, parse, render, shorten_request
from agentloop._core.facts.ledger_fit import within
from agentloop.testing import ScriptedModel, text_reply, tool_call, tool_reply
from sessions import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def derive(messages: list[Message], start: Ledger | None = None) -> Ledger:
    """The ledger as a compaction derives it: the shipped recognizers read each call."""
    return ledger.derive(messages, start, facts=default_tool_facts())


def use(call_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def result(call_id: str, text: str, *, error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    return {**block, "is_error": True} if error else block


def turn(
    call_id: str, name: str, text: str, *, error: bool = False, **tool_input: Any
) -> list[Message]:
    return [
        Message.assistant([use(call_id, name, **tool_input)]),
        Message.user([result(call_id, text, error=error)]),
    ]


TODOS_OPEN = [
    {"content": "write the parser", "status": "in_progress"},
    {"content": "run the tests", "status": "pending"},
]
TODOS_DONE = [
    {"content": "write the parser", "status": "completed"},
    {"content": "run the tests", "status": "in_progress"},
]
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "app/main.py", line 3, in <module>\n'
    "    run()\n"
    '  File "app/parse.py", line 41, in parse_header\n'
    "    raise ValueError(name)\n"
    "ValueError: header 'X-Id' is missing\n"
    "[exit code 1]"
)
PYTEST_FAIL = "F.\nFAILED tests/test_parse.py::test_header - assert 3 == 4\n1 failed\n[exit code 1]"


def history() -> list[Message]:
    msgs = [Message.user("Parse the headers; keep the limit at 250 lines and never drop X-Id.")]
    msgs += turn("t1", "todo_write", "## Todo list", todos=TODOS_OPEN)
    msgs += turn("r1", "read_file", "     1\timport os", path="app/parse.py")
    msgs += turn("r2", "read_file", "     1\tdef run(): ...", path="app/main.py")
    msgs += turn("r3", "read_file", "     9\tx", path="app/big.py", offset=9, limit=1)
    msgs += turn("e1", "edit_file", "Edited app/parse.py: replaced 1", path="app/parse.py")
    msgs += turn("w1", "write_file", "Wrote 10 bytes to app/new.py (new file).", path="app/new.py")
    msgs += turn("c1", "run_command", TRACEBACK, error=True, command="python app/main.py")
    msgs += turn("c2", "run_command", PYTEST_FAIL, error=True, command="pytest -q")
    msgs += turn("c3", "run_command", "sleeping\n[timed out after 5 s: killed]", error=True,
                 command="sleep 100")  # fmt: skip
    msgs += turn("c4", "run_command", "the user declined to run: rm -rf x", error=True,
                 command="rm -rf x")  # fmt: skip
    msgs += turn("t2", "todo_write", "## Todo list", todos=TODOS_DONE)
    msgs.append(Message.assistant("Working on it."))
    msgs.append(Message.user("also: the timeout must stay at 30 s"))
    return msgs


# -- derived from the tool calls ------------------------------------------------------------


def test_the_ledger_is_derived_from_the_tool_calls_and_results() -> None:
    ledger = derive(history())
    files = {f.path: f for f in ledger.files}
    assert files["app/parse.py"].state == "changed since read"  # read, then edited
    assert files["app/main.py"].state == "unchanged since read"
    assert files["app/big.py"].state == "partly read"
    assert files["app/new.py"].created and files["app/new.py"].state == "unchanged since written"
    assert ledger.files[0].path == "app/new.py"  # newest first
    outcomes = {c.command: c.outcome for c in ledger.commands}
    assert outcomes == {
        "python app/main.py": "exit 1",
        "pytest -q": "exit 1",
        "sleep 100": "timed out",
        "rm -rf x": "not run",
    }
    assert 'File "app/parse.py", line 41, in parse_header' in ledger.errors
    assert "ValueError: header 'X-Id' is missing" in ledger.errors
    assert ledger.failing == ("tests/test_parse.py::test_header",)
    assert ledger.todos == (("completed", "write the parser"), ("in_progress", "run the tests"))
    assert ledger.requests == (
        "Parse the headers; keep the limit at 250 lines and never drop X-Id.",
        "also: the timeout must stay at 30 s",
    )
    text = render(ledger)
    assert "- exit 1: python app/main.py" in text
    assert "- [x] write the parser" in text and "- [ ] (in progress) run the tests" in text


def test_a_passing_run_clears_the_failing_tests_and_the_latest_outcome_shows() -> None:
    msgs = history()
    msgs += turn("c5", "run_command", "..\n2 passed\n[exit code 0]", command="pytest -q")
    ledger = derive(msgs)
    assert ledger.failing == ()
    [pytest_run] = [c for c in ledger.commands if c.command == "pytest -q"]
    assert pytest_run.outcome == "exit 0"
    assert ledger.commands[-1] is pytest_run  # newest last


def test_a_long_request_keeps_its_head_and_a_search_for_the_rest() -> None:
    request = "CI log from last night " + "line of log\n" * 500
    shown = shorten_request(request)
    assert shown.startswith("CI log from last night line of log")
    assert 'more characters: search_history "log last night line"]'  # no stop words in shown
    assert len(shown) < 500
    assert shorten_request(shown) == shown  # shortened once, never again


# -- byte-stable, read back, merged ---------------------------------------------------------


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(CORPUS)), seed=st.integers(0, 1000), size=st.integers(30, 160))
def test_render_is_byte_stable_and_reads_back(name: str, seed: int, size: int) -> None:
    msgs = as_messages(CORPUS[name](seed, size).messages)
    ledger = derive(msgs)
    text = render(ledger)
    assert render(derive(msgs)) == text  # same facts, same bytes
    back = parse(f"<preserved-state>\n{text}\n</preserved-state>")
    assert back is not None and render(back) == text
    # Replaying the history over its own ledger changes nothing (what a merge does).
    assert render(derive(msgs, back)) == text


def test_a_ledger_carried_in_a_system_message_is_merged() -> None:
    """The API's own compaction keeps turns verbatim: the ledger then travels in a message
    appended after them; the next compaction reads it back from there."""
    earlier = derive(history())
    block = {"type": "compaction", "content": "summary", "signature": "sig"}
    later = [
        Message.assistant([block]),
        Message.user("go on"),
        Message.system(render(earlier)),
        *turn("n1", "read_file", "     1\tnew", path="app/other.py"),
    ]
    merged = derive(later)
    paths = [f.path for f in merged.files]
    assert paths[0] == "app/other.py" and "app/main.py" in paths
    assert merged.todos == earlier.todos
    assert merged.requests == (*earlier.requests, "go on")


def test_a_file_read_three_compactions_ago_is_still_listed_and_nothing_is_stale() -> None:
    transcript = calculator_session(3, 160)
    original = as_messages(transcript.messages)
    compacter = ConversationCompacter(
        model_name="claude-sonnet-4-6",
        context_window=200_000,
        settings=CompactionSettings(strategy="summarize"),
    )
    first_read = next(
        i for i, m in enumerate(original) for b in m.content if b.get("name") == "read_file"
    )
    context: list[Message] = []
    done = 0
    cuts = [len(original) * k // 6 for k in range(1, 6)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cut in cuts:
            while original[cut - 1].role != "user" or original[cut].role != "assistant":
                cut += 1
            context += original[done:cut]
            done = cut
            transition = compacter.compact_and_transition("s", context, force=True)
            assert transition is not None
            context = list(transition.compacted_messages)
    ledger = find_ledger(context)
    assert ledger is not None
    assert first_read < cuts[1]  # read before the second compaction: summarized 4 times since
    assert "calc.py" in [f.path for f in ledger.files]
    # The ledger holds every fact of what was summarized, in its latest state, and repeats
    # nothing of the kept tail it did not already list; no run is counted twice.
    tail_start = done - (len(context) - 1)
    truth, head = derive(original[:done], Ledger()), derive(original[:tail_start], Ledger())
    files, truth_files = {f.path: f for f in ledger.files}, {f.path: f for f in truth.files}
    assert {f.path for f in head.files} <= set(files)
    assert all(files[path].state == truth_files[path].state for path in files)
    commands = {c.command: c for c in ledger.commands}
    truth_commands = {c.command: c for c in truth.commands}
    assert {c.command for c in head.commands} <= set(commands)
    for command, fact in commands.items():
        assert fact.outcome == truth_commands[command].outcome
        assert fact.runs <= truth_commands[command].runs
    assert ledger.todos == truth.todos
    # Only one ledger in the context: each compaction replaces the last one.
    text = "\n".join(str(b.get("text", "")) for m in context for b in m.content)
    assert text.count("<ledger>") == 1


def test_the_budget_cuts_old_errors_and_commands_first_and_never_written_files() -> None:
    msgs = [Message.user("go")]
    for n in range(60):
        msgs += turn(f"c{n}", "run_command", f"RuntimeError: failure number {n}\n[exit code 1]",
                     error=True, command=f"make step{n}")  # fmt: skip
    for n in range(30):
        msgs += turn(f"w{n}", "write_file", "Wrote 1 bytes (new file).", path=f"src/m{n}.py")
    msgs += turn("t", "todo_write", "ok", todos=TODOS_OPEN)
    full = derive(msgs)
    cut = within(full, 900)
    text = render(cut)
    assert len(text) // 3 + 1 <= 900
    assert all(f"src/m{n}.py" in text for n in range(30))
    assert "- [ ] (in progress) write the parser" in text
    assert "RuntimeError: failure number 59" in text  # the newest stay
    assert "RuntimeError: failure number 0" not in text
    assert cut.omitted["Errors"] > cut.omitted.get("Commands", 0) >= 0
    assert "older left out: search_history" in text
    assert render(parse(text) or Ledger()) == text  # the counts read back too


def test_the_agent_carries_the_ledger_instead_of_recent_tools(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    store = open_store(tmp_path / "s.db")
    model = ScriptedModel(
        [
            tool_reply(tool_call("read_file", {"path": "notes.txt"})),
            text_reply("read it"),
            *[text_reply(f"answer {n} " + "words " * 300) for n in range(3)],
        ]
    )
    agent = coding_agent(store, ws, model)
    agent.run_turn("read notes.txt and keep the port at 8080")
    for n in range(3):
        agent.run_turn(f"question {n} " + "more " * 300)
    outcome = agent.compact()
    assert outcome is not None and outcome.transition is not None
    prefix = outcome.transition.compacted_messages[0]
    state = "\n".join(str(b.get("text", "")) for b in prefix.content)
    assert "- read · unchanged since read: notes.txt" in state
    assert "read notes.txt and keep the port at 8080" in state
    assert "tool calls (oldest first)" not in state  # the old recent-tools section is gone
    store.close()


# -- read_file: unchanged since you read it --------------------------------------------------


def test_read_file_says_unchanged_while_the_same_read_is_in_context(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    context: list[Message] = []
    tool = ReadFileTool(Workspace(tmp_path), lambda: context)
    first = tool.run({"path": "a.py"})
    assert "x = 1" in first.content
    context += turn("r1", "read_file", first.content, path="a.py")
    again = tool.run({"path": "a.py"})
    assert again.content.startswith("a.py is unchanged since you read it (at ")
    assert "x = 1" not in again.content
    # A changed file is sent.
    (tmp_path / "a.py").write_text("x = 2\n")
    assert "x = 2" in tool.run({"path": "a.py"}).content
    # A read that left the context (compacted away, or pruned) is sent again.
    (tmp_path / "a.py").write_text("x = 1\n")
    context.clear()
    assert "x = 1" in tool.run({"path": "a.py"}).content


def test_read_file_says_unchanged_for_a_file_brought_back_after_a_compaction(
    tmp_path: Path,
) -> None:
    (tmp_path / "b.py").write_text("def f():\n    return 2\n")
    restored = (
        "## Files you were working on (current contents after compaction)\n\n"
        "### b.py — current contents after compaction\n```\ndef f():\n    return 2\n```"
    )
    context = [Message.user(restored)]
    tool = ReadFileTool(Workspace(tmp_path), lambda: context)
    answer = tool.run({"path": "b.py"})
    assert answer.content.startswith("b.py is unchanged since you read it (earlier in this")
    (tmp_path / "b.py").write_text("def f():\n    return 3\n")
    assert "return 3" in tool.run({"path": "b.py"}).content


def test_the_agent_does_not_resend_an_unchanged_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.txt").write_text("MARK-CONTENT\n" * 50)
    store = open_store(tmp_path / "s.db")
    model = ScriptedModel(
        [
            tool_reply(tool_call("read_file", {"path": "big.txt"})),
            tool_reply(tool_call("read_file", {"path": "big.txt"})),
            text_reply("done"),
        ]
    )
    agent = coding_agent(store, ws, model)
    agent.run_turn("read big.txt twice")
    results = [
        str(b.get("content"))
        for m in agent.messages
        for b in m.content
        if b.get("type") == "tool_result"
    ]
    assert results[0].count("MARK-CONTENT") == 50
    assert results[1].startswith("big.txt is unchanged since you read it")
    store.close()


@pytest.mark.parametrize("state", ["unchanged since read", "changed since read", "partly read"])
def test_every_file_state_reads_back(state: str) -> None:
    text = f"<ledger>\n### Files\n- read · {state}: a b/c: d.py\n</ledger>"
    ledger = parse(text)
    assert ledger is not None and ledger.files[0].path == "a b/c: d.py"
    assert ledger.files[0].state == state
