"""Asking the user on the terminal whether the agent may run a shell command."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from agentloop._agent.shell import Approve

__all__ = ["terminal_consent"]

QUESTION = "Run `{command}`? [y/N/a(lways)] "
KEPT_NOTE = "  (what you typed meanwhile is kept for the next prompt)\n"


class _TerminalConsent:
    def __init__(
        self,
        input_fn: Callable[[str], str],
        output: TextIO | None,
        before_asking: Callable[[], str] | None,
    ) -> None:
        self._input_fn = input_fn
        self._output = output
        self._before_asking = before_asking
        self._always = False

    def __call__(self, command: str) -> bool:
        if self._always:
            return True
        output = self._output if self._output is not None else sys.stderr
        # Keys typed before the question was shown are not its answer.
        if self._before_asking is not None and self._before_asking():
            output.write(KEPT_NOTE)
        output.write(QUESTION.format(command=command))
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
    input_fn: Callable[[str], str] = input,
    output: TextIO | None = None,
    *,
    before_asking: Callable[[], str] | None = None,
) -> Approve:
    """Consent policy asking ``Run `cmd`? [y/N/a(lways)]`` on ``output`` (default stderr).

    "y" allows this command, "a" allows it and every later one from this policy, anything else
    (including an empty answer or end of input) declines. ``before_asking`` takes the input typed
    ahead out of the way (and keeps it elsewhere); it returns what it took.
    """
    return _TerminalConsent(input_fn, output, before_asking)
