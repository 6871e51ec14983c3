"""The consent prompt on the terminal, alone and driving run_command."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

from support.agent_tools import make_tools, run

from agentloop._cli.consent import terminal_consent


def fake_input(answers: list[str | type[BaseException]]) -> Callable[[str], str]:
    remaining: Iterator[str | type[BaseException]] = iter(answers)

    def input_fn(prompt: str) -> str:
        answer = next(remaining)  # StopIteration here means an unexpected extra prompt
        if isinstance(answer, str):
            return answer
        raise answer

    return input_fn


def test_terminal_consent_prompt_and_answers() -> None:
    output = io.StringIO()
    approve = terminal_consent(fake_input(["y", "n", "", "YES", "maybe"]), output)
    assert [approve(f"cmd{i}") for i in range(5)] == [True, False, False, True, False]
    assert output.getvalue().startswith("Run `cmd0`? [y/N/a(lways)] Run `cmd1`?")
    assert output.getvalue().count("[y/N/a(lways)]") == 5


def test_terminal_consent_always_stops_asking() -> None:
    output = io.StringIO()
    approve = terminal_consent(fake_input(["a"]), output)
    assert approve("make test")
    assert approve("rm -rf build")  # would raise StopIteration if it asked again
    assert approve("ls")
    assert output.getvalue() == "Run `make test`? [y/N/a(lways)] "


def test_terminal_consent_end_of_input_declines() -> None:
    approve = terminal_consent(fake_input([EOFError]), io.StringIO())
    assert approve("ls") is False


def test_terminal_consent_drives_the_tool(ws: Path) -> None:
    output = io.StringIO()
    tools = make_tools(ws, approve=terminal_consent(fake_input(["n", "a"]), output))
    declined = run(tools, "run_command", command="touch one")
    assert declined.is_error and "declined" in declined.content
    assert not (ws / "one").exists()
    assert not run(tools, "run_command", command="touch two").is_error
    assert not run(tools, "run_command", command="touch three").is_error
    assert (ws / "two").exists() and (ws / "three").exists()
    assert output.getvalue().count("Run `") == 2


def test_terminal_consent_takes_type_ahead_out_of_the_way_before_asking() -> None:
    events: list[str] = []

    def before_asking() -> str:
        events.append("flushed")
        return "typed earlier\n"

    def input_fn(prompt: str) -> str:
        events.append("asked")
        return "y"

    output = io.StringIO()
    approve = terminal_consent(input_fn, output, before_asking=before_asking)
    assert approve("ls") is True
    assert events == ["flushed", "asked"]
    assert output.getvalue().startswith(
        "  (what you typed meanwhile is kept for the next prompt)\n"
    )
    assert output.getvalue().endswith("Run `ls`? [y/N/a(lways)] ")
