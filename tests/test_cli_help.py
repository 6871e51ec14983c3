"""Help: ``/help`` names the agent's own tools and the compaction commands and wraps to the
terminal's width losing nothing; ``agentloop --help`` and ``agentloop sessions --help`` list
every sessions command, each of which has its own usage line."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import CLI, WINDOW

from agentloop._cli.cells import cells
from agentloop._cli.main import main
from agentloop._cli.slash_help import help_text


def test_help_lists_the_agents_own_tools(cli: CLI, tmp_path: Path) -> None:
    run = cli.run("--context-window", WINDOW, stdin="/help\n")
    assert "context_status" in run.err and "compact_context" in run.err
    assert "/undo-compaction" in run.err and "/compact --dry-run" in run.err


@pytest.mark.parametrize("width", [40, 60, 80, 100])
def test_help_wraps_to_the_terminal_width(width: int) -> None:
    text = help_text(width)
    assert all(cells(line) <= width for line in text.splitlines())

    def words(help_: str) -> list[str]:
        return [word for word in help_.split() if word != "·"]

    assert words(text) == words(help_text(None))  # nothing lost, only wrapped


def test_help_lists_every_sessions_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["sessions", "--help"])
    sub = capsys.readouterr().out
    commands = ("list", "show", "search", "tree", "export", "fork", "delete", "prune", "copy")
    section = top.split("commands:")[1].split("slash commands")[0]
    for command in commands:
        assert command in section, command
        assert f"    {command} " in sub, command


def test_every_sessions_subcommand_has_its_own_usage_line(cli: CLI) -> None:
    run = cli.run("sessions", "export", "--help")

    assert run.code == 0
    assert run.out.splitlines()[0].startswith("usage: agentloop sessions export [-h]")
    assert "{sessions,demo}" not in run.out and "--json" in run.out
