"""What survives a compaction comes from what a tool declares: the ``ToolFacts`` seam, a user's
own tool registered in one line, tools that declare nothing counted (never guessed at), the
core naming no tool, every distinct command kept with repeats folded, failing commands cut
last, nothing of the kept tail repeated in the ledger."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path
from typing import Any

from agentloop import (
    AgentLoop,
    CommandRan,
    CompactionSettings,
    ConversationCompacter,
    FileTouched,
    FunctionTool,
    Message,
    ToolCall,
    ToolFacts,
    default_tool_facts,
)
from agentloop._core.facts.ledger import derive, find_ledger, render
from agentloop._core.facts.ledger_fit import within
from agentloop._core.facts.receipt import receipt
from agentloop.testing import ScriptedModel, text_reply, tool_call, tool_reply

CORE = Path(__file__).resolve().parents[1] / "agentloop" / "_core"

TOOL_NAMES = {
    # the coding agent's own tools and other agents' (what the core must not know by name)
    "read_file", "write_file", "edit_file", "run_command", "todo_write", "list_files", "grep",
    "Read", "Write", "Edit", "MultiEdit", "Bash", "TodoWrite", "str_replace_editor",
    "execute_bash", "apply_patch", "shell", "update_plan", "bash",
}  # fmt: skip
WORDING = ("[exit code", "overwrote existing file", "Exit code", "created successfully", "FAILED ")


def test_the_core_names_no_tool_and_reads_no_tools_wording() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if node.value in TOOL_NAMES or any(w in node.value for w in WORDING):
                offenders.append(f"{path.name}:{node.lineno}: {node.value[:60]!r}")
    assert offenders == []


def use(call_id: str, name: str, **tool_input: Any) -> Message:
    return Message.assistant(
        [{"type": "tool_use", "id": call_id, "name": name, "input": tool_input}]
    )


def answer(call_id: str, text: str, *, error: bool = False) -> Message:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    return Message.user([{**block, "is_error": True} if error else block])


def deploy_facts(call: ToolCall) -> list[CommandRan]:
    """A user's own tool: a deployment, reported as a command with its status."""
    ok = call.result.startswith("deployed")
    return [CommandRan(f"deploy {call.input['target']}", "exit 0" if ok else "exit 1")]


def history() -> list[Message]:
    msgs = [Message.user("Ship the billing fix to staging, then to production.")]
    log = "".join(f"step {n}: uploading layer {n:04d} of the billing image\n" for n in range(400))
    msgs += [
        use("d1", "deploy", target="staging"),
        answer("d1", f"deployed 4f2a to staging\n{log}"),
    ]
    msgs += [use("l1", "lookup", key="billing"), answer("l1", "owner: payments team")]
    msgs += [use("l2", "lookup", key="oncall"), answer("l2", "owner: ada")]
    msgs += [use("d2", "deploy", target="production"), answer("d2", "refused: freeze", error=True)]
    msgs += [Message.assistant("Production is frozen; staging has the fix.")]
    msgs += [Message.user("ok, what next?")]
    return msgs


def test_a_users_own_tool_is_recognized_after_one_line_of_registration() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no model: digest summaries
        compacter = ConversationCompacter(model_name="claude-sonnet-5-5", context_window=200_000)
    compacter.tool_facts.register("deploy", deploy_facts)  # the one line
    transition = compacter.compact_and_transition("s", history(), force=True)
    assert transition is not None
    ledger = find_ledger(transition.compacted_messages)
    assert ledger is not None
    assert {c.command: c.outcome for c in ledger.commands} == {
        "deploy staging": "exit 0",
        "deploy production": "exit 1",
    }
    child = list(transition.compacted_messages)
    shown = receipt(history(), len(history()) - 1, child, compacter.tool_facts)
    assert shown.undeclared == {"lookup": 2}
    assert "2 calls of 1 tool declared no facts: lookup ×2" in "\n".join(shown.lines())


def test_without_registration_nothing_is_guessed_and_the_receipt_says_so() -> None:
    facts = default_tool_facts()
    assert facts.recognize(ToolCall("deploy", {"target": "x"}, "deployed")) is None
    shown = receipt(history(), len(history()) - 1, [history()[-1]], facts)
    assert shown.facts.get("commands", 0) == 0
    assert shown.undeclared == {"deploy": 2, "lookup": 2}


def test_a_function_tool_declares_its_facts_to_the_loop_that_runs_it(tmp_path: Path) -> None:
    tool = FunctionTool(
        "deploy",
        "Deploy to a target.",
        {"type": "object", "properties": {"target": {"type": "string"}}},
        lambda tool_input: f"deployed to {tool_input['target']}",
        facts=deploy_facts,
    )
    model = ScriptedModel([tool_reply(tool_call("deploy", {"target": "qa"})), text_reply("done")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compacter = ConversationCompacter(
            model_name="claude-sonnet-5-5",
            context_window=200_000,
            settings=CompactionSettings(strategy="summarize"),
        )
    loop = AgentLoop(model=model, model_name="claude-sonnet-5-5", tools=[tool], compacter=compacter)
    loop.run_turn("deploy to qa")
    assert "deploy" in compacter.tool_facts.names
    messages: list[Message] = [*loop.messages, Message.user("thanks")]
    ledger = derive(messages, facts=compacter.tool_facts)
    assert [(c.command, c.outcome) for c in ledger.commands] == [("deploy qa", "exit 0")]


def test_a_recognizer_that_raises_costs_its_facts_never_the_compaction() -> None:
    def broken(call: ToolCall) -> list[FileTouched]:
        raise KeyError("path")

    facts = ToolFacts().register("deploy", broken)
    assert facts.recognize(ToolCall("deploy", {}, "deployed")) is None


def bash_run(n: int, command: str, code: int, output: str = "") -> list[Message]:
    text = f"{output}\nExit code {code}" if code else output or "(no output)"
    return [use(f"b{n}", "Bash", command=command), answer(f"b{n}", text, error=code != 0)]


def test_repeats_fold_into_one_line_with_the_latest_exit_code() -> None:
    msgs = [Message.user("make the tests pass")]
    for n in range(7):
        msgs += bash_run(n, "pytest -x tests", 1 if n < 6 else 0, "1 failed" if n < 6 else "")
    msgs += bash_run(9, "pytest -x tests", 1, "FAILED tests/test_a.py::test_x - boom\n1 failed")
    ledger = derive(msgs, facts=default_tool_facts())
    [pytest] = ledger.commands
    assert (pytest.runs, pytest.outcome) == (8, "exit 1")
    assert "- ×8, last exit 1: pytest -x tests" in render(ledger)
    # replaying the same history on top of its own ledger counts nothing twice
    again = derive(msgs, ledger, facts=default_tool_facts())
    assert again.commands == ledger.commands


def test_every_distinct_command_survives_a_small_budget_and_failing_ones_go_last() -> None:
    msgs = [Message.user("tidy the repository " + "and explain every step in detail " * 12)]
    for n in range(60):
        msgs += bash_run(n, f"git log --oneline -n {n + 1} -- src/module_{n}.py", 0, "a1b2 fix")
    msgs += bash_run(99, "npm test -- --runInBand", 1, "Tests:       1 failed, 8 passed, 9 total")
    msgs += [Message.assistant("One test fails."), Message.user("fix it")]
    full = derive(msgs, facts=default_tool_facts())
    tight = within(full, 700)
    text = render(tight)
    assert "- exit 1: npm test -- --runInBand" in text  # the failing command is kept
    assert tight.omitted.get("Commands", 0) > 0
    # the cut ones are named by a search that finds them, not by a tool's name
    hint = next(line for line in text.splitlines() if "older left out" in line)  # Commands
    assert '"git log' in hint and "Bash" not in hint


def test_nothing_the_kept_tail_holds_is_repeated_in_the_ledger() -> None:
    msgs = [Message.user("first request")]
    msgs += bash_run(1, "make lint", 0)
    msgs += [Message.assistant("Linted."), Message.user("now " + "a long pasted request " * 40)]
    msgs += bash_run(2, "make build", 2, "error: missing header")
    tail_start = 3  # the newest request and what follows are kept verbatim
    ledger = derive(msgs, facts=default_tool_facts(), kept_from=tail_start)
    assert [c.command for c in ledger.commands] == ["make lint"]
    assert ledger.requests == ("first request",)
    # and what the ledger already lists is brought up to date from the tail
    msgs += bash_run(3, "make lint", 1, "E501 line too long")
    later = derive(msgs, facts=default_tool_facts(), kept_from=tail_start)
    assert [(c.command, c.outcome) for c in later.commands] == [("make lint", "exit 1")]
