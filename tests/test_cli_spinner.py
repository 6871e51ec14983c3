"""The spinner's line (``_cli/spinner``): the time that has passed and how to interrupt."""

from __future__ import annotations

from agentloop._cli.spinner import spinner_line


def test_the_spinner_shows_elapsed_time_and_how_to_interrupt() -> None:
    assert spinner_line("⠋", "Thinking…", 3.4) == "⠋ Thinking… (3s · Ctrl-C to interrupt)"
    assert spinner_line("⠋", "Thinking…", 65) == "⠋ Thinking… (1m 05s · Ctrl-C to interrupt)"
