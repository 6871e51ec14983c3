"""``agentloop demo``: offline, compacts at least twice, ends with the lineage tree it made; and
it gives the README's run wherever the project and the interpreter live."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli import NOTICE, Run, check_notices

from sessions import open_store

ROOT = Path(__file__).resolve().parent.parent
LONG = "a-directory-name-much-longer-than-any-the-demo-was-written-in"


@dataclass
class DemoRun:
    run: Run
    """stdout and stderr in one stream, in the order a terminal shows them."""
    home: Path
    interpreter: Path


def _long_interpreter(base: Path) -> Path:
    """This interpreter reached through a path of over 300 characters: a link in a deep
    directory, made a virtual environment of its own that shares this one's packages."""
    deep = base.joinpath(*[LONG] * 5)
    (deep / "bin").mkdir(parents=True)
    interpreter = deep / "bin" / "python"
    interpreter.symlink_to(sys.executable)
    if sys.prefix != sys.base_prefix:  # a venv: its pyvenv.cfg and packages beside the link
        shutil.copy(Path(sys.prefix) / "pyvenv.cfg", deep / "pyvenv.cfg")
        (deep / "lib").symlink_to(Path(sys.prefix) / "lib")
    return interpreter


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    base = tmp_path_factory.mktemp("demo")
    interpreter = _long_interpreter(base)
    home = base / "home"
    temp = base.joinpath(*[LONG] * 3, "tmp")  # a long temporary directory too
    temp.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "AGENTLOOP_"))}
    env.update(AGENTLOOP_HOME=str(home), TMPDIR=str(temp))
    # Any attempt to reach the network would go to a closed port and fail.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env[name] = "http://127.0.0.1:9"
    done = subprocess.run(
        [str(interpreter), "-m", "agentloop", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=base,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return DemoRun(Run(done.returncode, done.stdout, done.stdout), home, interpreter)


def test_demo_runs_offline_and_shows_compactions_and_the_lineage(demo: DemoRun) -> None:
    run = demo.run
    assert run.code == 0, run.err
    assert not any(line.startswith("Traceback") for line in run.err.splitlines())
    assert run.error_lines() == []
    # At least two compactions, and automatic ones among them (before the user's /compact).
    assert len(run.notices) >= 2
    lines = run.err.splitlines()
    manual = next(i for i, line in enumerate(lines) if line.startswith("› /compact"))
    assert sum(1 for line in lines[:manual] if NOTICE.match(line)) >= 1
    assert all("warning:" not in line for line in lines)
    # The temporary workspace it worked in, removed afterwards.
    match = re.search(r"small project in (\S+)", run.err)
    assert match is not None
    workspace = Path(match.group(1))
    assert not workspace.exists()

    with open_store(demo.home / "sessions.db") as store:
        children = check_notices(run, store, workspace.resolve())
        sessions = store.list_sessions(limit=None)
        assert len(sessions) == len(run.notices) + 1
        lineage = store.lineage(children[-1])
        assert {s.id for s in lineage} == {s.id for s in sessions}
        # The tools really ran: the project's tests failed, then passed after the fix.
        results = [
            str(block.get("content"))
            for message in store.get_messages(lineage[0].id)
            for block in message.content
            if block.get("type") == "tool_result"
        ]
        assert any("FAILED test_divide" in r for r in results)
        assert any("all tests passed" in r for r in results)
    # It ends with the lineage tree: every session it made, the newest marked for resume.
    tree = [line for line in lines if re.match(r"[0-9a-z]{8}  (compacted|active) ", line)]
    for session, line in zip(lineage, tree, strict=True):
        assert session.id[:8] in line
    assert "resume continues here" in tree[-1]


def test_nothing_the_model_is_sent_holds_the_interpreters_path(demo: DemoRun) -> None:
    """The interpreter's path would be counted in every request and quoted in every summary:
    the scripted commands run ``python``, whatever the interpreter is called."""
    assert len(str(demo.interpreter)) > 300
    with open_store(demo.home / "sessions.db") as store:
        stored = [
            repr(message.content)
            for session in store.list_sessions(limit=None)
            for message in store.get_messages(session.id)
        ]
        commands = [
            block["input"]["command"]
            for session in store.list_sessions(limit=None)
            for message in store.get_messages(session.id)
            for block in message.content
            if block.get("type") == "tool_use" and block.get("name") == "run_command"
        ]
    assert commands and set(commands) == {"python test_calc.py"}
    assert not any(LONG in text or sys.executable in text for text in stored)


def _numbered_ids(text: str, ids: list[str]) -> str:
    for number, short in enumerate(ids, 1):
        text = text.replace(short, f"<session {number}>")
    return text


def test_the_readme_shows_the_demos_end_as_it_runs(demo: DemoRun) -> None:
    """The README's sample is the demo's end, figure for figure (only the ids differ), run at
    a long interpreter path and in a long temporary directory."""
    readme = ROOT.joinpath("README.md").read_text()
    (sample,) = re.findall(r"```\n(› /compact .*?)```", readme, flags=re.S)
    tree_ids = re.compile(r"^([0-9a-z]{8})  (?:compacted|active) ", re.M)
    expected = _numbered_ids(sample, tree_ids.findall(sample))
    output = demo.run.out
    ran = output[output.rindex("› /compact") :]
    assert _numbered_ids(ran, tree_ids.findall(ran)) == expected
