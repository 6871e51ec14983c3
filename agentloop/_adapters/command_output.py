"""What a command's output says, whatever tool ran it: the lines that name an error, and the
tests a test runner (pytest, go test, cargo test, jest, vitest) reports failing, or a run that
passed.

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


# -- test runners -------------------------------------------------------------------------------
# A failing test is named by the runner's own line for it; a run is judged by its summary line,
# not by the command's exit code (``pytest | tail`` exits 0 whatever the tests did).

_FAILING_TEST = (
    re.compile(r"^(?:FAILED|ERROR) (\S+::\S+|\S+\.py)\b"),  # pytest's short summary
    re.compile(r"^(\S+::\S+) (?:FAILED|ERROR)\b"),  # pytest -v
    re.compile(r"^\s*--- FAIL: (\S+)"),  # go test
    re.compile(r"^test (\S+) \.\.\. FAILED$"),  # cargo test
    re.compile(r"^\s*● (.+ › .+?)\s*$"),  # jest: a failing test's heading
    re.compile(r"^\s*FAIL\s+(\S.* > .+?)\s*$"),  # vitest: file > suite > test
)
_FAILING_TEST_MARK = re.compile(r"^\s*[×✗]\s+(.+?)(?:\s+\d+(?:\.\d+)?\s*m?s)?\s*$")  # vitest
_FAILING_UNIT = (
    re.compile(r"^FAIL\t(\S+)"),  # go test: a package
    re.compile(r"^\s*FAIL (?!\s)(\S+)"),  # jest: a test file
)
_COUNTED = r"(?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)"
_SUMMARY = (
    # pytest ("=== 1 failed, 2 passed in 0.12s ===", bare with -q)
    re.compile(rf"^=*\s*((?:\d+ {_COUNTED}|no tests ran)(?:, \d+ {_COUNTED})*) in [\d.]+s\b.*?=*$"),
    re.compile(r"^(ok)\s+\S+\s+(?:[\d.]+s|\(cached\))(?:\s|$)"),  # go test: a package passed
    re.compile(r"^(FAIL)$"),  # go test: the run's last line when anything failed
    re.compile(r"^test result: ((?:ok|FAILED)\..*)$"),  # cargo test
    re.compile(r"^Tests:\s+(.*\btotal)$"),  # jest
    re.compile(r"^\s*Tests\s+(\S.*\(\d+\))\s*$"),  # vitest
)
_FAILED_COUNT = re.compile(r"\b[1-9]\d* (?:failed|errors?)\b|^FAIL(?:ED\.)?")
_PASS_MARK = re.compile(
    r"^(?:\S+::\S+ PASSED\b|\s*--- PASS: |test \S+ \.\.\. ok$|\s*PASS (?!\s)\S|\s*✓ )"
)


def _found(patterns: tuple[re.Pattern[str], ...], lines: list[str]) -> list[str]:
    return [m[1] for line in lines for p in patterns if (m := p.match(line))]


def tests_reported(text: str, *, succeeded: bool) -> tuple[str, ...] | None:
    """The failing tests an output reports (``()``: a test run that passed; ``None``: no test
    run seen), for pytest, go test, cargo test, jest and vitest.

    Failing tests come from the runner's lines naming them (else the failing files or
    packages; else the summary line itself, ``"1 failed, 2 passed"``, when it counts failures
    it does not name). A run passed when its summary says so. ``succeeded`` (whether the
    command ended well) matters only when the output holds no summary at all: then a run
    whose lines all passed counts as passing only if the command succeeded."""
    lines = text.splitlines()
    failing = _found(_FAILING_TEST, lines)
    if not failing:
        failing = [m[1] for m in map(_FAILING_TEST_MARK.match, lines) if m]
    if not failing:
        failing = _found(_FAILING_UNIT, lines)
    summaries = _found(_SUMMARY, lines)
    if not failing:
        failing = [s for s in summaries if _FAILED_COUNT.search(s) and s != "FAIL"]
    if failing:
        return tuple(dict.fromkeys(failing))
    if summaries:
        return None if "FAIL" in summaries or _no_tests(summaries) else ()
    if succeeded and any(_PASS_MARK.match(line) for line in lines):
        return ()
    return None


def _no_tests(summaries: list[str]) -> bool:
    """Whether every summary says that no test ran (not a run that passed)."""
    return all(s.startswith("no tests ran") for s in summaries)
