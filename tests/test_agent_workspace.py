"""Workspace confinement: paths resolve inside the workspace; escapes are refused by the tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.agent_tools import SECRET, make_tools, run

from agentloop._agent.workspace import Workspace, WorkspaceError

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
