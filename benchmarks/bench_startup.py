"""Benchmark of the command line: start-up, `sessions list` and `sessions export`; prints a table.

    python benchmarks/bench_startup.py [--runs 5] [--sessions 10000] [--messages 10000]

Measured in one run, beside a bare `python -c "import anthropic"` (and, for `--help`, a bare
`python -c "pass"`):

- time to first request for `agentloop -p hi`: from starting the process to the fake Messages
  API (on 127.0.0.1) receiving the conversation request, and how long the process takes to exit
  once the reply is sent;
- time to the prompt for the interactive mode: from starting the process in a pseudo-terminal
  to the prompt being drawn (the SDK and the tokenizer still load in the background then);
- `agentloop sessions list` over 10,000 sessions: everywhere (`--all`), here, and every
  generation (`--all-generations`), each <= 150 ms wall, start-up included (it imports no
  pydantic: tests/test_listing_imports.py);
- `agentloop sessions export` of a 10,000-message session to Markdown (target <= 1 s wall).

Every command runs as a subprocess of the installed console script's module with the working
tree first on PYTHONPATH and its own AGENTLOOP_HOME; the model's limits are cached by a first,
unmeasured run, so no Models API call is counted.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fake_api import FakeAnthropicServer, ReplySpec, text_reply  # noqa: E402

from sessions import NewMessage, open_store, workspace_key  # noqa: E402

AGENTLOOP = [sys.executable, "-m", "agentloop"]


def environment(home: Path, base_url: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "AGENTLOOP_"))}
    env.update(AGENTLOOP_HOME=str(home), PYTHONPATH=str(REPO))
    if base_url:
        env.update(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="test-key")
    return env


def wall(command: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, timeout=120)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command} failed: {done.stderr.decode()[-2000:]}")
    return elapsed


class FirstRequest:
    """The fake model: notes when the conversation request arrives and when it answered."""

    def __init__(self) -> None:
        self.arrived: float | None = None
        self.answered: float | None = None

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        if self.arrived is None:
            self.arrived = time.perf_counter()
        self.answered = time.perf_counter()
        return text_reply("hello")


def bench_print(home: Path, work: Path, runs: int) -> tuple[list[float], list[float]]:
    first: list[float] = []
    exits: list[float] = []
    with FakeAnthropicServer() as server:
        env = environment(home, server.base_url)
        server.handler = FirstRequest()
        wall([*AGENTLOOP, "-p", "warm the model cache"], env, work)
        for _ in range(runs):
            handler = FirstRequest()
            server.handler = handler
            start = time.perf_counter()
            done = subprocess.run(
                [*AGENTLOOP, "-p", "hi"], env=env, cwd=work, capture_output=True, timeout=120
            )
            end = time.perf_counter()
            if done.returncode != 0 or handler.arrived is None or handler.answered is None:
                raise SystemExit(f"-p failed: {done.stderr.decode()[-2000:]}")
            first.append(handler.arrived - start)
            exits.append(end - handler.answered)
    return first, exits


def time_to_prompt(home: Path, work: Path, base_url: str) -> float:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = environment(home, base_url)
    env.update(TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")
    start = time.perf_counter()
    process = subprocess.Popen(
        AGENTLOOP, stdin=slave, stdout=slave, stderr=slave, cwd=work, env=env,
        start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    seen = b""
    try:
        while "›".encode() not in seen:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                raise SystemExit(f"no prompt within 60 s: {seen[-500:]!r}")
            seen += os.read(master, 65536)
        elapsed = time.perf_counter() - start
        os.write(master, b"\x04")  # Ctrl-D on the empty line: quit
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    return elapsed


def seed_sessions(path: Path, count: int, workspace: str) -> None:
    with open_store(path) as store:
        for n in range(count):
            session = store.create_session(
                model="claude-sonnet-5-5", workspace=workspace, title=f"conversation {n}"
            )
            store.append_messages(
                session.id,
                [
                    NewMessage(role="user", content=[{"type": "text", "text": f"question {n}"}]),
                    NewMessage(role="assistant", content=[{"type": "text", "text": "answer"}]),
                ],
            )


def seed_long_session(path: Path, count: int, workspace: str) -> str:
    output = "line of tool output with ``` backticks ```` inside\n" * 40
    with open_store(path) as store:
        session = store.create_session(model="claude-sonnet-5-5", workspace=workspace)
        batch: list[NewMessage] = []
        for n in range(count):
            if n % 2 == 0:
                content: list[dict[str, Any]] = (
                    [{"type": "tool_result", "tool_use_id": f"toolu_{n - 1}", "content": output}]
                    if n
                    else [{"type": "text", "text": "## Goal\nstart <summary>"}]
                )
                batch.append(NewMessage(role="user", content=content))
            else:
                batch.append(
                    NewMessage(
                        role="assistant",
                        content=[
                            {"type": "text", "text": f"step {n}: reading the file"},
                            {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file",
                             "input": {"path": f"src/module_{n}.py"}},
                        ],
                    )
                )  # fmt: skip
            if len(batch) == 500:
                store.append_messages(session.id, batch)
                batch = []
        if batch:
            store.append_messages(session.id, batch)
        return session.id


def median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:,.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        work = base / "work"
        work.mkdir()
        home = base / "home"
        sdk = [
            wall([sys.executable, "-c", "import anthropic"], environment(home), work)
            for _ in range(args.runs)
        ]
        rows.append(('python -c "import anthropic"', median_ms(sdk), "-"))
        first, exits = bench_print(home, work, args.runs)
        rows.append(("agentloop -p hi: time to first request", median_ms(first), "-"))
        rows.append(("agentloop -p hi: exit after the reply", median_ms(exits), "-"))
        with FakeAnthropicServer(handler=FirstRequest()) as server:
            prompt = [time_to_prompt(home, work, server.base_url) for _ in range(args.runs)]
        rows.append(("agentloop (interactive): time to the prompt", median_ms(prompt), "-"))
        bare = [
            wall([sys.executable, "-c", "pass"], environment(home), work) for _ in range(args.runs)
        ]
        rows.append(('python -c "pass" (the interpreter alone)', median_ms(bare), "-"))
        helped = [wall([*AGENTLOOP, "--help"], environment(home), work) for _ in range(args.runs)]
        rows.append(("agentloop --help", median_ms(helped), "-"))

        store_home = base / "store-home"
        seed_sessions(store_home / "sessions.db", args.sessions, workspace_key(work))
        env = environment(store_home)
        listed = [
            wall([*AGENTLOOP, "sessions", "list", "--all"], env, work) for _ in range(args.runs)
        ]
        rows.append(
            (f"sessions list --all ({args.sessions:,} sessions)", median_ms(listed), "150 ms")
        )
        here = [wall([*AGENTLOOP, "sessions", "list"], env, work) for _ in range(args.runs)]
        rows.append((f"sessions list ({args.sessions:,} here)", median_ms(here), "150 ms"))
        generations = [
            wall([*AGENTLOOP, "sessions", "list", "--all-generations"], env, work)
            for _ in range(args.runs)
        ]
        rows.append(
            (
                f"sessions list --all-generations ({args.sessions:,})",
                median_ms(generations),
                "150 ms",
            )
        )

        long_home = base / "long-home"
        session = seed_long_session(long_home / "sessions.db", args.messages, workspace_key(work))
        env = environment(long_home)
        exported = [
            wall([*AGENTLOOP, "sessions", "export", session], env, work) for _ in range(args.runs)
        ]
        rows.append((f"sessions export ({args.messages:,} messages)", median_ms(exported), "1 s"))

    width = max(len(label) for label, _, _ in rows)
    print(f"{'measure'.ljust(width)}  {'median':>9}  {'target':>7}")
    print("-" * (width + 20))
    for label, value, target in rows:
        print(f"{label.ljust(width)}  {value:>9}  {target:>7}")
    print(f"\n{args.runs} runs each; Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
