"""``agentloop demo``: a scripted coding session, offline, that compacts twice or more.

A scripted model (no network, no key) drives the real agent: real tools in a temporary
workspace, a small context window so compaction fires, the real session store. It ends by
printing the lineage tree of the sessions it made.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import shlex
import shutil
import string
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from agentloop._core.values.validation import DEFAULT_MODEL
from agentloop.testing import Reply, ScriptedModel, text_reply, tool_call, tool_reply

# The system prompt and tool definitions alone take about 2,000 tokens: at 4,800 the scripted
# session compacts automatically twice (between tool rounds), then once more on /compact.
DEMO_WINDOW = 4800
REMOVE_COMMAND = "agentloop sessions delete {root} --lineage --yes"
"""The demo's last line: the one command that removes every session it stored."""

CALC = '''\
"""A tiny calculator library."""


def add(a: float, b: float) -> float:
    """Return a + b."""
    return a + b


def subtract(a: float, b: float) -> float:
    """Return a - b."""
    return a - b


def multiply(a: float, b: float) -> float:
    """Return a * b."""
    return a * b


def divide(a: float, b: float) -> float:
    """Return a / b; dividing by zero raises ZeroDivisionError."""
    return a // b


def mean(values: list[float]) -> float:
    """Return the arithmetic mean of a non-empty list."""
    return sum(values) / len(values)
'''

TESTS = """\
from calc import add, divide, mean, multiply, subtract


def test_basics() -> None:
    assert add(2, 3) == 5
    assert subtract(2, 3) == -1
    assert multiply(4, 2.5) == 10


def test_divide() -> None:
    assert divide(7, 2) == 3.5
    assert divide(-9, 3) == -3


def test_mean() -> None:
    assert mean([1, 2, 3, 4]) == 2.5


if __name__ == "__main__":
    import sys
    import traceback

    for name, test in sorted(globals().items()):
        if name.startswith("test_"):
            try:
                test()
            except AssertionError:
                line = traceback.extract_tb(sys.exc_info()[2])[-1]
                print(f"FAILED {name}: line {line.lineno}: {line.line}")
                sys.exit(1)
    print("all tests passed")
"""

NOTES = "\n".join(
    f"- {line}"
    for line in (
        "calc is used by the billing service; keep function names stable.",
        "divide must return floats: invoices show fractional amounts.",
        "mean is called with non-empty lists only (validated upstream).",
        "All public functions need docstrings and type hints.",
        "Tests run with plain python: no third-party test runner is installed in CI.",
    )
    * 6
)


def _script() -> list[Reply]:
    # `python` is this interpreter (see _private_tools): its full path, counted in every
    # request and quoted in every summary, would make the run depend on where it is installed.
    run_tests = "python test_calc.py"
    todos = [
        {"content": "Reproduce the failing test", "status": "in_progress"},
        {"content": "Fix the bug", "status": "pending"},
        {"content": "Run the tests", "status": "pending"},
    ]
    done = [dict(item, status="completed") for item in todos]
    return [
        # Turn 1: find and fix the bug.
        tool_reply(tool_call("todo_write", {"todos": todos}), text="Let me plan this first."),
        tool_reply(tool_call("list_files", {})),
        tool_reply(
            tool_call("read_file", {"path": "calc.py"}),
            tool_call("read_file", {"path": "test_calc.py"}),
            tool_call("read_file", {"path": "NOTES.md"}),
        ),
        tool_reply(tool_call("run_command", {"command": run_tests})),
        tool_reply(
            tool_call(
                "edit_file",
                {"path": "calc.py", "old_string": "return a // b", "new_string": "return a / b"},
            ),
            text="`divide` uses floor division (`//`); NOTES.md says it must return floats.",
        ),
        tool_reply(tool_call("run_command", {"command": run_tests})),
        tool_reply(tool_call("todo_write", {"todos": done})),
        text_reply(
            "Fixed: `divide` used floor division, so `divide(7, 2)` gave 3 instead of 3.5. "
            "It now uses true division and all tests pass."
        ),
        # Turn 2: a new function with a test.
        tool_reply(
            tool_call("read_file", {"path": "calc.py"}),
            tool_call("read_file", {"path": "test_calc.py"}),
        ),
        tool_reply(
            tool_call(
                "edit_file",
                {
                    "path": "calc.py",
                    "old_string": "def mean(",
                    "new_string": 'def power(base: float, exponent: int) -> float:\n    """Return '
                    'base ** exponent."""\n    return base**exponent\n\n\ndef mean(',
                },
            ),
            tool_call(
                "edit_file",
                {
                    "path": "test_calc.py",
                    "old_string": "def test_mean() -> None:",
                    "new_string": "def test_power() -> None:\n    from calc import power\n\n"
                    "    assert power(2, 10) == 1024\n\n\ndef test_mean() -> None:",
                },
            ),
        ),
        tool_reply(tool_call("run_command", {"command": run_tests})),
        text_reply("Added `power(base, exponent)` with a test; all tests pass."),
        # Turn 3: documentation.
        tool_reply(tool_call("grep", {"pattern": r"^def \w+"})),
        tool_reply(
            tool_call("read_file", {"path": "NOTES.md"}),
            text="Checking the team's notes so that the README agrees with them.",
        ),
        tool_reply(
            tool_call(
                "write_file",
                {
                    "path": "README.md",
                    "content": "# calc\n\nFunctions: add, subtract, multiply, divide (true "
                    "division), power, mean.\n\nRun the tests with `python test_calc.py`.\n",
                },
            )
        ),
        text_reply("Wrote README.md listing the functions and how to run the tests."),
        # Turn 4: verify everything.
        tool_reply(tool_call("run_command", {"command": run_tests})),
        tool_reply(tool_call("list_files", {})),
        tool_reply(tool_call("read_file", {"path": "calc.py"})),
        text_reply(
            "All tests pass. Changed: calc.py (divide fixed, power added), test_calc.py "
            "(test_power), README.md (new)."
        ),
        # Turn 5 (after /compact): answered from the summary and the preserved state.
        text_reply(
            "The original bug: `divide` used floor division (`a // b`), so 7 / 2 gave 3. "
            "It is fixed, and the todo list is complete."
        ),
    ]


INPUT = """\
The tests in this project fail. Find out why and fix it.
Add a power function with a test.
Write a short README listing the functions.
Run all the tests once more and tell me which files you changed.
/context
/compact keep the decisions about calc.py's API
What was the original bug?
"""


# The system prompt names the workspace, so its path is counted in every request. A random
# temporary name alone varies by a few tokens from run to run (and a longer temporary directory
# by more), which moves where compaction happens: the demo draws names until the prompt counts
# as many tokens as with this path, so its run is the same wherever the temporary directory is.
REFERENCE_WORKSPACE = "/tmp/agentloop-demo-with-room-for-a-longer-temporary-directory"
_NAME_CHARS = string.ascii_lowercase + string.digits
_NAME_DRAWS = 300


def make_workspace() -> Path:
    """A new private directory for the demo's project, whose path counts as many tokens in the
    system prompt as :data:`REFERENCE_WORKSPACE` (when no such name is found under the temporary
    directory or ``/tmp``: any new temporary directory, and the figures may differ a little)."""
    from agentloop._adapters.tokens import TokenEstimator
    from agentloop._agent.agent import system_prompt

    estimator = TokenEstimator()
    target = estimator.count_system(system_prompt(Path(REFERENCE_WORKSPACE)))
    draw = random.Random()
    for base in dict.fromkeys((tempfile.gettempdir(), "/tmp")):
        root = Path(base)
        if not root.is_dir():
            continue
        root = root.resolve()
        for _ in range(_NAME_DRAWS):
            suffix = "".join(draw.choices(_NAME_CHARS, k=draw.randint(1, 24)))
            candidate = root / f"agentloop-demo-{suffix}"
            if estimator.count_system(system_prompt(candidate)) != target:
                continue
            try:
                candidate.mkdir(mode=0o700)
            except FileExistsError:
                continue
            except OSError:
                break  # not writable: the next base
            return candidate
    return Path(tempfile.mkdtemp(prefix="agentloop-demo-"))


@contextlib.contextmanager
def _private_tools() -> Iterator[Path]:
    """A directory outside the workspace, first on ``PATH`` while the demo runs: its ``python``
    runs this interpreter, and as the user's config directory it holds no instruction file
    (the user's own would change the system prompt and so the run)."""
    tools = Path(tempfile.mkdtemp(prefix="agentloop-demo-tools-"))
    launcher = tools / "python"
    launcher.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    launcher.chmod(0o755)
    saved = {name: os.environ.get(name) for name in ("PATH", "AGENTLOOP_CONFIG_DIR")}
    os.environ["PATH"] = os.pathsep.join(filter(None, (str(tools), saved["PATH"])))
    os.environ["AGENTLOOP_CONFIG_DIR"] = str(tools)
    try:
        yield tools
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(tools, ignore_errors=True)


def run_demo() -> int:
    """Run the scripted session; print the lineage tree, then the command that removes it."""
    with _private_tools():
        return _run_demo()


def _run_demo() -> int:
    from agentloop._cli.app import AgentOptions, run_session
    from agentloop._cli.list_commands import tree_command
    from agentloop._cli.store_access import open_cli_store

    workspace = make_workspace()
    try:
        (workspace / "calc.py").write_text(CALC)
        (workspace / "test_calc.py").write_text(TESTS)
        (workspace / "NOTES.md").write_text("# Notes from the team\n\n" + NOTES + "\n")
        # The scripted model's usage is tiktoken's count of each request: an estimate, shown
        # as one (`~`), since no API counts anything here.
        model = ScriptedModel(_script(), estimated_usage=True)
        from agentloop._cli.ui import shown

        intro = (
            f"agentloop demo: a scripted model works on a small project in {workspace}\n"
            f"(context window {DEMO_WINDOW:,} tokens so that compaction shows; no network, "
            "no API key)\n"
        )
        print(shown(intro, sys.stderr), file=sys.stderr)
        options = AgentOptions(
            model_name=DEFAULT_MODEL,
            context_window=DEMO_WINDOW,
            # The scripted commands only run the project's own tests inside the temp dir.
            yes=True,
            workspace=workspace,
            echo_input=True,
        )
        code = run_session(options, model, fetch=None, stdin=io.StringIO(INPUT))
        with open_cli_store() as store:
            latest = store.list_sessions(workspace=str(workspace.resolve()), limit=1)
            if latest:
                root = store.lineage(latest[0].id)[0].id[:8]
                print("\n$ agentloop sessions tree", latest[0].id[:8], file=sys.stderr)
                sys.stderr.flush()
                tree_command(store, sys.stdout, latest[0].id)
                sys.stdout.flush()
                print(
                    "\nThe demo's sessions are in your session store. To remove them:\n"
                    f"  {REMOVE_COMMAND.format(root=root)}",
                    file=sys.stderr,
                )
        return code
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
