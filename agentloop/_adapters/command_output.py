"""What a command's output says, whatever tool ran it: the lines that name an error, and the
tests a test runner reports failing (or a run that passed).

Shared by every recognizer of a shell-like tool (``tool_recognizers``, the coding agent's own
``run_command``). Pure functions of the text.
"""

from __future__ import annotations

import re

__all__ = ["ERROR_CHARS", "error_lines", "tests_reported"]

ERROR_CHARS = 300
_ERROR_LINE = re.compile(
    r"^(?:E\s+)?(?:\S+:\d+(?::\d+)?: (?:error|[A-Z]{1,4}\d{2,4})\b.*"
    r"|FAILED \S.*"
    r"|[\w.]*(?:Error|Exception)\b: .*)$"
)
_FRAME = re.compile(r'^\s*File "[^"]+", line \d+, in \S+$')
_PYTEST_FAILED = re.compile(r"^FAILED (\S+)")
_PYTEST_SUMMARY = re.compile(r"^=+ .*\b(?:passed|failed|errors?|no tests ran)\b.* in [\d.]+s.* =+$")


def error_lines(text: str) -> tuple[str, ...]:
    """The lines of an output that name an error: exception lines, ``FAILED`` tests, linter
    and type-checker errors, and the deepest frame of each traceback."""
    out: list[str] = []
    frame: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if _FRAME.match(raw):
            frame = line
            continue
        if _ERROR_LINE.match(line):
            if frame is not None:
                out.append(frame)
            out.append(re.sub(r"^E\s+", "", line)[:ERROR_CHARS])
            frame = None
        elif frame is not None and not raw.startswith("    "):
            out.append(frame)  # a traceback whose error line is not one we recognise
            frame = None
    if frame is not None:
        out.append(frame)
    return tuple(dict.fromkeys(out))


def tests_reported(text: str, *, succeeded: bool) -> tuple[str, ...] | None:
    """The failing tests an output reports (``()``: a test run that passed; ``None``: no test
    run seen). ``succeeded``: whether the command ended well."""
    failed = tuple(dict.fromkeys(m[1] for m in map(_PYTEST_FAILED.match, text.splitlines()) if m))
    if failed:
        return failed
    if succeeded and any(_PYTEST_SUMMARY.match(line.strip()) for line in text.splitlines()):
        return ()
    return None
