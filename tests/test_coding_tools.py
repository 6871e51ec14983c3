"""The coding agent's tools: workspace confinement, each tool's results and errors, consent."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import Tool, ToolResult
from agentloop._agent import tools as ct
from agentloop._agent.tools import (
    TodoList,
    ToolHistory,
    ToolStateError,
    Workspace,
    WorkspaceError,
    always_allow,
    coding_tools,
    never_allow,
    run_command_tool,
    terminal_consent,
)
from agentloop._core.tool import tool_definition

SECRET = "top-secret-outside-the-workspace"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text(SECRET + "\n")
    return directory


def make_tools(
    root: Path, approve: Callable[[str], bool] = always_allow, todos: TodoList | None = None
) -> dict[str, Tool]:
    tools = coding_tools(root, approve=approve, todos=todos if todos is not None else TodoList())
    return {tool.name: tool for tool in tools}


def run(tools: dict[str, Tool], name: str, **tool_input: Any) -> ToolResult:
    return tools[name].run(tool_input)


# --------------------------------------------------------------------------------- Workspace


def test_resolve_relative_and_absolute_inside(ws: Path) -> None:
    workspace = Workspace(ws)
    assert workspace.resolve("a/b.txt") == ws.resolve() / "a" / "b.txt"
    assert workspace.resolve(str(ws / "c.txt")) == ws.resolve() / "c.txt"
    assert workspace.resolve("a/../b.txt") == ws.resolve() / "b.txt"
    assert workspace.resolve(".") == ws.resolve()
    assert workspace.relative(workspace.resolve("a/b.txt")) == "a/b.txt"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "a/../../outside/secret.txt", ".."])
def test_dotdot_escape_refused(ws: Path, outside: Path, path: str) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        Workspace(ws).resolve(path)
    result = run(make_tools(ws), "read_file", path=path)
    assert result.is_error
    assert SECRET not in result.content


def test_absolute_path_outside_refused(ws: Path, outside: Path) -> None:
    for path in (str(outside / "secret.txt"), "/etc/passwd"):
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            Workspace(ws).resolve(path)
    result = run(make_tools(ws), "write_file", path=str(outside / "new.txt"), content="x")
    assert result.is_error
    assert not (outside / "new.txt").exists()


def test_symlinked_directory_escape_refused(ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceError, match="symlink"):
        Workspace(ws).resolve("link/secret.txt")
    tools = make_tools(ws)
    read = run(tools, "read_file", path="link/secret.txt")
    assert read.is_error and SECRET not in read.content
    write = run(tools, "write_file", path="link/secret.txt", content="overwritten")
    assert write.is_error
    assert (outside / "secret.txt").read_text() == SECRET + "\n"
    edit = run(tools, "edit_file", path="link/secret.txt", old_string="top", new_string="x")
    assert edit.is_error
    assert (outside / "secret.txt").read_text() == SECRET + "\n"


def test_symlinked_file_escape_refused(ws: Path, outside: Path) -> None:
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    result = run(make_tools(ws), "read_file", path="leak.txt")
    assert result.is_error
    assert "symlink" in result.content
    assert SECRET not in result.content


def test_dangling_symlink_pointing_outside_refused_for_write(ws: Path, outside: Path) -> None:
    (ws / "new.txt").symlink_to(outside / "created.txt")
    result = run(make_tools(ws), "write_file", path="new.txt", content="x")
    assert result.is_error
    assert not (outside / "created.txt").exists()


def test_symlink_inside_workspace_allowed(ws: Path) -> None:
    (ws / "real.txt").write_text("hello\n")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    result = run(make_tools(ws), "read_file", path="alias.txt")
    assert not result.is_error
    assert "hello" in result.content


def test_tilde_means_home_and_is_refused_outside(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text(SECRET)
    monkeypatch.setenv("HOME", str(home))
    for path in ("~", "~/notes.txt"):
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            Workspace(ws).resolve(path)
    result = run(make_tools(ws), "read_file", path="~/notes.txt")
    assert result.is_error and SECRET not in result.content
    # When the workspace is the home directory, ~ is simply inside it.
    monkeypatch.setenv("HOME", str(ws))
    assert Workspace(ws).resolve("~/a.txt") == ws.resolve() / "a.txt"


def test_invalid_paths_and_roots(ws: Path) -> None:
    workspace = Workspace(ws)
    for path in ("", "   ", "a\x00b"):
        with pytest.raises(WorkspaceError):
            workspace.resolve(path)
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace(ws / "missing")
    (ws / "file").write_text("")
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(ws / "file")


# --------------------------------------------------------------------------------- read_file


def test_read_file_numbers_lines_like_cat_n(ws: Path) -> None:
    (ws / "a.py").write_text("first\n\tsecond\nthird")
    result = run(make_tools(ws), "read_file", path="a.py")
    assert result == ToolResult("     1\tfirst\n     2\t\tsecond\n     3\tthird")


def test_read_file_offset_and_limit_say_how_to_continue(ws: Path) -> None:
    (ws / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = run(make_tools(ws), "read_file", path="a.txt", offset=4, limit=3)
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "lines 4-6 of 10" in lines[3] and "offset=7" in lines[3]
    assert "truncated" not in result.content  # the model asked for 3 lines; nothing was cut
    tail = run(make_tools(ws), "read_file", path="a.txt", offset=9)
    assert tail.content == "     9\tline 9\n    10\tline 10"


def test_read_file_caps_lines(ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    result = run(make_tools(ws), "read_file", path="big.txt")
    body, notice = result.content.rsplit("\n", 1)
    assert len(body.splitlines()) == ct.READ_MAX_LINES
    assert "truncated" in notice and "of 2500" in notice and "offset=2001" in notice
    asked = run(make_tools(ws), "read_file", path="big.txt", limit=5000)
    assert len(asked.content.splitlines()) == ct.READ_MAX_LINES + 1


def test_read_file_caps_characters_and_cuts_long_lines(ws: Path) -> None:
    (ws / "wide.txt").write_text(("x" * 1000 + "\n") * 300 + "y" * 1_000_000 + "\n")
    tools = make_tools(ws)
    result = run(tools, "read_file", path="wide.txt")
    assert len(result.content) <= ct.READ_MAX_CHARS + 300
    assert "truncated" in result.content and "of 301" in result.content
    last = run(tools, "read_file", path="wide.txt", offset=301)
    assert "line cut" in last.content
    assert len(last.content) < ct.READ_MAX_LINE_CHARS + 100


@pytest.mark.parametrize(
    ("setup", "tool_input", "message"),
    [
        (None, {"path": "missing.txt"}, "file not found"),
        ("dir", {"path": "d"}, "is a directory"),
        ("bin", {"path": "img.bin"}, "binary"),
        ("text", {"path": "t.txt", "offset": 5}, "past the end"),
        ("text", {"path": "t.txt", "offset": 0}, "at least 1"),
        ("text", {"path": "t.txt", "limit": "ten"}, "integer"),
        ("text", {"path": "t.txt", "offset": True}, "integer"),
        ("text", {}, "missing required parameter 'path'"),
        ("text", {"path": 3}, "must be a string"),
    ],
)
def test_read_file_errors(
    ws: Path, setup: str | None, tool_input: dict[str, Any], message: str
) -> None:
    (ws / "d").mkdir()
    (ws / "img.bin").write_bytes(b"\x89PNG\r\n\x00\x00\x01")
    (ws / "t.txt").write_text("one\ntwo\n")
    result = make_tools(ws)["read_file"].run(tool_input)
    assert result.is_error
    assert message in result.content


def test_read_empty_file(ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    result = run(make_tools(ws), "read_file", path="empty.txt")
    assert not result.is_error and "empty" in result.content


# --------------------------------------------------------------------------------- write_file


def test_write_file_creates_parents_and_reports_bytes(ws: Path) -> None:
    tools = make_tools(ws)
    result = run(tools, "write_file", path="src/pkg/mod.py", content="café\n")
    assert result == ToolResult("Wrote 6 bytes to src/pkg/mod.py (new file).")
    assert (ws / "src/pkg/mod.py").read_bytes() == "café\n".encode()
    again = run(tools, "write_file", path="src/pkg/mod.py", content="")
    assert "0 bytes" in again.content and "overwrote" in again.content
    assert (ws / "src/pkg/mod.py").read_bytes() == b""


def test_write_file_keeps_newlines_exactly(ws: Path) -> None:
    run(make_tools(ws), "write_file", path="crlf.txt", content="a\r\nb\n")
    assert (ws / "crlf.txt").read_bytes() == b"a\r\nb\n"


def test_write_file_errors(ws: Path) -> None:
    (ws / "d").mkdir()
    tools = make_tools(ws)
    assert "directory" in run(tools, "write_file", path="d", content="x").content
    assert run(tools, "write_file", path=".", content="x").is_error
    missing = run(tools, "write_file", path="a.txt")
    assert missing.is_error and "content" in missing.content
    wrong = run(tools, "write_file", path="a.txt", content=["x"])
    assert wrong.is_error and "string" in wrong.content
    assert not (ws / "a.txt").exists()


# --------------------------------------------------------------------------------- edit_file


def test_edit_file_replaces_unique_string(ws: Path) -> None:
    (ws / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    result = run(
        make_tools(ws), "edit_file", path="m.py", old_string="return 2", new_string="return 3"
    )
    assert result == ToolResult("Edited m.py: replaced 1 occurrence (first at line 5).")
    assert (ws / "m.py").read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"


def test_edit_file_ambiguous_needs_replace_all(ws: Path) -> None:
    (ws / "m.py").write_text("x = 1\nx = 2\nx = 3\n")
    tools = make_tools(ws)
    result = run(tools, "edit_file", path="m.py", old_string="x =", new_string="y =")
    assert result.is_error and "3 times" in result.content and "replace_all" in result.content
    assert (ws / "m.py").read_text() == "x = 1\nx = 2\nx = 3\n"
    done = run(
        tools, "edit_file", path="m.py", old_string="x =", new_string="y =", replace_all=True
    )
    assert not done.is_error and "3 occurrences" in done.content
    assert (ws / "m.py").read_text() == "y = 1\ny = 2\ny = 3\n"


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        ({"path": "m.py", "old_string": "absent", "new_string": "x"}, "not found"),
        ({"path": "m.py", "old_string": "", "new_string": "x"}, "must not be empty"),
        ({"path": "m.py", "old_string": "alpha", "new_string": "alpha"}, "identical"),
        ({"path": "nope.py", "old_string": "a", "new_string": "b"}, "file not found"),
        ({"path": "bin.dat", "old_string": "a", "new_string": "b"}, "binary"),
        ({"path": "latin1.txt", "old_string": "a", "new_string": "b"}, "UTF-8"),
        ({"path": "m.py", "old_string": "alpha"}, "new_string"),
        (
            {"path": "m.py", "old_string": "alpha", "new_string": "b", "replace_all": "yes"},
            "true or false",
        ),
    ],
)
def test_edit_file_errors(ws: Path, tool_input: dict[str, Any], message: str) -> None:
    (ws / "m.py").write_text("alpha beta\n")
    (ws / "bin.dat").write_bytes(b"a\x00b")
    (ws / "latin1.txt").write_bytes("a café".encode("latin-1"))
    result = make_tools(ws)["edit_file"].run(tool_input)
    assert result.is_error
    assert message in result.content
    assert (ws / "m.py").read_text() == "alpha beta\n"


# --------------------------------------------------------------------------------- list_files


@pytest.fixture
def tree(ws: Path) -> Path:
    for rel in (
        "setup.py",
        "README.md",
        "src/app/__init__.py",
        "src/app/main.py",
        "src/app/ui.tsx",
        "src/app/ui.ts",
        "tests/test_main.py",
        ".git/config",
        "src/app/__pycache__/main.cpython-311.pyc",
        ".venv/lib/site.py",
        "web/node_modules/pkg/index.js",
    ):
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {rel}\nneedle in {rel}\n")
    return ws


def test_list_files_sorted_relative_and_skips_tool_dirs(tree: Path) -> None:
    result = run(make_tools(tree), "list_files")
    assert result.content.splitlines() == [
        "README.md",
        "setup.py",
        "src/app/__init__.py",
        "src/app/main.py",
        "src/app/ui.ts",
        "src/app/ui.tsx",
        "tests/test_main.py",
    ]


def test_list_files_glob_semantics(tree: Path) -> None:
    tools = make_tools(tree)
    assert run(tools, "list_files", pattern="*.py").content == "setup.py"
    assert run(tools, "list_files", pattern="**/*.py").content.splitlines() == [
        "setup.py",
        "src/app/__init__.py",
        "src/app/main.py",
        "tests/test_main.py",
    ]
    assert run(tools, "list_files", pattern="**/*.{ts,tsx}").content.splitlines() == [
        "src/app/ui.ts",
        "src/app/ui.tsx",
    ]
    # pattern is relative to path; results stay relative to the workspace
    assert run(tools, "list_files", pattern="*.py", path="src/app").content.splitlines() == [
        "src/app/__init__.py",
        "src/app/main.py",
    ]


def test_list_files_caps_count(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        (ws / f"f{i:02d}.txt").write_text("")
    monkeypatch.setattr(ct, "LIST_MAX_FILES", 10)
    lines = run(make_tools(ws), "list_files").content.splitlines()
    assert lines[:10] == [f"f{i:02d}.txt" for i in range(10)]
    assert len(lines) == 11 and "10 of 30" in lines[10]


def test_list_files_errors_and_no_match(tree: Path, outside: Path) -> None:
    tools = make_tools(tree)
    none = run(tools, "list_files", pattern="**/*.rs")
    assert not none.is_error and "No files match" in none.content
    assert "not found" in run(tools, "list_files", path="nowhere").content
    assert "not a directory" in run(tools, "list_files", path="setup.py").content
    escaped = run(tools, "list_files", path="../outside")
    assert escaped.is_error and "secret.txt" not in escaped.content
    assert run(tools, "list_files", pattern="/etc/*").is_error


def test_list_files_does_not_follow_symlinked_dirs_out(ws: Path, outside: Path) -> None:
    (ws / "a.txt").write_text("")
    (ws / "link").symlink_to(outside, target_is_directory=True)
    assert run(make_tools(ws), "list_files").content == "a.txt"


# --------------------------------------------------------------------------------- grep


def test_grep_reports_path_line_text(tree: Path) -> None:
    result = run(make_tools(tree), "grep", pattern=r"needle in .*main")
    assert result.content.splitlines() == [
        "src/app/main.py:2: needle in src/app/main.py",
        "tests/test_main.py:2: needle in tests/test_main.py",
    ]


def test_grep_glob_path_and_case(tree: Path) -> None:
    tools = make_tools(tree)
    by_name = run(tools, "grep", pattern="needle", glob="*.tsx")
    assert by_name.content == "src/app/ui.tsx:2: needle in src/app/ui.tsx"
    by_path = run(tools, "grep", pattern="needle", glob="src/**/*.py")
    assert [line.split(":")[0] for line in by_path.content.splitlines()] == [
        "src/app/__init__.py",
        "src/app/main.py",
    ]
    one_file = run(tools, "grep", pattern="needle", path="setup.py")
    assert one_file.content == "setup.py:2: needle in setup.py"
    assert "No matches" in run(tools, "grep", pattern="NEEDLE", path="setup.py").content
    insensitive = run(tools, "grep", pattern="NEEDLE", path="setup.py", case_insensitive=True)
    assert insensitive.content == "setup.py:2: needle in setup.py"


def test_grep_skips_binary_tool_dirs_and_outside_symlinks(ws: Path, outside: Path) -> None:
    (ws / "data.bin").write_bytes(b"needle\x00\x01")
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "x.js").write_text("needle\n")
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    (ws / "ok.txt").write_text("a needle\n")
    tools = make_tools(ws)
    assert run(tools, "grep", pattern="needle").content == "ok.txt:1: a needle"
    leaked = run(tools, "grep", pattern="secret")
    assert SECRET not in leaked.content


def test_grep_caps_matches_and_long_lines(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "many.txt").write_text("hit\n" * 50 + "z" * 5000 + "hit" + "z" * 5000 + "\n")
    monkeypatch.setattr(ct, "GREP_MAX_MATCHES", 20)
    lines = run(make_tools(ws), "grep", pattern="hit").content.splitlines()
    assert len(lines) == 21 and "stopped after 20 matches" in lines[-1]
    monkeypatch.setattr(ct, "GREP_MAX_MATCHES", 200)
    long_line = run(make_tools(ws), "grep", pattern="zhitz").content
    assert "hit" in long_line and len(long_line) < ct.GREP_MAX_LINE_CHARS + 50


def test_grep_errors(ws: Path) -> None:
    tools = make_tools(ws)
    invalid = run(tools, "grep", pattern="(unclosed")
    assert invalid.is_error and "invalid regular expression" in invalid.content
    assert run(tools, "grep", pattern="x", path="missing").is_error
    assert run(tools, "grep", pattern="x", path="../").is_error
    assert run(tools, "grep").is_error


# --------------------------------------------------------------------------------- run_command


def _process_gone(pid: int, wait: float = 5.0) -> bool:
    """Whether ``pid`` has exited (a zombie counts: it no longer runs)."""
    give_up = time.monotonic() + wait
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        if time.monotonic() > give_up:
            return False
        time.sleep(0.05)


def test_run_command_output_exit_code_and_cwd(ws: Path) -> None:
    tools = make_tools(ws)
    ok = run(tools, "run_command", command="pwd; echo to-stderr >&2")
    assert ok == ToolResult(f"{ws.resolve()}\nto-stderr\n[exit code 0]")
    failed = run(tools, "run_command", command="echo partial; exit 3")
    assert failed == ToolResult("partial\n[exit code 3]", is_error=True)
    quiet = run(tools, "run_command", command="true")
    assert quiet.content == "(no output)\n[exit code 0]"


def test_run_command_truncates_keeping_head_and_tail(ws: Path) -> None:
    tool = run_command_tool(Workspace(ws), always_allow, max_output_bytes=1000)
    result = tool.run({"command": "echo START; seq 1 20000; echo END"})
    assert not result.is_error
    assert result.content.startswith("START\n1\n2\n")
    assert result.content.endswith("20000\nEND\n[exit code 0]")
    assert "bytes of output omitted" in result.content
    assert len(result.content) < 1200


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_run_command_timeout_kills_process_group(ws: Path) -> None:
    tools = make_tools(ws)
    result = run(
        tools,
        "run_command",
        command="sleep 60 & echo $! > bg.pid; echo started; sleep 60",
        timeout=1,
    )
    assert result.is_error
    assert "started" in result.content and "timed out after 1 s" in result.content
    assert _process_gone(int((ws / "bg.pid").read_text()))


def test_run_command_returns_when_background_job_keeps_output_open(ws: Path) -> None:
    # The background job prints later and then lingers: reading its output until the deadline
    # (instead of returning soon after the command exits) would capture "late".
    result = run(
        make_tools(ws),
        "run_command",
        command="(sleep 4; echo late; sleep 30) & echo $! > bg.pid; echo done",
        timeout=10,
    )
    try:
        assert not result.is_error
        assert result.content.startswith("done\n")
        assert "late" not in result.content
        assert "background processes" in result.content
        assert result.content.endswith("[exit code 0]")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(int((ws / "bg.pid").read_text())), signal.SIGKILL)


@pytest.mark.parametrize("timeout", [0, -1, 601, "soon", True])
def test_run_command_rejects_bad_timeouts_before_asking(ws: Path, timeout: object) -> None:
    asked: list[str] = []

    def approve(command: str) -> bool:
        asked.append(command)
        return True

    tools = make_tools(ws, approve=approve)
    result = run(tools, "run_command", command="touch ran", timeout=timeout)
    assert result.is_error and "timeout" in result.content
    assert asked == [] and not (ws / "ran").exists()


def test_run_command_input_errors(ws: Path) -> None:
    tools = make_tools(ws)
    assert run(tools, "run_command").is_error
    assert run(tools, "run_command", command="  ").is_error
    assert tools["run_command"].run(["ls"]).is_error  # type: ignore[arg-type]


# --------------------------------------------------------------------------------- consent


def test_declined_command_is_not_run(ws: Path) -> None:
    asked: list[str] = []

    def deny(command: str) -> bool:
        asked.append(command)
        return False

    result = run(make_tools(ws, approve=deny), "run_command", command="touch ran")
    assert result == ToolResult("the user declined to run: touch ran", is_error=True)
    assert asked == ["touch ran"]
    assert not (ws / "ran").exists()


def test_never_allow_explains_how_to_consent(ws: Path) -> None:
    result = run(make_tools(ws, approve=never_allow), "run_command", command="touch ran")
    assert result.is_error
    assert "--yes" in result.content and "terminal" in result.content
    assert "touch ran" in result.content
    assert not (ws / "ran").exists()


def test_always_allow_runs(ws: Path) -> None:
    result = run(make_tools(ws, approve=always_allow), "run_command", command="touch ran")
    assert not result.is_error
    assert (ws / "ran").exists()


def test_failing_approver_means_not_run(ws: Path) -> None:
    def broken(command: str) -> bool:
        raise OSError("no tty")

    result = run(make_tools(ws, approve=broken), "run_command", command="touch ran")
    assert result.is_error and "no tty" in result.content
    assert not (ws / "ran").exists()


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


# --------------------------------------------------------------------------------- todos


TODOS = [
    {"content": "read the code", "status": "completed", "id": "1"},
    {"content": "fix the bug", "status": "in_progress", "id": "2"},
    {"content": "run the tests", "status": "pending"},
]
RENDERED = "## Todo list\n- [x] read the code\n- [ ] (in progress) fix the bug\n- [ ] run the tests"


def test_todo_write_replaces_list_and_renders(ws: Path) -> None:
    todos = TodoList()
    tools = make_tools(ws, todos=todos)
    result = run(tools, "todo_write", todos=TODOS)
    assert result == ToolResult(RENDERED)
    assert todos.render_markdown() == RENDERED
    assert [item.status for item in todos.items] == ["completed", "in_progress", "pending"]
    run(tools, "todo_write", todos=[{"content": "only this", "status": "pending"}])
    assert todos.render_markdown() == "## Todo list\n- [ ] only this"
    assert run(tools, "todo_write", todos=[]).content == "No todos."
    assert todos.items == ()


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        ({}, "missing required parameter 'todos'"),
        ({"todos": "do it"}, "must be a list"),
        ({"todos": ["do it"]}, "todos[0]"),
        ({"todos": [{"status": "pending"}]}, "todos[0].content"),
        ({"todos": [{"content": "  ", "status": "pending"}]}, "must not be empty"),
        ({"todos": [{"content": "x", "status": "done"}]}, "todos[0].status"),
        ({"todos": [{"content": 5, "status": "pending"}]}, "todos[0].content"),
        (
            {"todos": [{"content": "a", "status": "pending", "id": "1"}] * 2},
            "duplicate ids 1",
        ),
    ],
)
def test_todo_write_validates(ws: Path, tool_input: dict[str, Any], message: str) -> None:
    todos = TodoList()
    tool = make_tools(ws, todos=todos)["todo_write"]
    tool.run({"todos": TODOS})
    result = tool.run(tool_input)
    assert result.is_error
    assert message in result.content
    assert todos.render_markdown() == RENDERED  # a rejected call leaves the list alone


def test_todo_write_is_lenient_where_harmless(ws: Path) -> None:
    todos = TodoList()
    result = run(
        make_tools(ws, todos=todos),
        "todo_write",
        todos=[{"content": "two\nlines", "status": "pending", "id": 7, "priority": "high"}],
    )
    assert result.content == "## Todo list\n- [ ] two lines"
    assert todos.items[0].id == "7"


def test_todo_state_round_trips_through_dict() -> None:
    todos = TodoList()
    make_tools(Path.cwd(), todos=todos)["todo_write"].run({"todos": TODOS})
    saved = json.loads(json.dumps(todos.to_dict()))
    assert saved == {"todos": TODOS}
    restored = TodoList.from_dict(saved)
    assert restored.items == todos.items
    assert restored.render_markdown() == RENDERED
    assert TodoList().render_markdown() == "No todos."
    assert TodoList.from_dict(TodoList().to_dict()).items == ()


@pytest.mark.parametrize("data", [{}, {"todos": {}}, {"todos": [{"content": "x"}]}, []])
def test_todo_from_dict_rejects_malformed_state(data: Any) -> None:
    with pytest.raises(ToolStateError):
        TodoList.from_dict(data)


# --------------------------------------------------------------------------------- history


def test_tool_history_renders_last_ten_with_outcome() -> None:
    history = ToolHistory()
    assert history.render_markdown() == "No tool calls yet."
    for i in range(12):
        history.record("read_file", {"path": f"f{i}.py"}, is_error=i == 11)
    text = history.render_markdown()
    lines = text.splitlines()
    assert lines[0] == "## Last 10 tool calls (oldest first)"
    assert lines[1] == "- read_file `f2.py` → ok"
    assert lines[-1] == "- read_file `f11.py` → error"
    assert len(lines) == 11 and "f0.py" not in text and "f1.py" not in text


def test_tool_history_summaries_are_short_single_lines() -> None:
    history = ToolHistory()
    history.record("run_command", {"command": "echo `a`\n" + "x" * 500}, is_error=False)
    history.record("todo_write", {"todos": [{}, {}, {}]}, is_error=False)
    history.record("custom", {"n": 1}, is_error=True)
    summaries = [record.summary for record in history.records]
    assert "\n" not in summaries[0] and "`" not in summaries[0]
    assert len(summaries[0]) <= 80 and summaries[0].endswith("…")
    assert summaries[1:] == ["3 items", '{"n": 1}']


def test_tool_history_round_trips_through_dict() -> None:
    history = ToolHistory()
    history.record("grep", {"pattern": "TODO", "path": "src"}, is_error=False)
    history.record("run_command", {"command": "pytest"}, is_error=True)
    restored = ToolHistory.from_dict(json.loads(json.dumps(history.to_dict())))
    assert restored.records == history.records
    assert restored.render_markdown() == history.render_markdown()
    with pytest.raises(ToolStateError):
        ToolHistory.from_dict({"calls": [{"name": "x"}]})


# --------------------------------------------------------------------------------- the set


def test_coding_tools_are_complete_and_byte_stable(ws: Path) -> None:
    tools = coding_tools(ws, approve=always_allow, todos=TodoList())
    assert [tool.name for tool in tools] == [
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "grep",
        "run_command",
        "todo_write",
    ]
    again = coding_tools(ws, approve=never_allow, todos=TodoList())
    dump = json.dumps([tool_definition(t) for t in tools])
    assert dump == json.dumps([tool_definition(t) for t in again])
    for tool in tools:
        assert isinstance(tool, Tool)
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert set(schema.get("required", [])) <= set(schema["properties"])
        assert 0 < len(tool.description) < 600


@pytest.mark.parametrize("bad_input", [None, [], "path", 3])
def test_no_tool_raises_on_malformed_input(ws: Path, bad_input: Any) -> None:
    for tool in coding_tools(ws, approve=always_allow, todos=TodoList()):
        result = tool.run(bad_input)
        assert result.is_error, tool.name
