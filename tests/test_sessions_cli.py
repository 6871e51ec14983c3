"""`agentloop sessions list|show|tree|export`, run as a user runs them: in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sessions import CompactionStrategy, NewMessage, open_store, workspace_key

REPO = Path(__file__).resolve().parents[1]
SECRET = "sk-ant-test-SECRET"
LIST_KEYS = {
    "id",
    "parent_id",
    "status",
    "model",
    "workspace",
    "message_count",
    "created_at",
    "updated_at",
}


@dataclass
class Seeded:
    home: Path
    workspace_a: Path
    workspace_b: Path
    older: str
    root: str
    child: str
    tools: str
    root_messages: list[dict[str, Any]]
    tool_messages: list[dict[str, Any]]


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["AGENTLOOP_HOME"] = str(home)
    # The working tree, whatever state the editable install is in.
    env["PYTHONPATH"] = str(REPO)
    env.pop("ANTHROPIC_API_KEY", None)
    env.update(extra)
    return env


def run(
    seeded: Seeded, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentloop", "sessions", *args],
        cwd=cwd or seeded.workspace_a,
        env=env or environment(seeded.home),
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def tool_history() -> list[NewMessage]:
    return [
        NewMessage(role="user", content=[{"type": "text", "text": "list the files"}]),
        NewMessage(
            role="assistant",
            content=[
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"cmd": "ls"}},
            ],
            usage={"input_tokens": 1200, "output_tokens": 40},
        ),
        NewMessage(
            role="user",
            content=[
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": "a.py\nb.py\n``` (sic)",
                }
            ],
        ),
        NewMessage(role="assistant", content=[{"type": "text", "text": "Two files: ```a.py```"}]),
    ]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    base = tmp_path_factory.mktemp("cli")
    home = base / "home"
    workspace_a = base / "project a"
    workspace_b = base / "project-b"
    workspace_a.mkdir()
    workspace_b.mkdir()
    start = datetime.now(UTC).replace(microsecond=0)
    ticks = iter(range(1, 1000))

    def clock() -> datetime:
        # Every session is created within one second: their ids share 6 characters.
        return start + timedelta(milliseconds=next(ticks))

    conversation = [
        NewMessage(
            role="user" if i % 2 == 0 else "assistant",
            content=[{"type": "text", "text": f"message {i}"}],
            token_estimate=3000,
        )
        for i in range(45)
    ]
    with open_store(home / "sessions.db", clock=clock) as store:
        older = store.create_session(
            model="claude-haiku-4-5", workspace=workspace_key(workspace_a), title="older work"
        )
        root = store.create_session(
            model="claude-sonnet-5-5",
            workspace=workspace_key(workspace_a),
            title="refactor the parser",
        )
        store.append_messages(root.id, conversation)
        child = store.transition(
            root.id,
            messages=[
                NewMessage(role="user", content=[{"type": "text", "text": f"kept {i}"}])
                if i % 2 == 0
                else NewMessage(role="assistant", content=[{"type": "text", "text": f"kept {i}"}])
                for i in range(6)
            ],
            strategy="summarize",
            tokens_before=152_310,
            tokens_after=18_204,
            summary="We refactored the parser.",
        )
        tools = store.create_session(
            model="claude-opus-4-1", workspace=workspace_key(workspace_b), title="tools"
        )
        store.append_messages(tools.id, tool_history())
    return Seeded(
        home=home,
        workspace_a=workspace_a,
        workspace_b=workspace_b,
        older=older.id,
        root=root.id,
        child=child.id,
        tools=tools.id,
        root_messages=[m.to_param() for m in conversation],
        tool_messages=[m.to_param() for m in tool_history()],
    )


def test_list_json_defaults_to_the_conversations_of_the_current_workspace(seeded: Seeded) -> None:
    rows = json.loads(ok(run(seeded, "list", "--json")))
    # One row per conversation: the compacted one shows where it continues (its child).
    assert [row["id"] for row in rows] == [seeded.child, seeded.older]
    for row in rows:
        assert row.keys() >= LIST_KEYS | {"root_id", "generations", "sessions"}
        assert row["workspace"] == str(seeded.workspace_a.resolve())
    by_id = {row["id"]: row for row in rows}
    assert by_id[seeded.child]["root_id"] == seeded.root
    assert by_id[seeded.child]["generations"] == 1 and by_id[seeded.child]["sessions"] == 2
    assert by_id[seeded.older]["root_id"] == seeded.older
    assert by_id[seeded.older]["generations"] == 0
    assert datetime.fromisoformat(by_id[seeded.child]["created_at"]).tzinfo is not None


def test_list_all_generations_shows_every_session(seeded: Seeded) -> None:
    rows = json.loads(ok(run(seeded, "list", "--all-generations", "--json")))
    assert [row["id"] for row in rows] == [seeded.child, seeded.root, seeded.older]
    by_id = {row["id"]: row for row in rows}
    assert by_id[seeded.root]["status"] == "compacted"
    assert by_id[seeded.root]["message_count"] == 45
    assert by_id[seeded.child]["parent_id"] == seeded.root
    lines = ok(run(seeded, "list", "--all-generations")).splitlines()
    assert lines[0].split() == ["ID", "PARENT", "STATUS", "MSGS", "UPDATED", "MODEL", "TITLE"]
    root_row = next(line for line in lines if line.startswith(seeded.root[:8]))
    assert "compacted" in root_row and "45" in root_row and "refactor the parser" in root_row


def test_list_all_workspace_and_limit(seeded: Seeded) -> None:
    everything = json.loads(ok(run(seeded, "list", "--all", "--json")))
    assert {row["id"] for row in everything} == {seeded.older, seeded.child, seeded.tools}
    other = json.loads(ok(run(seeded, "list", "--workspace", str(seeded.workspace_b), "--json")))
    assert [row["id"] for row in other] == [seeded.tools]
    limited = json.loads(ok(run(seeded, "list", "--all", "--limit", "1", "--json")))
    assert [row["id"] for row in limited] == [seeded.tools]
    table = ok(run(seeded, "list", "--all", "--limit", "1")).splitlines()
    assert table[-1] == "(1 most recent shown; --limit 0 shows all)"


def test_list_table_for_people(seeded: Seeded) -> None:
    lines = ok(run(seeded, "list")).splitlines()
    assert lines[0].split() == ["ID", "MSGS", "GEN", "UPDATED", "MODEL", "TITLE"]
    child_row = next(line for line in lines if line.startswith(seeded.child[:8]))
    assert child_row.split()[1:3] == ["6", "2"]  # six messages, second generation
    assert "refactor the parser" in child_row
    assert not any(line.startswith(seeded.root[:8]) for line in lines)
    # The bare command lists too.
    assert ok(run(seeded)).splitlines()[0] == lines[0]


def test_list_of_an_empty_workspace(seeded: Seeded, tmp_path: Path) -> None:
    assert json.loads(ok(run(seeded, "list", "--json", cwd=tmp_path))) == []
    assert "No sessions" in ok(run(seeded, "list", cwd=tmp_path))


def test_show_json_has_messages_as_sent_and_compaction(seeded: Seeded) -> None:
    data = json.loads(ok(run(seeded, "show", seeded.root[:12], "--json")))
    assert data.keys() >= LIST_KEYS
    assert data["id"] == seeded.root
    assert [{"role": m["role"], "content": m["content"]} for m in data["messages"]] == (
        seeded.root_messages
    )
    compaction = data["compaction"]
    assert compaction["compaction_count"] == 1
    assert compaction["summary"] == "We refactored the parser."
    [entry] = compaction["history"]
    assert entry["parent_id"] == seeded.root and entry["child_id"] == seeded.child
    assert (entry["tokens_before"], entry["tokens_after"]) == (152_310, 18_204)
    tools = json.loads(ok(run(seeded, "show", seeded.tools, "--json")))
    assert [{"role": m["role"], "content": m["content"]} for m in tools["messages"]] == (
        seeded.tool_messages
    )
    assert tools["messages"][1]["usage"] == {"input_tokens": 1200, "output_tokens": 40}


def test_show_for_people(seeded: Seeded) -> None:
    out = ok(run(seeded, "show", seeded.tools[:10], cwd=seeded.workspace_b))
    assert seeded.tools in out
    assert "list the files" in out
    assert "bash" in out and "toolu_01" in out and "a.py" in out
    root = ok(run(seeded, "show", seeded.root))
    assert f"continues in {seeded.child[:8]}" in root


def test_tree_without_id_shows_the_latest_lineage_of_the_workspace(seeded: Seeded) -> None:
    lines = ok(run(seeded, "tree")).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(seeded.root[:8])
    assert "45 msgs" in lines[0] and "compacted" in lines[0]
    # A chain is a list: the child is not indented under its parent.
    assert lines[1].startswith(seeded.child[:8])
    assert "6 msgs" in lines[1]
    # (Stored without the figures' sources: nothing vouches the API counted them.)
    assert "← compacted 45 → 6 msgs (~152,310 → ~18,204 tokens)" in lines[1]
    assert lines[1].endswith("◀ resume continues here")


def test_tree_json_is_nested(seeded: Seeded) -> None:
    tree = json.loads(ok(run(seeded, "tree", seeded.child, "--json")))
    assert tree["id"] == seeded.root
    assert tree["compaction"] is None
    [child] = tree["children"]
    assert child["id"] == seeded.child and child["children"] == []
    assert child["compaction"]["messages_before"] == 45
    assert child["resume"] is True and tree["resume"] is False


def test_export_markdown_and_json(seeded: Seeded) -> None:
    markdown = ok(run(seeded, "export", seeded.tools, cwd=seeded.workspace_b))
    assert markdown.startswith("# tools\n")
    assert "## #1 User" in markdown and "## #2 Assistant" in markdown
    assert '"cmd": "ls"' in markdown
    # Backticks in a tool result cannot close its fence: the fence is longer.
    assert "````\na.py\nb.py\n``` (sic)\n````" in markdown
    exported = json.loads(ok(run(seeded, "export", seeded.tools, "--format", "json")))
    shown = json.loads(ok(run(seeded, "show", seeded.tools, "--json")))
    # The conversation, session by session; this one has one session.
    (session,) = exported["sessions"]
    assert session["id"] == shown["id"] and exported["messages"] == len(shown["messages"])
    assert [m["content"] for m in session["messages"]] == [m["content"] for m in shown["messages"]]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("show", "../x"), "invalid session id '../x'"),
        (("show", ""), "invalid session id ''"),
        (("show", "a b c d"), "invalid session id 'a b c d'"),
        (("export", "zzzzzzzzzzzzzzzzzzzzzzzzzz"), "no session"),
        (("tree", "../../etc/passwd"), "invalid session id"),
        (("show", "abc"), "at least 4"),
        (("list", "--limit", "x"), "invalid limit"),
    ],
)
def test_user_errors_are_one_line_with_exit_2(
    seeded: Seeded, args: tuple[str, ...], needle: str
) -> None:
    result = run(seeded, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("agentloop: error: ")
    assert result.stderr.count("\n") == 1
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_ambiguous_prefix_lists_candidates(seeded: Seeded, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = ["abcd" + tail for tail in ("0000000000000000000000", "1111111111111111111111")]
    with open_store(home / "sessions.db") as store:
        for session_id in ids:
            store.create_session(
                model="m", workspace=workspace_key(tmp_path), session_id=session_id
            )
    result = run(seeded, "show", "abcd", env=environment(home))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "ambiguous" in result.stderr
    for session_id in ids:
        assert session_id[:8] in result.stderr


def test_console_script(seeded: Seeded) -> None:
    script = Path(sys.executable).parent / "agentloop"
    assert script.exists()
    env = environment(seeded.home)
    listed = subprocess.run(
        [str(script), "sessions", "list", "--all", "--json"],
        cwd=seeded.workspace_a,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 3  # conversations
    helped = subprocess.run(
        [str(script), "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0 and "sessions" in helped.stdout


def test_sessions_commands_do_not_import_the_sdk(seeded: Seeded) -> None:
    code = (
        "import sys\n"
        "from agentloop._cli.main import main\n"
        "for argv in (['sessions', 'list', '--all', '--json'], ['sessions', 'tree', '--json']):\n"
        "    assert main(argv) == 0\n"
        "sdk = ('anthropic', 'httpx', 'httpx2')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in sdk)\n"
        "print(loaded, file=sys.stderr)\n"
        "sys.exit(1 if loaded else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=seeded.workspace_a,
        env=environment(seeded.home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_no_api_key_reaches_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    home = tmp_path / "home"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with open_store(home / "sessions.db") as store:
        session = store.create_session(model="m", workspace=workspace_key(workspace))
        store.append_messages(session.id, tool_history())
        store.compact(session.id, CompactionStrategy.SUMMARIZE, summary="listed two files")
        env = environment(home, ANTHROPIC_API_KEY=SECRET)
        for args in (
            ["list", "--json"],
            ["show", session.id],
            ["tree"],
            ["export", session.id, "--format", "json"],
        ):
            result = subprocess.run(
                [sys.executable, "-m", "agentloop", "sessions", *args],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert result.returncode == 0, result.stderr
            assert SECRET not in result.stdout
        files = [p for p in home.iterdir() if p.name.startswith("sessions.db")]
        assert any(p.name.endswith("-wal") for p in files)  # checked while the WAL holds data
        for path in files:
            assert SECRET.encode() not in path.read_bytes(), path


def test_store_option_overrides_the_default_location(seeded: Seeded, tmp_path: Path) -> None:
    store = str(seeded.home / "sessions.db")
    elsewhere = environment(tmp_path / "empty-home")
    before = json.loads(ok(run(seeded, "--store", store, "list", "--all", "--json", env=elsewhere)))
    after = json.loads(ok(run(seeded, "list", "--all", "--json", "--store", store, env=elsewhere)))
    assert len(before) == len(after) == 3
    assert ok(run(seeded, "list", "--all", env=elsewhere)) == "No sessions yet.\n"
    # Read-only: listing an empty place creates nothing there.
    assert not (tmp_path / "empty-home").exists()
    variable = environment(tmp_path / "empty-home", AGENTLOOP_STORE=store)
    assert len(json.loads(ok(run(seeded, "list", "--all", "--json", env=variable)))) == 3
