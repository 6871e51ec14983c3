"""Fault injection, secrets through the console script, as a hostile command would
go after them: the agent's own environment read through ``/proc/$PPID/environ``, credentials of
other tools (``PGPASSWORD``, ``MYSQL_PWD``, a ``DATABASE_URL`` with a password, ``GH_PAT``,
``SENTRY_DSN``), copies of a secret reversed or in base64, and a secret the output truncation
cuts through. None of them reaches a request body, the store or the screen.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_api import ToolCall, text_reply, tool_reply
from support.faults import SECRET, Agent, make_agent, sound, tool_results

WINDOW = "30000"
CREDENTIALS = {
    "ANTHROPIC_API_KEY": SECRET,
    "PGPASSWORD": "pg-password-4f1e9a2c",
    "MYSQL_PWD": "mysql-password-77ab31",
    "DATABASE_URL": "postgresql://app:db-password-91c0e5@db.example.com:5432/app",
    "GH_PAT": "gh-personal-token-d93bb1f6",
    "SENTRY_DSN": "https://0123456789abcdef0123456789abcdef@o42.ingest.sentry.io/7",
    "PLAIN_SETTING": "not-a-secret-value",
}
SECRETS = [
    SECRET,
    "pg-password-4f1e9a2c",
    "mysql-password-77ab31",
    "db-password-91c0e5",
    "gh-personal-token-d93bb1f6",
    "0123456789abcdef0123456789abcdef",
]


def copies(secret: str) -> list[str]:
    """The secret, reversed, and the part of its base64 that any encoding of it contains."""
    raw = secret.encode()
    found = [secret, secret[::-1]]
    for start in range(3):
        piece = raw[start:][: (len(raw) - start) // 3 * 3]
        found.append(base64.b64encode(piece).decode())
    return found


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[Agent]:
    yield from make_agent(tmp_path, api_key=SECRET)


def nowhere(agent: Agent, texts: list[str], *outputs: str) -> None:
    """None of ``texts`` is in any request body, any file of the agent's home, or ``outputs``."""
    bodies = [json.dumps(request.body, ensure_ascii=False) for request in agent.server.requests]
    files = [p.read_bytes() for p in agent.home.rglob("*") if p.is_file()]
    for text in texts:
        for body in bodies:
            assert text not in body, text
        for data in files:
            assert text.encode() not in data, text
        for output in outputs:
            assert text not in output, text


def test_no_credential_reaches_the_model_the_store_or_the_screen(keyed: Agent) -> None:
    (keyed.workspace / "config.txt").write_text(f"key={SECRET}\n")
    commands = [
        "tr '\\0' '\\n' < /proc/$PPID/environ",  # the agent's own environment block
        "base64 -w0 /proc/$PPID/environ",
        "env",
        "rev config.txt",
        "base64 config.txt",
        "echo $PGPASSWORD $MYSQL_PWD $DATABASE_URL $GH_PAT $SENTRY_DSN",
    ]
    keyed.script.add(
        tool_reply(*(ToolCall("run_command", {"command": c}) for c in commands)),
        text_reply("nothing to see"),
    )

    process = keyed.run(
        "--context-window", WINDOW, "--yes", stdin=b"show me the keys\n", env=CREDENTIALS
    )

    sound(process)
    results = [str(r["content"]) for r in tool_results(keyed.script.conversation[1])]
    environ, environ_base64, env, reversed_, encoded, echoed = results
    assert "PLAIN_SETTING=not-a-secret-value" in environ  # the block is there...
    assert "ANTHROPIC_API_KEY" not in environ and "PGPASSWORD" not in environ  # ...its secrets not
    assert "PLAIN_SETTING" in env and "DATABASE_URL" not in env and "SENTRY_DSN" not in env
    assert (
        "[redacted $ANTHROPIC_API_KEY]" in reversed_ and "[redacted $ANTHROPIC_API_KEY]" in encoded
    )
    assert echoed == "(no output)\n[exit code 0]"  # the commands had none of them
    nowhere(
        keyed,
        [copy for secret in SECRETS for copy in copies(secret)],
        process.text_out,
        process.text_err,
    )
    assert environ_base64  # (what it held is checked above, with every other body)


def test_a_secret_the_truncation_cuts_through_is_redacted_whole(keyed: Agent) -> None:
    (keyed.workspace / "key.txt").write_text(SECRET)
    # 30,000 bytes are shown, 15,000 from each end: the key starts 10 bytes before the cut.
    command = (
        "head -c 14990 /dev/zero | tr '\\0' x; cat key.txt; head -c 40000 /dev/zero | tr '\\0' y"
    )
    keyed.script.add(tool_reply(ToolCall("run_command", {"command": command})), text_reply("done"))

    process = keyed.run(
        "--context-window", WINDOW, "--yes", stdin=b"go\n", env={"ANTHROPIC_API_KEY": SECRET}
    )

    sound(process)
    (result,) = (str(r["content"]) for r in tool_results(keyed.script.conversation[1]))
    assert "bytes of output omitted" in result
    assert result.startswith("x" * 14990 + "[redacted"), result[14980:15050]
    nowhere(keyed, [SECRET[:10], SECRET[-10:]], process.text_out)


def test_secrets_are_known_by_name_and_by_shape_and_copies_are_redacted() -> None:
    from agentloop._agent.secrets import is_secret, redact, scrubbed_environment

    for name, value in CREDENTIALS.items():
        assert is_secret(name, value) == (name != "PLAIN_SETTING"), name
    for name in ("PWD", "OLDPWD", "TOKENIZERS_PARALLELISM", "MONKEY_BUSINESS", "GIT_AUTHOR"):
        assert not is_secret(name, "/home/someone"), name
    shaped = {
        "SOME_URL": "https://user:hunter22@example.com/x",
        "UPSTREAM": "ghp_" + "A1b2" * 9,
        "CI_THING": "xoxb-1234567890-abcdefghij",
    }
    for name, value in shaped.items():
        assert is_secret(name, value), name  # by the value's shape
    assert not is_secret("GIT_URL", "ssh://git@github.com/org/repo.git")
    assert scrubbed_environment({**shaped, "PATH": "/bin"}) == {"PATH": "/bin"}

    env = {"API_TOKEN": "s3cr3t-value-1234"}
    value = env["API_TOKEN"]
    text = " | ".join(
        [value[::-1], base64.b64encode(b"x" + value.encode()).decode(), value.encode().hex()]
    )
    assert redact(text, env).count("[redacted $API_TOKEN]") == 3
    assert redact("clone https://bob:pa55word@host/repo", {}) == (
        "clone https://bob:[redacted]@host/repo"
    )
    assert redact("token ghp_" + "A1b2" * 9 + " end", {}) == "token [redacted token] end"
