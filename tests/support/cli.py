"""The ``agentloop`` command line as the tests drive it: the :class:`CLI` runner (in-process, or
the installed console script in a subprocess) against the fake Messages API, and its fixtures
(``workspace``, ``cli``). Registered as a plugin in conftest.py, so every test file has them.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_api import (
    FakeAnthropicServer,
    text_reply,
)

from agentloop._cli.main import main
from sessions import SessionStore, open_store
from support.loop_scripts import (
    PREFIX_START,
    Script,
    filler,
)

AGENTLOOP = Path(sys.executable).parent / "agentloop"
WINDOW = "6000"
NOTICE = re.compile(
    r"^Conversation compacted: (?P<count>\d+) messages → new session (?P<child>[0-9a-z]{8}) "
    r"\((?P<before>~?[\d,]+) → (?P<after>~?[\d,]+) tokens\)$"
)


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def notices(self) -> list[re.Match[str]]:
        return [m for line in self.err.splitlines() if (m := NOTICE.match(line))]

    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("agentloop: error:")]


class CLI:
    """Runs ``agentloop`` against the fake server in a workspace, in-process or as a subprocess."""

    def __init__(
        self,
        fake_api: FakeAnthropicServer,
        workspace: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        self.fake_api = fake_api
        self.script = Script()
        fake_api.handler = self.script
        self.workspace = workspace
        self.monkeypatch = monkeypatch
        self.capsys = capsys
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")

    def run(self, *args: str, stdin: str = "", cwd: Path | None = None) -> Run:
        """In-process: ``main(args)`` with a non-terminal stdin."""
        self.monkeypatch.chdir(cwd or self.workspace)
        self.monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        self.capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's errors
            code = exit_.code if isinstance(exit_.code, int) else 1
        captured = self.capsys.readouterr()
        return Run(code, captured.out, captured.err)

    def subprocess(self, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> Run:
        """The installed console script, stdin a pipe."""
        done = subprocess.run(
            [str(AGENTLOOP), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=self.workspace,
            env=dict(os.environ) if env is None else env,
            timeout=60,
        )
        return Run(done.returncode, done.stdout, done.stderr)

    def store(self) -> SessionStore:
        return open_store()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "main.py").write_text("print('hello')\n")
    return path.resolve()


@pytest.fixture
def cli(
    fake_api: FakeAnthropicServer,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[CLI]:
    runner = CLI(fake_api, workspace, monkeypatch, capsys)
    yield runner
    assert fake_api.violations == []


def conversation_lines(count: int, words: int = 300) -> list[str]:
    return [filler(f"request {n}", words) for n in range(count)]


def check_notices(run: Run, store: SessionStore, workspace: Path) -> list[str]:
    """Every notice names a child that exists, its parent's message count and the recorded
    tokens; returns the child ids in order."""
    children: list[str] = []
    for notice in run.notices:
        child = store.get_session(notice["child"])
        assert child.id.startswith(notice["child"])
        assert child.workspace == str(workspace)
        assert child.parent_id is not None
        parent = store.get_session(child.parent_id)
        assert parent.status == "compacted"
        count = int(notice["count"])
        assert parent.message_count == count == len(store.get_messages(parent.id))
        entry = next(e for e in store.compaction_history(child.id) if e.child_id == child.id)
        assert entry.messages_before == count
        assert entry.tokens_before == int(notice["before"].strip("~").replace(",", ""))
        assert entry.tokens_after == int(notice["after"].strip("~").replace(",", ""))
        # The child opens with the compacted prefix, or the API's own summary.
        first = store.get_messages(child.id)[0]
        if first.role == "assistant":
            assert [block["type"] for block in first.content] == ["compaction"]
        else:
            assert first.role == "user" and first.content[0]["text"].startswith(PREFIX_START)
        children.append(child.id)
    return children


def _compacted_session(cli: CLI) -> tuple[str, str]:
    """A session compacted once by /compact: (parent id, child id)."""
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    stdin = "\n".join([*conversation_lines(4, 200), "/compact"])
    run = cli.run("--context-window", WINDOW, stdin=stdin)
    assert run.code == 0, run.err
    with cli.store() as store:
        (child,) = check_notices(run, store, cli.workspace)
        parent = store.get_session(child).parent_id
    assert parent is not None
    return parent, child
