"""Asking the user on the terminal whether the agent may run a shell command."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from agentloop._agent.shell import Approve

__all__ = ["terminal_consent"]


class _TerminalConsent:
    def __init__(self, input_fn: Callable[[str], str], output: TextIO | None) -> None:
        self._input_fn = input_fn
        self._output = output
        self._always = False

    def __call__(self, command: str) -> bool:
        if self._always:
            return True
        output = self._output if self._output is not None else sys.stderr
        output.write(f"Run `{command}`? [y/N/a(lways)] ")
        output.flush()
        try:
            answer = self._input_fn("").strip().lower()
        except EOFError:
            output.write("\n")
            return False
        if answer in ("a", "always"):
            self._always = True
            return True
        return answer in ("y", "yes")


def terminal_consent(
    input_fn: Callable[[str], str] = input, output: TextIO | None = None
) -> Approve:
    """Consent policy asking ``Run `cmd`? [y/N/a(lways)]`` on ``output`` (default stderr).

    "y" allows this command, "a" allows it and every later one from this policy, anything else
    (including an empty answer or end of input) declines.
    """
    return _TerminalConsent(input_fn, output)
