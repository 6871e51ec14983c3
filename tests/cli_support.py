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
from fake_anthropic import FakeAnthropicServer
from test_loop import Script, filler

from agentloop._cli.main import main
from sessions import SessionStore, open_store

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
