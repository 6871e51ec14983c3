"""The README's LangChain and pydantic-ai snippets run as written (a user's ``ANTHROPIC_API_KEY``;
here the test server's, with ``ANTHROPIC_BASE_URL``), compact, and leave the lineage in the
store; and importing agentloop loads neither framework."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_api import TEST_API_KEY, FakeAnthropicServer, ReplySpec, text_reply
from support.integrations import is_summary_request

from sessions import open_store

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _snippet(module: str) -> str:
    blocks: list[str] = re.findall(r"```py\n(.*?)```", README.read_text(), flags=re.S)
    (found,) = [block for block in blocks if f"agentloop.integrations.{module} import" in block]
    return found


def _answer(body: dict[str, Any]) -> ReplySpec:
    if is_summary_request(body):
        return text_reply("## Goal\nRename the helpers.\n## Progress\nRenamed them one by one.")
    return text_reply("Renamed it and ran the tests. " * 10)


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("module", "framework"), [("langchain", "langchain_anthropic"), ("pydantic_ai", "pydantic_ai")]
)
def test_the_readme_snippet_runs_as_written(module: str, framework: str, tmp_path: Path) -> None:
    pytest.importorskip(framework)
    with FakeAnthropicServer(handler=_answer) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY=TEST_API_KEY)
        done = subprocess.run(
            [sys.executable, "-c", _snippet(module)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert server.violations == []
        summaries = [b for b in server.message_requests if is_summary_request(b)]
    match = re.fullmatch(r"(\d+) compactions, now in session (\w+)\n", done.stdout)
    assert match is not None, done.stdout
    assert int(match.group(1)) >= 1 and len(summaries) >= int(match.group(1))
    # What it says is in the store: the session it continues in is a compaction's child.
    with open_store(tmp_path / "sessions.db") as store:
        child = store.get_session(match.group(2))
        assert child.parent_id is not None and child.status == "active"
        assert store.get_session(child.parent_id).status == "compacted"
        assert "Step 0" in json.dumps([m.content for m in store.get_messages(child.parent_id)])


def test_importing_agentloop_loads_no_framework() -> None:
    code = (
        "import sys, agentloop, agentloop.integrations\n"
        "from agentloop import AgentLoop, ConversationCompacter\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain', 'langchain_core', 'langchain_anthropic', 'langgraph', 'pydantic_ai')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
