"""The recognizers that ship with agentloop read other agents' tool calls as facts.

Each result text below is written in the shape the agent prints (its tool names, input keys,
wording, exit-code markers); every test asserts the exact facts, so a recognizer that misread a
shape, or claimed a call it cannot know, fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloop import (
    CommandRan,
    FileTouched,
    TodoState,
    ToolCall,
    ToolFacts,
    default_tool_facts,
)
from agentloop._adapters.command_output import tests_reported as runner_tests
from agentloop._core.values.tool_facts import ToolFact


def facts(
    name: str, data: dict[str, Any], result: str = "", *, error: bool = False
) -> tuple[ToolFact, ...] | None:
    return default_tool_facts().recognize(ToolCall(name, data, result, error))


def one(name: str, data: dict[str, Any], result: str = "", *, error: bool = False) -> ToolFact:
    found = facts(name, data, result, error=error)
    assert found is not None and len(found) == 1, found
    return found[0]


def ran(name: str, data: dict[str, Any], result: str = "", *, error: bool = False) -> CommandRan:
    found = one(name, data, result, error=error)
    assert isinstance(found, CommandRan), found
    return found


PYTEST_FAILING = """\
============================= test session starts ==============================
collected 3 items

tests/test_calc.py .F.                                                   [100%]

=================================== FAILURES ===================================
_________________________________ test_divide __________________________________

    def test_divide():
>       assert divide(1, 0) == 0
E       ZeroDivisionError: division by zero

tests/test_calc.py:9: ZeroDivisionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_divide - ZeroDivisionError: division by zero
========================= 1 failed, 2 passed in 0.04s ==========================
"""
PYTEST_ERRORS = (
    "ZeroDivisionError: division by zero",
    "FAILED tests/test_calc.py::test_divide - ZeroDivisionError: division by zero",
)

# -- Claude Code ---------------------------------------------------------------------------


def test_claude_code_reads_whole_and_in_part() -> None:
    whole = "     1→import os\n     2→\n     3→print(os.getcwd())\n"
    assert one("Read", {"file_path": "/repo/app.py"}, whole) == FileTouched("/repo/app.py", "read")
    part = "120\tdef main():\n121\t    run()\n"
    read = {"file_path": "/repo/app.py", "offset": 120, "limit": 2}
    assert one("Read", read, part) == FileTouched("/repo/app.py", "read_part")
    background = {"file_path": "/tmp/claude-1000/-repo/tasks/b7x2.output"}
    assert facts("Read", background, "     1→Serving on :3000") == ()  # a command's output
    missing = "<tool_use_error>File does not exist. Note: your current working directory is /repo."
    assert (
        facts("Read", {"file_path": "/repo/nope.py"}, missing + "</tool_use_error>", error=True)
        == ()
    )


def test_claude_code_write_tells_created_from_overwritten() -> None:
    created = "File created successfully at: /repo/new.py"
    assert one("Write", {"file_path": "/repo/new.py", "content": "x = 1\n"}, created) == (
        FileTouched("/repo/new.py", "created")
    )
    for updated in (
        "The file /repo/app.py has been updated. Here's the result of running `cat -n` on a "
        "snippet of the edited file:\n     1→x = 2",
        "The file /repo/app.py has been updated successfully. (file state is current in your "
        "context — no need to Read it back)",
    ):
        assert one("Write", {"file_path": "/repo/app.py", "content": "x = 2\n"}, updated) == (
            FileTouched("/repo/app.py", "overwritten")
        )
    unread = "<tool_use_error>File has not been read yet. Read it first before writing to it."
    assert facts("Write", {"file_path": "/repo/app.py", "content": ""}, unread, error=True) == ()


def test_claude_code_edits() -> None:
    edit = {"file_path": "/repo/app.py", "old_string": "x = 1", "new_string": "x = 2"}
    ok = "The file /repo/app.py has been updated successfully."
    assert one("Edit", edit, ok) == FileTouched("/repo/app.py", "edited")
    multi = {"file_path": "/repo/app.py", "edits": [{"old_string": "a", "new_string": "b"}]}
    assert one("MultiEdit", multi, ok) == FileTouched("/repo/app.py", "edited")
    notebook = {"notebook_path": "/repo/nb.ipynb", "cell_id": "c1", "new_source": "print(1)"}
    assert one("NotebookEdit", notebook, "Updated cell c1") == (
        FileTouched("/repo/nb.ipynb", "edited")
    )
    miss = "<tool_use_error>String to replace not found in file.\nString: x = 1</tool_use_error>"
    assert facts("Edit", edit, miss, error=True) == ()


def test_claude_code_bash_exit_codes() -> None:
    assert one("Bash", {"command": "ls src"}, "app.py\nutil.py") == CommandRan("ls src", "exit 0")
    quiet = one("Bash", {"command": "touch a"}, "(Bash completed with no output)")
    assert quiet == CommandRan("touch a", "exit 0")
    failed = one("Bash", {"command": "pytest"}, "Exit code 1\n" + PYTEST_FAILING, error=True)
    assert failed == CommandRan(
        "pytest", "exit 1", PYTEST_ERRORS, ("tests/test_calc.py::test_divide",)
    )
    older = one("Bash", {"command": "false"}, "Error: Exit code 2", error=True)
    assert older == CommandRan("false", "exit 2")
    killed = one("Bash", {"command": "sleep 999"}, "Exit code 143\nTerminated", error=True)
    assert killed == CommandRan("sleep 999", "exit 143")
    background = (
        "Command running in background with ID: b7x2. Output is being written to: "
        "/tmp/claude/tasks/b7x2.output"
    )
    assert one("Bash", {"command": "npm run dev", "run_in_background": True}, background) == (
        CommandRan("npm run dev", "running")
    )
    refused = "The user doesn't want to proceed with this tool use. The tool use was rejected."
    assert one("Bash", {"command": "rm -rf build"}, refused, error=True) == (
        CommandRan("rm -rf build", "not run")
    )


def test_a_pipeline_hides_the_exit_code_but_not_the_summary() -> None:
    tail = "FAILED tests/test_calc.py::test_divide - ZeroDivisionError\n1 failed, 41 passed in 1.2s"
    piped = ran("Bash", {"command": "pytest -q | tail -2"}, tail)
    assert piped.outcome == "exit 0" and piped.tests == ("tests/test_calc.py::test_divide",)
    counts_only = ran("Bash", {"command": "pytest -q | tail -1"}, "1 failed, 41 passed in 1.2s")
    assert counts_only.tests == ("1 failed, 41 passed",)


def test_claude_code_todos() -> None:
    todos = [
        {"content": "Fix divide", "status": "completed", "activeForm": "Fixing divide"},
        {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
        {"content": "Update the README", "status": "pending", "activeForm": "Updating"},
    ]
    ok = "Todos have been modified successfully. Ensure that you continue to use the todo list"
    assert one("TodoWrite", {"todos": todos}, ok) == TodoState(
        (
            ("completed", "Fix divide"),
            ("in_progress", "Run the tests"),
            ("pending", "Update the README"),
        )
    )


# -- pi ------------------------------------------------------------------------------------


def test_pi_file_tools_by_their_keys_whatever_the_casing() -> None:
    truncated = "line\n" * 3 + "\n[Showing lines 1-2000 of 5120. Use offset=2001 to continue.]"
    assert one("read", {"path": "src/big.ts"}, truncated) == FileTouched("src/big.ts", "read_part")
    assert one("read", {"path": "src/a.ts"}, "export const a = 1;\n") == (
        FileTouched("src/a.ts", "read")
    )
    # logged in with an Anthropic token, pi answers as Claude Code's names with its own keys
    assert one("Read", {"path": "src/a.ts"}, "export const a = 1;\n") == (
        FileTouched("src/a.ts", "read")
    )
    wrote = "Successfully wrote 42 bytes to src/b.ts"
    assert one("write", {"path": "src/b.ts", "content": "x"}, wrote) == (
        FileTouched("src/b.ts", "written")
    )
    pi_edit = {"path": "src/a.ts", "oldText": "= 1", "newText": "= 2"}
    replaced = "Successfully replaced text in src/a.ts."
    assert one("edit", pi_edit, replaced) == FileTouched("src/a.ts", "edited")
    assert one("Edit", pi_edit, replaced) == FileTouched("src/a.ts", "edited")
    newer = {"path": "src/a.ts", "edits": [{"oldText": "a", "newText": "b"}]}
    assert one("edit", newer, "Successfully replaced 1 block(s) in src/a.ts.") == (
        FileTouched("src/a.ts", "edited")
    )
    missing = "Could not find the exact text in src/a.ts. The old text must match exactly."
    assert facts("edit", pi_edit, missing, error=True) == ()


def test_pi_bash() -> None:
    failed = 'src/app.py:3: error: Name "x" is not defined  [name-defined]\n'
    failed += "Found 1 error in 1 file (checked 4 source files)\n\nCommand exited with code 1"
    assert one("bash", {"command": "mypy src"}, failed, error=True) == CommandRan(
        "mypy src", "exit 1", ('src/app.py:3: error: Name "x" is not defined  [name-defined]',)
    )
    assert one("bash", {"command": "ls"}, "a.ts\nb.ts") == CommandRan("ls", "ok")
    timed_out = "building...\nCommand timed out after 120 seconds"
    assert ran("bash", {"command": "make"}, timed_out, error=True).outcome == "timed out"
    assert one("Bash", {"command": "make"}, "\n\nCommand exited with code 2", error=True) == (
        CommandRan("make", "exit 2")
    )


def test_opencode_by_its_keys() -> None:
    shown = "<path>/repo/a.ts</path>\n<type>file</type>\n<content>\n1: export const a = 1;\n"
    shown += "(Showing lines 1-2000 of 2400. Use offset=2001 to continue.)\n</content>"
    assert one("read", {"filePath": "/repo/a.ts"}, shown) == FileTouched("/repo/a.ts", "read_part")
    change = {"filePath": "/repo/a.ts", "oldString": "= 1", "newString": "= 2"}
    assert one("edit", change, "Edit applied successfully.") == FileTouched("/repo/a.ts", "edited")
    slow = "compiling...\n\n(Command timed out after 120000 ms)"
    assert ran("bash", {"command": "npm run build", "description": "Build"}, slow).outcome == (
        "timed out"
    )
    # a program's own words about a time-out, followed by more output, are not the tool's note
    retried = "Command timed out after 5 retries, retrying\nconnected"
    assert ran("bash", {"command": "./sync"}, retried).outcome == "ok"
    todos = {"todos": [{"content": "Ship it", "status": "pending", "priority": "high"}]}
    assert one("todowrite", todos, "[]") == TodoState((("pending", "Ship it"),))


# -- OpenHands -----------------------------------------------------------------------------


def editor(command: str, path: str = "/workspace/app.py", **more: Any) -> dict[str, Any]:
    return {"command": command, "path": path, "security_risk": "LOW", **more}


def test_openhands_editor_by_its_command() -> None:
    view = "Here's the result of running `cat -n` on /workspace/app.py:\n     1\timport os\n"
    assert one("str_replace_editor", editor("view"), view) == (
        FileTouched("/workspace/app.py", "read")
    )
    ranged = editor("view", view_range=[10, 40])
    assert one("str_replace_editor", ranged, view) == FileTouched("/workspace/app.py", "read_part")
    to_end = editor("view", view_range=[1, -1])
    assert one("str_replace_editor", to_end, view) == FileTouched("/workspace/app.py", "read")
    listing = (
        "Here's the files and directories up to 2 levels deep in /workspace, excluding hidden "
        "items:\n/workspace/\n/workspace/app.py"
    )
    assert facts("str_replace_editor", editor("view", "/workspace"), listing) == ()
    created = "File created successfully at: /workspace/new.py"
    assert one(
        "str_replace_editor", editor("create", "/workspace/new.py", file_text="x"), created
    ) == (FileTouched("/workspace/new.py", "created"))
    edited = (
        "The file /workspace/app.py has been edited. Here's the result of running `cat -n` on a "
        "snippet of /workspace/app.py:\n     3\tx = 2\nReview the changes and make sure they are "
        "as expected. Edit the file again if necessary."
    )
    for command in ("str_replace", "insert"):
        assert one(
            "str_replace_editor", editor(command, old_str="x = 1", new_str="x = 2"), edited
        ) == (FileTouched("/workspace/app.py", "edited"))
    undone = "Last edit to /workspace/app.py undone successfully."
    assert one("str_replace_editor", editor("undo_edit"), undone) == (
        FileTouched("/workspace/app.py", "edited")
    )
    miss = (
        "ERROR:\nNo replacement was performed, old_str `x = 9` did not appear verbatim in "
        "/workspace/app.py."
    )
    assert facts("str_replace_editor", editor("str_replace", old_str="x = 9"), miss) == ()
    exists = "ERROR:\nFile already exists at: /workspace/app.py. Cannot overwrite files using "
    exists += "command `create`."
    assert facts("str_replace_editor", editor("create", file_text="y"), exists) == ()
    assert facts("str_replace_editor", editor("frobnicate"), "") is None


OH_TAIL = "\n[Current working directory: /workspace]\n[Python interpreter: /usr/bin/python]"


def test_openhands_execute_bash() -> None:
    out = PYTEST_FAILING + "[The command completed with exit code 1.]" + OH_TAIL
    out += "\n[Command finished with exit code 1]"
    assert ran("execute_bash", {"command": "pytest", "security_risk": "LOW"}, out) == CommandRan(
        "pytest", "exit 1", PYTEST_ERRORS, ("tests/test_calc.py::test_divide",)
    )
    ok = "app.py\n[The command completed with exit code 0.]" + OH_TAIL
    ok += "\n[Command finished with exit code 0]"
    assert one("execute_bash", {"command": "ls"}, ok) == CommandRan("ls", "exit 0")
    waiting = (
        "Serving on :8000\n[The command has no new output after 30 seconds. You may wait longer "
        "to see additional output by sending empty command '', send other commands to interact "
        "with the current process, or send keys to interrupt/kill the command.]"
        "\n[The command completed with exit code -1.]" + OH_TAIL
    )
    assert one("execute_bash", {"command": "python -m http.server"}, waiting) == (
        CommandRan("python -m http.server", "running")
    )
    timed = "[The command timed out after 120 seconds. You may wait longer ...]"
    timed += "\n[The command completed with exit code -1.]" + OH_TAIL
    assert ran("execute_bash", {"command": "make", "timeout": 120}, timed).outcome == "timed out"
    interrupted = "^C\n[The command completed with exit code 130. CTRL+C was sent.]" + OH_TAIL
    # a poll of a running command and keys sent to it are no new command
    assert facts("execute_bash", {"command": "", "security_risk": "LOW"}, waiting) == ()
    assert facts("execute_bash", {"command": "C-c", "is_input": "true"}, interrupted) == ()


def test_openhands_task_tracker() -> None:
    plan = {
        "command": "plan",
        "task_list": [
            {"id": "1", "title": "Reproduce the bug", "status": "done"},
            {"id": "2", "title": "Fix parse()", "status": "in_progress", "notes": "see #12"},
            {"id": "3", "title": "Add a test", "status": "todo"},
        ],
    }
    assert one("task_tracker", plan, "Task list has been updated with 3 items.") == TodoState(
        (
            ("completed", "Reproduce the bug"),
            ("in_progress", "Fix parse()"),
            ("pending", "Add a test"),
        )
    )
    assert facts("task_tracker", {"command": "view"}, "# Task List\n1. [todo] Add a test") == ()


# -- SWE-agent, mini-swe-agent -----------------------------------------------------------

WINDOW = """\
[File: /repo/src/parser.py (412 lines total)]
(100 more lines above)
101:def parse(text):
102:    return text.split()
(310 more lines below)
"""


def test_swe_agent_windowed_tools() -> None:
    assert one("open", {"path": "src/parser.py", "line_number": 101}, WINDOW) == (
        FileTouched("src/parser.py", "read_part")
    )
    small = (
        "[File: /repo/setup.py (3 lines total)]\n1:from setuptools import setup\n2:\n3:setup()\n"
    )
    assert one("open", {"path": "setup.py"}, small) == FileTouched("setup.py", "read")
    assert facts("open", {"path": "nope.py"}, "Error: File nope.py not found") == ()
    assert one("goto", {"line_number": 101}, WINDOW) == (
        FileTouched("/repo/src/parser.py", "read_part")
    )
    created = "[File: /repo/reproduce.py (1 lines total)]\n1:\n"
    assert one("create", {"filename": "reproduce.py"}, created) == (
        FileTouched("reproduce.py", "created")
    )
    assert facts("find_file", {"file_name": "parser.py"}, 'Found 1 matches for "parser.py"') == ()
    assert facts("search_dir", {"search_term": "parse("}, 'No matches found for "parse("') == ()


def test_swe_agent_edit_names_its_file_by_the_window_it_prints() -> None:
    replace = {"start_line": 102, "end_line": 102, "replacement_text": "    return text.split(',')"}
    applied = "File updated. Please review the changes and make sure they are correct.\n" + WINDOW
    assert one("edit", replace, applied) == FileTouched("/repo/src/parser.py", "edited")
    lint = (
        "Your proposed edit has introduced new syntax error(s). Please read this error message "
        "carefully and then retry editing the file.\nERRORS:\n- E999 IndentationError"
    )
    assert facts("edit", replace, lint) == ()
    assert facts("edit", {"search": "a", "replace": "b"}, "Done.") is None  # which file: unknown
    assert one("insert", {"text": "import re", "line": 1}, applied) == (
        FileTouched("/repo/src/parser.py", "edited")
    )


def test_swe_agent_bash_shows_no_exit_code() -> None:
    assert one("bash", {"command": "ls"}, "OBSERVATION:\nsrc\nsetup.py") == CommandRan("ls", "ok")
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/repo/reproduce.py", line 3, in <module>\n'
        "    parse(None)\n"
        "AttributeError: 'NoneType' object has no attribute 'split'"
    )
    assert one("bash", {"command": "python reproduce.py"}, traceback) == CommandRan(
        "python reproduce.py",
        "error",
        (
            'File "/repo/reproduce.py", line 3, in <module>',
            "AttributeError: 'NoneType' object has no attribute 'split'",
        ),
    )
    slow = "The command 'pytest' was cancelled because it took more than 300 seconds."
    assert ran("bash", {"command": "pytest"}, slow).outcome == "timed out"
    bad = "Your bash command contained syntax errors and was NOT executed. Please fix them."
    assert one("bash", {"command": "echo 'x"}, bad) == CommandRan("echo 'x", "not run")


def test_mini_swe_agent_return_codes() -> None:
    tagged = "<returncode>1</returncode>\n<output>\n" + PYTEST_FAILING + "</output>"
    assert one("bash", {"command": "pytest"}, tagged) == CommandRan(
        "pytest", "exit 1", PYTEST_ERRORS, ("tests/test_calc.py::test_divide",)
    )
    as_json = '{"returncode": 0, "output": "3 passed in 0.02s\\n"}'
    assert one("bash", {"command": "pytest -q"}, as_json) == CommandRan(
        "pytest -q", "exit 0", (), ()
    )


# -- Codex ---------------------------------------------------------------------------------

GO_FAILING = """\
--- FAIL: TestParse (0.00s)
    parse_test.go:14: got [a,b], want [a b]
FAIL
FAIL\texample.com/parse\t0.004s
FAIL
"""
CARGO_FAILING = """\
running 2 tests
test tests::adds ... ok
test tests::divides ... FAILED

failures:

---- tests::divides stdout ----
thread 'tests::divides' panicked at src/lib.rs:12:9:
attempt to divide by zero

failures:
    tests::divides

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: test failed, to rerun pass `--lib`
"""


def codex_json(output: str, code: int) -> str:
    return json.dumps({"output": output, "metadata": {"exit_code": code, "duration_seconds": 0.4}})


def test_codex_shell_reads_the_script_and_the_structured_exit_code() -> None:
    call = {"command": ["bash", "-lc", "go test ./..."], "workdir": "/repo", "timeout_ms": 60000}
    assert one("shell", call, codex_json(GO_FAILING, 1)) == CommandRan(
        "go test ./...", "exit 1", (), ("TestParse",)
    )
    argv = {"command": ["rg", "-n", "fn parse", "src"]}
    assert one("shell", argv, codex_json("src/lib.rs:3:fn parse", 0)) == (
        CommandRan("rg -n 'fn parse' src", "exit 0")
    )
    freeform = "Exit code: 101\nWall time: 1.3 seconds\nOutput:\n" + CARGO_FAILING
    assert ran("shell_command", {"command": "cargo test"}, freeform) == CommandRan(
        "cargo test", "exit 101", (), ("tests::divides",)
    )
    unified = "Chunk ID: 4f2a\nWall time: 0.8 seconds\nProcess exited with code 0\n"
    unified += "Original token count: 12\nOutput:\ntest result: ok. 2 passed; 0 failed; 0 ignored"
    unified += "; 0 measured; 0 filtered out; finished in 0.00s\n"
    assert one("exec_command", {"cmd": "cargo test"}, unified) == (
        CommandRan("cargo test", "exit 0", (), ())
    )
    running = "Chunk ID: 9a\nWall time: 10.0 seconds\nProcess running with session ID 3\nOutput:\n"
    assert one("exec_command", {"cmd": "npm run dev"}, running) == CommandRan(
        "npm run dev", "running"
    )
    slow = codex_json("command timed out after 10000 milliseconds\n", 124)
    assert ran("shell", {"command": ["bash", "-lc", "sleep 60"]}, slow).outcome == "timed out"


PATCH = """\
*** Begin Patch
*** Add File: src/util.py
+def clamp(x, lo, hi):
+    return max(lo, min(x, hi))
*** Update File: src/app.py
@@ def main():
-    run()
+    run(clamp(n, 0, 9))
*** Update File: src/old_name.py
*** Move to: src/new_name.py
@@
-x = 1
+x = 2
*** Delete File: src/dead.py
*** End Patch"""
PATCH_FACTS = (
    FileTouched("src/util.py", "created"),
    FileTouched("src/app.py", "edited"),
    FileTouched("src/old_name.py", "deleted"),
    FileTouched("src/new_name.py", "written"),
    FileTouched("src/dead.py", "deleted"),
)
APPLIED = "Success. Updated the following files:\nA src/util.py\nM src/app.py\n"
APPLIED += "M src/new_name.py\nD src/dead.py\n"


def test_codex_apply_patch_paths_come_from_the_patch() -> None:
    assert facts("apply_patch", {"input": PATCH}, APPLIED) == PATCH_FACTS
    failed = (
        "apply_patch verification failed: Failed to find expected lines in src/app.py:\n    run()"
    )
    assert facts("apply_patch", {"input": PATCH}, failed) == ()
    assert facts("apply_patch", {"input": "no patch here"}, "") is None
    # through the shell: as the one argument, or a heredoc after a cd (the paths' base)
    argv = {"command": ["apply_patch", PATCH]}
    assert facts("shell", argv, codex_json(APPLIED, 0)) == PATCH_FACTS
    heredoc = f"cd pkg && apply_patch <<'EOF'\n{PATCH}\nEOF\n"
    shell = {"command": ["bash", "-lc", heredoc], "workdir": "/repo"}
    assert facts("shell", shell, codex_json(APPLIED, 0)) == tuple(
        FileTouched(f"/repo/pkg/{f.path}", f.action) for f in PATCH_FACTS
    )
    assert facts("shell", shell, codex_json(failed, 1)) == ()
    # opencode's apply_patch takes the same patch as patchText
    assert facts("apply_patch", {"patchText": PATCH}, "Success.") == PATCH_FACTS


def test_codex_update_plan() -> None:
    plan = {
        "explanation": "fix then test",
        "plan": [
            {"step": "Fix clamp", "status": "completed"},
            {"step": "Run cargo test", "status": "in_progress"},
        ],
    }
    assert one("update_plan", plan, "Plan updated") == TodoState(
        (("completed", "Fix clamp"), ("in_progress", "Run cargo test"))
    )


# -- MCP servers ---------------------------------------------------------------------------


def test_mcp_filesystem_whatever_the_server_is_called() -> None:
    head = {"path": "/data/log.txt", "head": 20}
    assert one("mcp__files__read_text_file", head, "first line") == (
        FileTouched("/data/log.txt", "read_part")
    )
    assert one("mcp__my_fs__read_file", {"path": "/data/a.md"}, "# A") == (
        FileTouched("/data/a.md", "read")
    )
    many = {"paths": ["/data/a.md", "/data/gone.md"]}
    result = "/data/a.md:\n# A\n\n---\n/data/gone.md: Error - ENOENT: no such file or directory"
    assert facts("mcp__filesystem__read_multiple_files", many, result) == (
        FileTouched("/data/a.md", "read"),
    )
    assert one(
        "mcp__filesystem__write_file",
        {"path": "/data/b.md", "content": "b"},
        "Successfully wrote to /data/b.md",
    ) == (FileTouched("/data/b.md", "written"))
    edits = {"path": "/data/a.md", "edits": [{"oldText": "# A", "newText": "# B"}]}
    diff = "```diff\n--- /data/a.md\n+++ /data/a.md\n@@ -1 +1 @@\n-# A\n+# B\n```"
    assert one("mcp__filesystem__edit_file", edits, diff) == FileTouched("/data/a.md", "edited")
    assert facts("mcp__filesystem__edit_file", {**edits, "dryRun": True}, diff) == ()
    move = {"source": "/data/a.md", "destination": "/data/archive/a.md"}
    assert facts("mcp__filesystem__move_file", move, "Successfully moved") == (
        FileTouched("/data/a.md", "deleted"),
        FileTouched("/data/archive/a.md", "written"),
    )
    denied = "Access denied - path outside allowed directories: /etc/passwd not in /data"
    assert (
        facts("mcp__filesystem__read_text_file", {"path": "/etc/passwd"}, denied, error=True) == ()
    )
    assert facts("mcp__filesystem__list_directory", {"path": "/data"}, "[FILE] a.md") == ()
    assert (
        facts("mcp__filesystem__create_directory", {"path": "/data/x"}, "Successfully created")
        == ()
    )


def test_mcp_git_changes_are_the_commands_they_stand_for() -> None:
    repo = {"repo_path": "/repo"}
    add = one(
        "mcp__git__git_add",
        {**repo, "files": ["src/a.py", "my file.py"]},
        "Files staged successfully",
    )
    assert add == CommandRan("git add src/a.py 'my file.py'", "ok")
    commit = {**repo, "message": "Fix clamp bounds"}
    assert one(
        "mcp__git__git_commit", commit, "Changes committed successfully with hash 3f9a1c2"
    ) == (CommandRan("git commit -m 'Fix clamp bounds'", "ok"))
    assert one("mcp__git__git_commit", commit, "nothing to commit", error=True) == (
        CommandRan("git commit -m 'Fix clamp bounds'", "error")
    )
    assert one(
        "mcp__git__git_create_branch",
        {**repo, "branch_name": "fix", "base_branch": "main"},
        "Created branch 'fix' from 'main'",
    ) == (CommandRan("git branch fix main", "ok"))
    assert facts("mcp__git__git_status", repo, "Repository status:\nOn branch main") == ()
    assert facts("mcp__github__create_pull_request", {"owner": "o", "repo": "r"}, "{}") is None


# -- files a shell command read, deleted or moved ------------------------------------------


def test_codex_reads_with_the_shell() -> None:
    lines = codex_json("def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n", 0)
    sed = {"command": ["bash", "-lc", "sed -n '1,80p' src/util.py"], "workdir": "/repo"}
    assert facts("shell", sed, lines) == (
        CommandRan("sed -n '1,80p' src/util.py", "exit 0"),
        FileTouched("/repo/src/util.py", "read_part"),
    )
    cat = {"command": ["bash", "-lc", "cd src && cat util.py app.py"]}
    assert facts("shell", cat, lines) == (
        CommandRan("cd src && cat util.py app.py", "exit 0"),
        FileTouched("src/util.py", "read"),
        FileTouched("src/app.py", "read"),
    )
    missing = codex_json("cat: nope.py: No such file or directory\n", 1)
    assert facts("shell", {"command": ["bash", "-lc", "cat nope.py"]}, missing) == (
        CommandRan("cat nope.py", "exit 1"),
    )


@pytest.mark.parametrize(
    ("command", "files"),
    [
        ("rm -f build/out.o", (FileTouched("build/out.o", "deleted"),)),
        ("git rm -q src/dead.py", (FileTouched("src/dead.py", "deleted"),)),
        (
            "git mv src/old.py src/new.py",
            (FileTouched("src/old.py", "deleted"), FileTouched("src/new.py", "written")),
        ),
        (
            "mv notes.md docs/",
            (FileTouched("notes.md", "deleted"), FileTouched("docs/notes.md", "written")),
        ),
        ("head -n 40 README.md", (FileTouched("README.md", "read_part"),)),
        ("git rm --cached secrets.env", ()),  # unstaged, still there
        ("cat src/*.py", ()),  # a pattern names no file
        ("cat app.log | grep ERROR", ()),  # a pipeline: what was read is not certain
        ("cat a.txt > b.txt", ()),
        ("ls -la src", ()),
    ],
)
def test_files_of_a_simple_command_that_ended_well(
    command: str, files: tuple[FileTouched, ...]
) -> None:
    assert facts("Bash", {"command": command}, "") == (CommandRan(command, "exit 0"), *files)
    failed = facts("Bash", {"command": command}, "Exit code 1\nno", error=True)
    assert failed == (CommandRan(command, "exit 1"),)


# -- Gemini CLI ----------------------------------------------------------------------------


def test_gemini_cli_tools() -> None:
    part = {"file_path": "/repo/main.go", "start_line": 10, "end_line": 40}
    assert one("read_file", part, "func main() {") == FileTouched("/repo/main.go", "read_part")
    new = "Successfully created and wrote to new file: /repo/util.go."
    assert one("write_file", {"file_path": "/repo/util.go", "content": "package main"}, new) == (
        FileTouched("/repo/util.go", "created")
    )
    over = "Successfully overwrote file: /repo/util.go."
    assert one("write_file", {"file_path": "/repo/util.go", "content": "package x"}, over) == (
        FileTouched("/repo/util.go", "overwritten")
    )
    change = {"file_path": "/repo/main.go", "old_string": "a", "new_string": "b"}
    modified = "Successfully modified file: /repo/main.go (1 replacements)."
    assert one("replace", change, modified) == FileTouched("/repo/main.go", "edited")
    miss = "Failed to edit, 0 occurrences found for old_string in /repo/main.go. No edits made."
    assert facts("replace", change, miss) == ()
    failing = "Output: " + GO_FAILING + "Exit Code: 1\nProcess Group PGID: 4242"
    assert one("run_shell_command", {"command": "go test ./..."}, failing) == CommandRan(
        "go test ./...", "exit 1", (), ("TestParse",)
    )
    passing = "Output: ok  \texample.com/parse\t0.003s\nProcess Group PGID: 4243"
    assert one("run_shell_command", {"command": "go test ./..."}, passing) == (
        CommandRan("go test ./...", "exit 0", (), ())
    )
    todos = {"todos": [{"description": "Port parse", "status": "cancelled"}]}
    assert one("write_todos", todos, "Successfully updated the todo list.") == TodoState(
        (("cancelled", "Port parse"),)
    )


# -- tools nobody registered ---------------------------------------------------------------


def test_an_unknown_tool_declares_no_facts() -> None:
    assert facts("deploy", {"target": "prod"}, "deployed") is None
    assert facts("lookup_weather", {"city": "Oslo"}, "rain") is None
    assert facts("create_issue", {"title": "bug"}, "#12") is None  # a verb, but no path key
    assert (
        facts("mcp__github__create_or_update_file", {"owner": "o", "repo": "r", "path": "a"})
        is None
    )


def test_a_name_that_says_what_it_did_with_a_common_key() -> None:
    assert one("view_source", {"path": "lib/a.rb"}, "class A") == FileTouched("lib/a.rb", "read")
    assert one("readFile", {"filename": "a.txt", "offset": 5}, "x") == (
        FileTouched("a.txt", "read_part")
    )
    assert one("delete_file", {"path": "tmp.log"}, "deleted") == FileTouched("tmp.log", "deleted")
    assert one("patch_file", {"file_path": "a.c"}, "patched") == FileTouched("a.c", "edited")
    assert facts("delete_file", {"path": "tmp.log"}, "permission denied", error=True) == ()
    assert one("run_in_terminal", {"cmd": "make test"}, "Exit code: 2\nOutput:\nboom") == (
        CommandRan("make test", "exit 2")
    )
    assert one("ShellTool", {"command": "ls"}, "a\nb") == CommandRan("ls", "ok")


def test_a_users_own_tool_after_one_line_of_registration() -> None:
    registry = default_tool_facts().register(
        "deploy", lambda call: [CommandRan(f"deploy {call.input['target']}", "ok")]
    )
    assert registry.recognize(ToolCall("deploy", {"target": "prod"}, "done")) == (
        CommandRan("deploy prod", "ok"),
    )
    # a user's registration wins over a shipped one of the same name
    registry.register("open", lambda call: [FileTouched(call.input["url"], "read")])
    assert registry.recognize(ToolCall("open", {"url": "https://x"}, "")) == (
        FileTouched("https://x", "read"),
    )
    # each call is a fresh registry: the registrations above stayed in that one
    fresh = default_tool_facts()
    assert isinstance(fresh, ToolFacts) and fresh is not registry
    assert fresh.recognize(ToolCall("deploy", {"target": "prod"}, "done")) is None


def test_the_names_registered_by_name() -> None:
    # Claude Code, pi, opencode, SWE-agent, OpenHands, Codex, Gemini CLI, the coding agent's
    # own; MCP and the common keys answer as fallbacks (an MCP tool's name holds the user's
    # own server key)
    assert default_tool_facts().names == {
        "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Bash", "TodoWrite", "Glob",
        "Grep", "LS", "read", "write", "edit", "insert", "bash", "grep", "find", "ls",
        "todowrite", "open", "create", "goto", "scroll_up", "scroll_down", "find_file",
        "search_dir", "search_file", "str_replace_editor", "execute_bash", "task_tracker",
        "shell", "shell_command", "exec_command", "write_stdin", "apply_patch", "update_plan",
        "replace", "run_shell_command", "write_todos",
        "read_file", "write_file", "edit_file", "run_command", "todo_write", "list_files",
        "search_history",
    }  # fmt: skip
    for known in ("Glob", "Grep"):
        assert facts(known, {"pattern": "**/*.py"}, "src/a.py\nsrc/b.py") == ()
    assert facts("write_stdin", {"session_id": 3, "chars": "q"}, "Process exited with code 0") == ()


def test_the_coding_agents_own_names_stay_its_own_and_gemini_keeps_its_keys() -> None:
    own = one(
        "write_file",
        {"path": "src/a.py", "content": "x"},
        "wrote src/a.py (overwrote existing file)",
    )
    assert own == FileTouched("src/a.py", "overwritten")
    assert one("run_command", {"command": "make"}, "ok\n[exit code 0]") == CommandRan(
        "make", "exit 0"
    )
    # Gemini CLI's tools of the same names, told apart by their keys
    gemini = {"file_path": "/repo/util.go", "content": "package main"}
    created = "Successfully created and wrote to new file: /repo/util.go."
    assert one("write_file", gemini, created) == FileTouched("/repo/util.go", "created")
    assert facts("read_file", {"uri": "x"}, "") is None


# -- test runners in command output --------------------------------------------------------

JEST_FAILING = """\
PASS src/format.test.js
FAIL src/sum.test.js
  ● math › adds two numbers

    expect(received).toBe(expected) // Object.is equality

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 7 passed, 8 total
Snapshots:   0 total
Time:        0.912 s
"""
VITEST_FAILING = """\
 ❯ test/sum.test.ts (2 tests | 1 failed) 4ms
   × math > adds two numbers 3ms
   ✓ math > subtracts 1ms

 FAIL  test/sum.test.ts > math > adds two numbers
AssertionError: expected 3 to be 4

 Test Files  1 failed | 3 passed (4)
      Tests  1 failed | 28 passed (29)
"""


@pytest.mark.parametrize(
    ("output", "failing"),
    [
        (PYTEST_FAILING, ("tests/test_calc.py::test_divide",)),
        (GO_FAILING, ("TestParse",)),
        (CARGO_FAILING, ("tests::divides",)),
        (JEST_FAILING, ("math › adds two numbers",)),
        (VITEST_FAILING, ("test/sum.test.ts > math > adds two numbers",)),
        ("   × adds two numbers 3ms\n   ✓ subtracts 1ms\n", ("adds two numbers",)),
        ("FAIL src/sum.test.js\nTest Suites: 1 failed, 1 total\n", ("src/sum.test.js",)),
        ("FAIL\texample.com/parse [build failed]\nFAIL\n", ("example.com/parse",)),
        ("=== 1 error in 0.30s ===", ("1 error",)),
    ],
)
def test_failing_tests_named_by_each_runner(output: str, failing: tuple[str, ...]) -> None:
    for succeeded in (True, False):  # the runner's lines decide, not the exit code
        assert runner_tests(output, succeeded=succeeded) == failing


@pytest.mark.parametrize(
    "output",
    [
        "============================== 12 passed in 0.31s ==============================",
        "....\n4 passed, 1 skipped, 2 warnings in 0.20s",
        "ok  \texample.com/parse\t0.003s\nok  \texample.com/util\t(cached)",
        "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; "
        "finished in 0.00s",
        "PASS src/sum.test.js\nTests:       8 passed, 8 total\nTime: 0.5 s",
        " ✓ test/sum.test.ts (29 tests) 6ms\n Test Files  4 passed (4)\n   Tests  29 passed (29)",
    ],
)
def test_a_passing_run_by_each_runners_summary(output: str) -> None:
    assert runner_tests(output, succeeded=True) == ()
    assert runner_tests(output, succeeded=False) == ()


def test_no_run_and_runs_without_a_summary() -> None:
    assert runner_tests("compiled 3 files", succeeded=True) is None
    assert runner_tests("ok so the cache is warm now", succeeded=True) is None
    assert runner_tests("no tests ran in 0.01s", succeeded=True) is None
    verbose = "=== RUN   TestParse\n--- PASS: TestParse (0.00s)\n"
    assert runner_tests(verbose, succeeded=True) == ()
    assert runner_tests(verbose, succeeded=False) is None  # passes shown, but it ended badly
