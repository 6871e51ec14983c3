"""``agentloop sessions``: listing that fits the terminal, trees that do not staircase, the
Markdown export, delete/prune (asking first), copy between stores, and the demo's clean-up."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentloop._cli import list_commands as listing
from agentloop._cli import transcript
from agentloop._cli.conversation_export import export_conversation
from agentloop._cli.main import main
from sessions import NewMessage, SessionStore, open_store, workspace_key

REPO = Path(__file__).resolve().parents[1]


class Terminal(io.StringIO):
    """An output stream that says it is a terminal (its width comes from ``COLUMNS``)."""

    def isatty(self) -> bool:
        return True


def exchange(text: str) -> list[NewMessage]:
    return [
        NewMessage(role="user", content=[{"type": "text", "text": f"{text}?"}]),
        NewMessage(role="assistant", content=[{"type": "text", "text": f"{text}."}]),
    ]


def chain(store: SessionStore, workspace: Path, generations: int, title: str) -> list[str]:
    """A conversation compacted ``generations - 1`` times: its session ids, root first."""
    root = store.create_session(
        model="claude-sonnet-5-5", workspace=workspace_key(workspace), title=title
    )
    store.append_messages(root.id, exchange("start"))
    ids = [root.id]
    for n in range(generations - 1):
        child = store.transition(
            ids[-1],
            messages=exchange(f"kept {n}"),
            strategy="summarize",
            tokens_before=150_000 + n,
            tokens_after=20_000,
        )
        ids.append(child.id)
    return ids


def sessions_cli(
    *args: str, cwd: Path, home: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, AGENTLOOP_HOME=str(home), PYTHONPATH=str(REPO))
    env.pop("AGENTLOOP_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "agentloop", "sessions", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


# -- list and tree on a terminal -------------------------------------------------------------


@pytest.mark.parametrize("width", [80, 120])
def test_list_fits_the_terminal_and_cuts_titles_with_an_ellipsis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    long_title = "refactor the parser so that it reads every dialect " * 3
    with open_store(tmp_path / "s.db") as store:
        chain(store, tmp_path / "a-rather-long-project-directory-name", 3, long_title)
        chain(store, tmp_path, 1, "short")
        for everywhere in (False, True):
            out = Terminal()
            workspace = None if everywhere else workspace_key(tmp_path)
            listing.list_command(store, out, workspace=workspace)
            lines = out.getvalue().splitlines()
            assert all(len(line) <= width for line in lines), lines
            assert lines[0].split()[-1] == "TITLE"
            if everywhere:
                cut = next(line for line in lines if "refactor" in line)
                assert cut.endswith("…")
                assert "WORKSPACE" in lines[0] or width < 100


def test_a_long_chain_is_a_list_and_the_resume_mark_stays_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    with open_store(tmp_path / "s.db") as store:
        ids = chain(store, tmp_path, 12, "a long conversation")
        out = Terminal()
        listing.tree_command(store, out, ids[0])
    lines = out.getvalue().splitlines()
    rows = [line for line in lines if not line.startswith(" ")]
    assert len(rows) == 12
    for session_id, line in zip(ids, rows, strict=True):
        assert line.startswith(session_id[:8])  # no indentation: a chain does not staircase
    assert all(len(line) <= 80 for line in lines)
    # What does not fit goes whole on the row's next line: figures never cut.
    note = re.compile(r"^ {10}← compacted 2 → 2 msgs \(~[\d,]+ → ~20,000 tokens\) by summarize$")
    assert sum(bool(note.match(line)) for line in lines) == 11
    assert lines[-1].endswith("◀ resume continues here")
    assert lines[0].endswith("◀ this")


def test_a_fork_is_indented(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        root = store.create_session(model="m", workspace=workspace_key(tmp_path), title="forked")
        store.append_messages(root.id, exchange("start"))
        first = store.create_session(
            model="m", workspace=workspace_key(tmp_path), parent_id=root.id
        )
        store.append_messages(first.id, exchange("first branch"))
        second = store.create_session(
            model="m", workspace=workspace_key(tmp_path), parent_id=root.id
        )
        store.append_messages(second.id, exchange("second branch"))
        later = store.transition(second.id, messages=exchange("kept"), strategy="summarize")
        out = io.StringIO()
        listing.tree_command(store, out, root.id)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(root.id[:8])
    assert lines[1].startswith("├─ " + first.id[:8])
    assert lines[2].startswith("└─ " + second.id[:8])
    assert lines[3].startswith("   " + later.id[:8])  # its chain continues at its indentation
    assert "resume continues here" in lines[3]


# -- the Markdown export ---------------------------------------------------------------------


def test_export_numbers_like_show_and_keeps_its_headings_apart(tmp_path: Path) -> None:
    summary = (
        "This conversation was compacted.\n\n<summary>\n## Goal\n- fix it\n</summary>\n\n"
        "```\n## not a heading\n<kept as code>\n```\nand `<b>` in a code span"
    )
    with open_store(tmp_path / "s.db") as store:
        session = store.create_session(model="m", workspace=workspace_key(tmp_path))
        store.append_messages(
            session.id,
            [
                NewMessage(role="user", content=[{"type": "text", "text": summary}]),
                NewMessage(role="assistant", content=[{"type": "text", "text": "ok"}]),
            ],
        )
        markdown, shown = io.StringIO(), io.StringIO()
        export_conversation(store, markdown, session.id)
        transcript.show_command(store, shown, session.id)
    text = markdown.getvalue()
    assert "\n### #1 User\n" in text and "\n### #2 Assistant\n" in text
    assert "── #1 user" in shown.getvalue() and "── #2 assistant" in shown.getvalue()
    # Only the messages' own headings are level 2; the summary's sit below them.
    lines = text.splitlines()
    assert "## Goal" not in lines and "#### Goal" in lines
    assert "&lt;summary>" in text and "&lt;/summary>" in text
    # Code stays exactly as written.
    assert "```\n## not a heading\n<kept as code>\n```" in text
    assert "`<b>`" in text


# -- delete and prune ------------------------------------------------------------------------


def test_delete_a_leaf_a_lineage_and_refusals(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_store(home / "sessions.db") as store:
        ids = chain(store, tmp_path, 3, "three generations")
        single = chain(store, tmp_path, 1, "alone")[0]
    # Without a terminal and without --yes: nothing is deleted.
    refused = sessions_cli("delete", single, cwd=tmp_path, home=home)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert refused.stderr.count("\n") == 1
    # A session that later generations continue needs --lineage.
    middle = sessions_cli("delete", ids[1], "--yes", cwd=tmp_path, home=home)
    assert middle.returncode == 2 and "--lineage" in middle.stderr
    assert sessions_cli("delete", single, "--yes", cwd=tmp_path, home=home).stdout == (
        "Deleted 1 session.\n"
    )
    whole = sessions_cli("delete", ids[1], "--lineage", "--yes", cwd=tmp_path, home=home)
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout == "Deleted 3 sessions.\n"
    with open_store(home / "sessions.db") as store:
        assert store.list_sessions(limit=None) == []


def test_prune_deletes_only_old_conversations(tmp_path: Path) -> None:
    home = tmp_path / "home"
    now = datetime.now(UTC)
    with open_store(home / "sessions.db", clock=lambda: now - timedelta(days=45)) as store:
        old = chain(store, tmp_path, 2, "old")
    with open_store(home / "sessions.db") as store:
        recent = chain(store, tmp_path, 1, "recent")
    pruned = sessions_cli("prune", "--older-than", "30d", "--yes", cwd=tmp_path, home=home)
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout == "Deleted 2 sessions.\n"
    with open_store(home / "sessions.db") as store:
        assert [s.id for s in store.list_sessions(limit=None)] == recent
        assert not any(s.id in old for s in store.list_sessions(limit=None))
    bad = sessions_cli("prune", "--older-than", "soon", cwd=tmp_path, home=home)
    assert bad.returncode == 2 and "invalid duration 'soon'" in bad.stderr


def test_reading_commands_never_create_a_store(tmp_path: Path) -> None:
    home = tmp_path / "nothing-here"
    for args in (["list"], ["tree"], ["list", "--all", "--json"]):
        done = sessions_cli(*args, cwd=tmp_path, home=home)
        assert done.returncode == 0, done.stderr
    shown = sessions_cli("show", "abcd", cwd=tmp_path, home=home)
    assert shown.returncode == 2 and "no sessions yet" in shown.stderr
    assert not home.exists()


def test_copy_to_another_store_is_idempotent(tmp_path: Path) -> None:

    home = tmp_path / "home"
    with open_store(home / "sessions.db") as store:
        chain(store, tmp_path, 3, "copied")
    target = tmp_path / "copy.db"
    first = sessions_cli("copy", "--to", str(target), cwd=tmp_path, home=home)
    assert first.returncode == 0, first.stderr
    assert "3 sessions copied (0 already there)" in first.stdout
    again = sessions_cli("copy", "--to", f"sqlite:///{target}", cwd=tmp_path, home=home)
    assert again.returncode == 0, again.stderr
    assert "0 sessions copied (3 already there)" in again.stdout
    listed = sessions_cli(
        "--store", str(target), "list", "--all-generations", "--json", cwd=tmp_path, home=home
    )
    assert len(json.loads(listed.stdout)) == 3


# -- the demo cleans up after itself ---------------------------------------------------------


def test_the_demo_ends_with_the_command_that_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 0
    err = capsys.readouterr().err
    command = err.strip().splitlines()[-1].strip()
    assert command.startswith("agentloop sessions delete ") and command.endswith(" --lineage --yes")
    with open_store() as store:
        assert store.list_sessions(limit=None)
    assert main(command.split()[1:]) == 0
    with open_store() as store:
        assert store.list_sessions(limit=None) == []
