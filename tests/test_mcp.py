"""MCP servers: the configuration, real servers started through the SDK (the
misbehaving test server, ``mcp-server-git``, ``@modelcontextprotocol/server-filesystem`` through
npx), their tools as agentloop tools, and :class:`AgentLoop` with them (sync and async)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, text_reply, tool_reply
from support.loop_scripts import scripted_loop

from agentloop._agent.mcp_config import (
    McpConfig,
    StdioServer,
    TrustBook,
    load_mcp_config,
    max_result_tokens,
    parse_servers,
    tool_name,
)
from agentloop._agent.mcp_tools import (
    McpServers,
    McpTool,
    aopen_mcp,
    convert_result,
    open_mcp,
    shortened_results,
)
from agentloop._core.values.messages import Message
from agentloop._errors import ConfigurationError
from sessions import SqliteSessionStore

SERVER = Path(__file__).parent / "support" / "mcp_test_server.py"
NEEDLE = "zanzibar-quartz-needle"
FILESYSTEM = "@modelcontextprotocol/server-filesystem"


def server_entry(*options: str, **extra: Any) -> dict[str, Any]:
    """The configuration entry of the test server with these options."""
    return {"command": sys.executable, "args": [str(SERVER), *options], **extra}


def dead(pid: int) -> bool:
    """Whether the process ended (a zombie waiting for its reaper counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def read_pid(path: Path) -> int:
    return int(path.read_text().split()[0])


# -- configuration --------------------------------------------------------------------------


def test_tool_names_as_claude_code_writes_them() -> None:
    assert tool_name("git", "git_status") == "mcp__git__git_status"
    assert tool_name("my server.v2", "read/file") == "mcp__my_server_v2__read_file"
    assert tool_name("a-b", "c-d") == "mcp__a-b__c-d"
    long = tool_name("s" * 100, "t" * 100)
    assert len(long) == 128 and long.startswith("mcp__" + "s" * 100 + "__")


def test_variables_expanded_and_a_missing_one_is_one_line() -> None:
    data = {
        "mcpServers": {
            "db": {
                "command": "${BIN}/db",
                "args": ["--token", "${TOKEN}"],
                "env": {"A": "${A:-x}"},
            },
            "web": {"type": "http", "url": "${URL}", "headers": {"Authorization": "Bearer ${T}"}},
            "gone": {"command": "tool", "args": ["${UNSET_VARIABLE_36}"]},
            "broken": {"args": ["no command"]},
        }
    }
    environ = {"BIN": "/opt", "TOKEN": "s3", "URL": "https://example.test/mcp", "T": "k"}
    servers, problems = parse_servers(data, ".mcp.json", environ)
    db = servers["db"]
    assert isinstance(db, StdioServer)
    assert (db.command, db.args, db.env) == ("/opt/db", ["--token", "s3"], {"A": "x"})
    web = servers["web"]
    assert web.type == "http" and web.url == "https://example.test/mcp"
    assert web.headers == {"Authorization": "Bearer k"}
    assert set(servers) == {"db", "web"}
    assert problems == [
        "gone: not started: ${UNSET_VARIABLE_36} is not set (.mcp.json)",
        "broken: not started: command: Field required (.mcp.json)",
    ]


def test_workspace_file_is_trusted_once_and_asked_again_when_changed(tmp_path: Path) -> None:
    workspace, config_dir = tmp_path / "w", tmp_path / "config"
    workspace.mkdir()
    config_dir.mkdir()
    (config_dir / "mcp.json").write_text(json.dumps({"mcpServers": {"mine": {"command": "a"}}}))
    project = workspace / ".mcp.json"
    project.write_text(json.dumps({"mcpServers": {"theirs": {"command": "b"}}}))
    book = TrustBook(tmp_path / "trust.json")
    asked: list[list[str]] = []

    def answer(yes: bool) -> Any:
        def ask(path: Path, servers: dict[str, Any]) -> bool:
            asked.append(list(servers))
            return yes

        return ask

    refused = load_mcp_config(workspace, config_dir=config_dir, trust=book, ask=answer(False))
    assert list(refused.servers) == ["mine"]
    assert "not trusted" in refused.problems[0] and "theirs" in refused.problems[0]
    silent = load_mcp_config(workspace, config_dir=config_dir, trust=book, ask=None)
    assert list(silent.servers) == ["mine"] and asked == [["theirs"]]
    trusted = load_mcp_config(workspace, config_dir=config_dir, trust=book, ask=answer(True))
    assert list(trusted.servers) == ["mine", "theirs"]
    again = load_mcp_config(workspace, config_dir=config_dir, trust=book, ask=None)
    assert list(again.servers) == ["mine", "theirs"] and len(asked) == 2  # remembered
    project.write_text(json.dumps({"mcpServers": {"theirs": {"command": "rm"}}}))
    changed = load_mcp_config(workspace, config_dir=config_dir, trust=book, ask=None)
    assert list(changed.servers) == ["mine"]  # a changed file is a new question


def test_named_file_is_trusted_and_an_unreadable_one_is_an_error(tmp_path: Path) -> None:
    named = tmp_path / "servers.json"
    named.write_text(json.dumps({"mcpServers": {"x": {"command": "y"}}}))
    config = load_mcp_config(tmp_path, config_dir=tmp_path / "none", files=[named])
    assert list(config.servers) == ["x"]
    with pytest.raises(ConfigurationError, match=r"--mcp-config .*missing\.json"):
        load_mcp_config(tmp_path, config_dir=tmp_path, files=[tmp_path / "missing.json"])


def test_max_result_tokens_from_the_environment() -> None:
    assert max_result_tokens({}) == 25_000
    assert max_result_tokens({"AGENTLOOP_MCP_MAX_TOKENS": "4000"}) == 4000
    with pytest.raises(ConfigurationError, match="AGENTLOOP_MCP_MAX_TOKENS"):
        max_result_tokens({"AGENTLOOP_MCP_MAX_TOKENS": "lots"})


def test_results_as_the_api_takes_them() -> None:
    blocks, is_error = convert_result(
        {
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "image", "data": "AAAA", "mimeType": "image/tiff"},
                {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"},
                {"type": "resource", "resource": {"uri": "file:///b", "text": "bee"}},
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///c.pdf",
                        "mimeType": "application/pdf",
                        "blob": "QQ",
                    },
                },
            ],
            "isError": True,
        }
    )
    assert is_error
    assert blocks[0] == {"type": "text", "text": "hello"}
    assert blocks[1]["type"] == "image" and blocks[1]["source"]["media_type"] == "image/png"
    assert blocks[2]["type"] == "text" and "image/tiff" in blocks[2]["text"]
    assert blocks[3] == {"type": "text", "text": "[resource link] a.txt <file:///a.txt>"}
    assert blocks[4] == {"type": "text", "text": "[resource file:///b]\nbee"}
    assert blocks[5]["type"] == "document"
    structured, _ = convert_result({"content": [], "structuredContent": {"n": 1}})
    assert json.loads(structured[0]["text"]) == {"n": 1}


# -- real servers ---------------------------------------------------------------------------


@pytest.fixture
def misbehaving(tmp_path: Path) -> Iterator[tuple[McpServers, Path]]:
    pid_file = tmp_path / "t.pid"
    config = {
        "mcpServers": {
            "t": server_entry("--pid-file", str(pid_file)),
            "slow": server_entry("--slow", "30", timeout=1),
            "dies": server_entry("--exit-at-start"),
            "schema": server_entry("--bad-schema"),
            "missing": {"command": "no-such-program-36"},
        }
    }
    servers = open_mcp(config, max_result_tokens=5000)
    try:
        yield servers, pid_file
    finally:
        servers.close()


def test_misbehaving_servers_are_one_line_each_and_the_rest_goes_on(
    misbehaving: tuple[McpServers, Path],
) -> None:
    servers, pid_file = misbehaving
    lines = servers.problems
    assert lines == [
        "MCP server slow: failed: did not start within 1 s",
        "MCP server dies: failed: it exited before it answered "
        "(stderr: error: cannot open the database)",
        "MCP server schema: failed: invalid answer from the server: "
        "tools.7.inputSchema.type: Input should be 'object'",
        "MCP server missing: failed: it exited before it answered "
        "(stderr: sh: 1: exec: no-such-program-36: not found)",
    ]
    names = [tool.name for tool in servers.tools]
    assert names == [
        f"mcp__t__{n}" for n in ("echo", "crash", "big", "picture", "fail", "sleep", "grow")
    ]
    tools = {tool.name: tool for tool in servers.tools}
    echo = tools["mcp__t__echo"]
    assert echo.input_schema == {"type": "object", "properties": {"text": {"type": "string"}}}
    assert echo.run({"text": "hi"}).content == "echo: hi"
    failed = tools["mcp__t__fail"].run({})
    assert failed.is_error and failed.content == "it went wrong"
    picture = tools["mcp__t__picture"].run({})
    assert [b["type"] for b in picture.blocks] == ["text", "image", "text"]

    big = tools["mcp__t__big"].run({})
    assert big.whole is not None and len(big.whole) == 200_000 and NEEDLE in big.whole
    assert len(big.content) < 40_000 and "search_history" in big.content
    assert big.content.startswith("[The result of mcp__t__big was ")

    pid = read_pid(pid_file)
    crashed = tools["mcp__t__crash"].run({})
    assert crashed.is_error
    assert crashed.content == (
        "MCP server t: failed: the server's process ended "
        "(stderr: fatal: the test server crashed on purpose)"
    )
    again = echo.run({"text": "still there?"})  # the agent goes on; the server stays failed
    assert again.is_error and "is not running" in again.content
    assert dead(pid)


def test_consent_once_per_tool_and_the_allow_list(tmp_path: Path) -> None:
    asked: list[str] = []
    answers = iter([False, True])

    def approve(command: str) -> bool:
        asked.append(command)
        return next(answers)

    config = {"mcpServers": {"t": server_entry(allow=["fail"])}}
    with open_mcp(config, approve=approve) as servers:
        tools = {tool.name: tool for tool in servers.tools}
        declined = tools["mcp__t__echo"].run({"text": "a"})
        assert declined.is_error and "declined" in declined.content
        assert tools["mcp__t__echo"].run({"text": "b"}).content == "echo: b"
        assert tools["mcp__t__echo"].run({"text": "c"}).content == "echo: c"  # not asked again
        assert tools["mcp__t__fail"].run({}).content == "it went wrong"  # allowed in config
    assert asked == ['mcp__t__echo {"text": "a"}', 'mcp__t__echo {"text": "b"}']


@pytest.fixture
def scratch_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.test"}
    (repo / "notes.txt").write_text("first\n")
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "the first commit"]):
        subprocess.run(["git", *command], cwd=repo, env=env, check=True)
    (repo / "notes.txt").write_text("first\nsecond\n")
    return repo


def test_git_server_on_a_scratch_repository(scratch_repo: Path) -> None:
    pytest.importorskip("mcp_server_git", reason="mcp-server-git is not installed (the test extra)")
    config = {
        "mcpServers": {
            "git": {
                "command": sys.executable,
                "args": ["-m", "mcp_server_git", "--repository", str(scratch_repo)],
            }
        }
    }
    with open_mcp(config) as servers:
        assert servers.problems == []
        tools = {tool.name: tool for tool in servers.tools}
        assert {"mcp__git__git_status", "mcp__git__git_log", "mcp__git__git_diff_unstaged"} <= set(
            tools
        )
        status = tools["mcp__git__git_status"].run({"repo_path": str(scratch_repo)})
        assert not status.is_error and "notes.txt" in status.content
        log = tools["mcp__git__git_log"].run({"repo_path": str(scratch_repo)})
        assert "the first commit" in log.content
        diff = tools["mcp__git__git_diff_unstaged"].run({"repo_path": str(scratch_repo)})
        assert "+second" in diff.content
        (state,) = servers.states
        assert state.line() == "git: ready"
    assert state.line() == "git: closed"


NPM_PREFIX = Path(__file__).resolve().parents[1] / ".ci-npm"
"""Where the install step (``.ci/run``, or the README's command) puts the filesystem server:
the tests themselves fetch nothing."""


@pytest.fixture(scope="session")
def filesystem_server() -> Path:
    """The npm prefix holding @modelcontextprotocol/server-filesystem."""
    if shutil.which("npx") is None:
        pytest.skip("Node.js (npx) is not installed: the filesystem server cannot run")
    prefix = Path(os.environ.get("AGENTLOOP_TEST_NPM_PREFIX") or NPM_PREFIX)
    if not (prefix / "node_modules" / ".bin" / "mcp-server-filesystem").exists():
        pytest.skip(
            f"the filesystem server is not installed in {prefix}: "
            f"npm install --prefix .ci-npm {FILESYSTEM} (.ci/run does)"
        )
    return prefix


def test_filesystem_server_through_npx(filesystem_server: Path, tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the filesystem server\n")
    args = ["--prefix", str(filesystem_server), "--offline", "--no", "--"]
    args += ["mcp-server-filesystem", str(root)]
    with open_mcp({"mcpServers": {"fs": {"command": "npx", "args": args}}}) as servers:
        assert servers.problems == []
        tools = {tool.name: tool for tool in servers.tools}
        read = tools.get("mcp__fs__read_text_file") or tools["mcp__fs__read_file"]
        result = read.run({"path": str(root / "hello.txt")})
        assert result.content.strip() == "hello from the filesystem server"
        outside = read.run({"path": "/etc/hostname"})
        assert outside.is_error  # the server's own confinement, passed through


# -- AgentLoop ------------------------------------------------------------------------------


def test_agent_loop_with_mcp_tools_stores_the_whole_and_sends_it_shortened(
    fake_api: FakeAnthropicServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "t.pid"
    servers = open_mcp({"mcpServers": {"t": server_entry("--pid-file", str(pid_file))}})
    store = SqliteSessionStore(tmp_path / "s.db")
    loop, script, _ = scripted_loop(fake_api, store, tmp_path, window=200_000, tools=servers.tools)
    servers.close_with(loop)
    script.add(
        tool_reply(("mcp__t__echo", {"text": "hi"}), ("mcp__t__big", {}), ("mcp__t__picture", {})),
        text_reply("read both"),
        text_reply("nothing more"),
    )
    loop.run_turn("call the tools")
    sent = script.conversation[-1]
    assert [t["name"] for t in sent["tools"]][:3] == [
        "mcp__t__echo",
        "mcp__t__crash",
        "mcp__t__big",
    ]
    echo, big, picture = sent["messages"][-1]["content"]
    assert echo["content"] == "echo: hi"
    assert [block["type"] for block in picture["content"]] == ["text", "image", "text"]
    assert big["content"].startswith("[The result of mcp__t__big was ")
    assert NEEDLE not in big["content"] and len(big["content"]) < 100_000
    # The session keeps the whole, and the store's search (search_history's) finds it.
    (stored,) = [m for m in store.get_messages(loop.session_id) if m.role == "user"][1:]
    assert len(stored.content[1]["content"]) == 200_000
    assert stored.content[2]["content"][1]["source"]["media_type"] == "image/png"
    hits = store.search_messages(NEEDLE, session_id=loop.session_id)
    assert hits and NEEDLE in hits[0].excerpt
    # A resumed session sends it as it went.
    messages = [Message(m.role, tuple(m.content)) for m in store.get_messages(loop.session_id)]
    (call_id,) = shortened_results(messages, servers.max_tokens)
    assert shortened_results(messages, servers.max_tokens)[call_id] == big["content"]
    # Compaction reads the result as the model did: the summarizer gets it shortened.
    # Pruned like any tool result: the next request sends what the compaction left.
    assert loop.compact() is not None
    loop.run_turn("and now?")
    (_, pruned, _) = script.conversation[-1]["messages"][2]["content"]
    assert pruned["content"].startswith("[tool output pruned during compaction: 9")
    pid = read_pid(pid_file)
    loop.close()  # closes the servers too
    assert dead(pid)
    assert all(state.state == "closed" for state in servers.states)
    store.close()


def test_async_agent_loop_with_mcp_tools(fake_api: FakeAnthropicServer, tmp_path: Path) -> None:
    pid_file = tmp_path / "t.pid"
    store = SqliteSessionStore(tmp_path / "s.db")

    async def run() -> dict[str, Any]:
        servers = await aopen_mcp({"mcpServers": {"t": server_entry("--pid-file", str(pid_file))}})
        loop, script, _ = scripted_loop(fake_api, store, tmp_path, tools=servers.tools)
        servers.close_with(loop)
        script.add(tool_reply(("mcp__t__echo", {"text": "async"})), text_reply("done"))
        await loop.arun_turn("echo")
        await loop.aclose()
        return script.conversation[-1]

    body = asyncio.run(run())
    assert body["messages"][-1]["content"][0]["content"] == "echo: async"
    assert dead(read_pid(pid_file))
    store.close()


def test_a_tool_with_a_name_taken_is_left_out() -> None:
    config = McpConfig(servers={"a.b": StdioServer.model_validate(server_entry())})
    config.servers["a_b"] = StdioServer.model_validate(server_entry())
    with open_mcp(config) as servers:
        names = [tool.name for tool in servers.tools]
        assert len(names) == len(set(names)) == 7
        assert all(isinstance(tool, McpTool) and tool.server == "a.b" for tool in servers.tools)
        assert servers.problems[0] == (
            "MCP server a_b: tool echo left out: the name mcp__a_b__echo is taken"
        )


@pytest.fixture
def http_server() -> Iterator[str]:
    """The URL of an MCP server over streamable HTTP that wants ``Bearer s3cret``."""
    script = Path(__file__).parent / "support" / "mcp_http_server.py"
    process = subprocess.Popen(
        [sys.executable, str(script), "s3cret"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()


def test_streamable_http_server_with_headers(
    http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP36_TOKEN", "s3cret")
    entry = {
        "type": "http",
        "url": http_server,
        "headers": {"Authorization": "Bearer ${MCP36_TOKEN}"},
    }
    refused = {"type": "http", "url": http_server, "headers": {"Authorization": "Bearer wrong"}}
    with open_mcp({"mcpServers": {"adder": entry, "refused": refused}}) as servers:
        (tool,) = servers.tools
        assert tool.name == "mcp__adder__add"
        assert tool.input_schema["required"] == ["a", "b"]
        assert tool.run({"a": 2, "b": 40}).content == "2 + 40 = 42"
        (problem,) = servers.problems
        assert problem == "MCP server refused: failed: MCPError: Server returned an error response"


def test_a_server_whose_tools_change_is_announced_not_swapped_in() -> None:
    notices: list[str] = []
    said = threading.Event()

    def notice(text: str) -> None:
        notices.append(text)
        said.set()

    with open_mcp({"mcpServers": {"t": server_entry()}}, on_notice=notice) as servers:
        before = [tool.name for tool in servers.tools]
        grow = next(tool for tool in servers.tools if tool.name == "mcp__t__grow")
        assert grow.run({}).content == "grew"
        assert said.wait(30)
        echo = servers.tools[0]
        assert echo.run({"text": "on"}).content == "echo: on"  # the server answers on
        assert [tool.name for tool in servers.tools] == before  # the set stays as it was
    assert notices == [
        "MCP server t now offers other tools: this session keeps the ones it started with "
        "(a new session gets the new ones)"
    ]


def test_a_server_that_dies_between_calls_is_one_line(tmp_path: Path) -> None:
    pid_file = tmp_path / "t.pid"
    notices: list[str] = []
    said = threading.Event()

    def notice(text: str) -> None:
        notices.append(text)
        said.set()

    config = {"mcpServers": {"t": server_entry("--pid-file", str(pid_file))}}
    with open_mcp(config, on_notice=notice) as servers:
        os.kill(read_pid(pid_file), signal.SIGKILL)
        assert said.wait(30)
        assert notices == ["MCP server t: failed: the server's process ended"]
        answer = servers.tools[0].run({"text": "anyone?"})
        assert answer.is_error and "is not running" in answer.content
