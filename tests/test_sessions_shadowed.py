"""A user's own module called ``sessions`` (a web app's ``sessions.py``) neither breaks agentloop
nor is replaced by agentloop's store: agentloop imports its store through
``agentloop/_sessions.py``, by where it is installed, not by the name ``sessions`` on the path.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import sessions

ROOT = Path(__file__).resolve().parent.parent

APP = """
import sys

import sessions  # the app's own module
from agentloop import AgentLoop, ConversationCompacter
from agentloop.testing import Reply, ScriptedModel
from agentloop._sessions import open_store

loop = AgentLoop(
    model=ScriptedModel(default=Reply(({"type": "text", "text": "done " * 100},))),
    model_name="claude-sonnet-4-6",
    compacter=ConversationCompacter(context_window=2_000),
    store=open_store("store.db"),
)
for n in range(8):
    loop.run_turn(f"step {n}: " + "words " * 150)
assert loop.last_transition is not None, "no compaction happened"
assert sessions.WHO == "the app", sessions
assert sys.modules["sessions"] is sessions
print("store:", type(loop.store).__module__)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "PYTHON"))}
    env["AGENTLOOP_HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = str(ROOT)  # agentloop as installed, and after the app's own directory
    return env


def _app_dir(tmp_path: Path) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "sessions.py").write_text('WHO = "the app"\n')
    (app / "app.py").write_text(APP)
    return app


def test_an_app_with_its_own_sessions_module_uses_agentloop_and_keeps_its_module(
    tmp_path: Path,
) -> None:
    app = _app_dir(tmp_path)
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=app,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "store: agentloop._sessions_store." in done.stdout


def test_the_demo_runs_beside_a_sessions_module(tmp_path: Path) -> None:
    app = _app_dir(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "demo"],
        cwd=app,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "sessions tree" in done.stderr


def test_without_a_rival_the_store_is_the_sessions_package_itself() -> None:
    from agentloop import _sessions

    # One copy of the store's classes: what agentloop raises, ``except sessions.X`` catches.
    assert _sessions.package is sessions
    assert _sessions.SessionStore is sessions.SessionStore
    assert _sessions.SessionError is sessions.SessionError


def _absolute_imports(path: Path, top: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == top]
    return found


def test_the_store_imports_itself_relatively_and_agentloop_only_through_its_alias() -> None:
    # Absolute self-imports would find the user's module when the package runs under its
    # private name; agentloop's modules take the store's names from agentloop/_sessions.py.
    assert [
        i for p in sorted(ROOT.glob("sessions/**/*.py")) for i in _absolute_imports(p, "sessions")
    ] == []
    alias = ROOT / "agentloop" / "_sessions.py"
    direct = [
        i
        for p in sorted(ROOT.glob("agentloop/**/*.py"))
        if p != alias
        for i in _absolute_imports(p, "sessions")
    ]
    assert direct == []
