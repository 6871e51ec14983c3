"""Fault injection (issue 10), the process: ``kill -9`` of the ``agentloop`` console script at
seeded random points, over a bounded number of runs, with the invariants checked after each.

Two chains run side by side (one core each), each on its own store, workspace and fake API.
Every run continues the chain's conversation (``--continue --yes``, a small window so that
compactions happen, stdin a pipe) and is killed at a point its plan picks: while it waits for a
reply, at a random moment (0-80 ms) after a reply left the server (streaming, storing, printing,
the next request...), the moment a reply's line is complete on stdout, while a shell command
runs, while it waits for a summary, or at a random moment after the summary left the server
(saving the compaction). After each kill:

- SQLite's ``PRAGMA integrity_check`` is ok, and every stored session obeys the API's rules as
  agentloop messages (:func:`check_store`);
- every reply the run printed (a complete line on stdout) is stored;
- a killed shell command's process group is gone (no orphan keeps running);
- the next run's ``--continue``, started at once (the killed run's lease is stale: its pid is
  gone), repairs and goes on: no run ever reports an error, every killed tool call is answered
  "interrupted: the tool may have run; its result is unknown", and the chain stays one
  conversation.

``AGENTLOOP_FAULT_RUNS`` (default 30) and ``AGENTLOOP_FAULT_SEED`` change the number of runs and
the seed. :class:`AgentProcess` (the console script in a subprocess, its output collected as it
comes) is shared by the other ``test_faults_*`` files.
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from fake_api import FakeAnthropicServer, ReplySpec, ToolCall, dropped_reply, text_reply, tool_reply
from test_faults_stream import check_store
from test_loop import SUMMARY, filler, is_summary_request

from sessions import open_store

AGENTLOOP = Path(sys.executable).parent / "agentloop"
WINDOW = "6000"
RUNS = int(os.environ.get("AGENTLOOP_FAULT_RUNS", "30"))
SEED = int(os.environ.get("AGENTLOOP_FAULT_SEED", "10"))
CHAINS = 2
HANG_GUARD = 60.0
"""Seconds any wait may last before the test fails: a bound for a hang, never a pace."""
REPAIR = "interrupted: the tool may have run; its result is unknown"


# -- the console script in a subprocess -------------------------------------------------------


def cli_env(home: Path, base_url: str, **extra: str) -> dict[str, str]:
    """The environment of an ``agentloop`` run against the fake API, its data under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="test-key",
        AGENTLOOP_HOME=str(home),
        AGENTLOOP_CONFIG_DIR=str(home / "config"),
        HOME=str(home),
    )
    env.update(extra)
    return env


class AgentProcess:
    """``agentloop`` with stdin, stdout and stderr pipes; the output is collected as it comes."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        command: Sequence[str] = (),
        pass_fds: Sequence[int] = (),
    ) -> None:
        """``command``: what runs the console script (e.g. a wrapper that waits for a
        barrier before it execs); ``pass_fds``: descriptors the process inherits."""
        self.popen = subprocess.Popen(
            [*command, str(AGENTLOOP), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            pass_fds=tuple(pass_fds),
        )
        self.out = bytearray()
        self.err = bytearray()
        self.changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._collect, args=(stream, buffer), daemon=True)
            for stream, buffer in ((self.popen.stdout, self.out), (self.popen.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()
        self.exited = threading.Event()
        threading.Thread(target=self._watch_exit, daemon=True).start()

    def _watch_exit(self) -> None:
        self.popen.wait()
        self.exited.set()
        self.poke()

    def _collect(self, stream: Any, buffer: bytearray) -> None:
        fd = stream.fileno()
        while chunk := os.read(fd, 65_536):
            with self.changed:
                buffer += chunk
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def send(self, data: bytes) -> None:
        """Write to stdin (a process that is gone already just does not read it)."""
        assert self.popen.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.popen.stdin.write(data)
            self.popen.stdin.flush()

    def close_stdin(self) -> None:
        assert self.popen.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.popen.stdin.close()

    def poke(self) -> None:
        """Have :meth:`wait_for` check its predicate now (something else than output changed)."""
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = HANG_GUARD) -> bool:
        """Wait until ``predicate()`` (checked whenever output arrives, or on :meth:`poke`) or
        the process is gone."""
        with self.changed:
            return self.changed.wait_for(lambda: predicate() or self.exited.is_set(), timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGKILL)
        self.finish()

    def finish(self, timeout: float = HANG_GUARD) -> int:
        """Close stdin, wait for the exit and for all of its output; the exit code."""
        self.close_stdin()
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            raise
        for reader in self._readers:
            reader.join(timeout)
        return code

    @property
    def text_out(self) -> str:
        return self.out.decode("utf-8", "replace")

    @property
    def text_err(self) -> str:
        return self.err.decode("utf-8", "replace")

    def printed_lines(self) -> list[str]:
        """The complete lines on stdout (a reply being streamed when it died has no end)."""
        return self.text_out.split("\n")[:-1]

    def error_lines(self) -> list[str]:
        return [line for line in self.text_err.splitlines() if "agentloop: error:" in line]


# -- a chain of killed runs ------------------------------------------------------------------

Kind = Literal["waiting", "racing", "printed", "tool", "summary-waiting", "summary-racing"]
KINDS: tuple[Kind, ...] = (
    "waiting",
    "racing",
    "printed",
    "tool",
    "summary-waiting",
    "summary-racing",
)


@dataclass
class Plan:
    """Where a run is killed: at the ``index``-th conversation request (or summary request) of
    the run, for the racing kinds ``delay`` seconds after its reply left the server; or, for
    ``printed``, the moment the ``index``-th reply line is complete on stdout."""

    kind: Kind
    index: int
    delay: float

    @property
    def summary(self) -> bool:
        return self.kind.startswith("summary")


@dataclass
class RunState:
    """One run, as the fake API sees it (written by its threads, read by the test's)."""

    chain: int
    number: int
    plan: Plan | None
    """None: a run that is never killed."""
    fifo: Path
    conversation: int = 0
    summaries: int = 0
    triggered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    killed_tool: str | None = None
    process: AgentProcess | None = None

    def trigger(self) -> None:
        """The kill point is reached: wake the test's thread."""
        self.triggered.set()
        if self.process is not None:
            self.process.poke()


class KillScript:
    """The fake model of one chain: replies with filler text (growing the context so that it
    compacts), shell commands, summaries; it springs the run's kill point."""

    def __init__(self, chain: int, seed: int) -> None:
        self.chain = chain
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.run: RunState | None = None

    def __call__(self, body: dict[str, Any]) -> ReplySpec:
        with self.lock:
            run = self.run
            assert run is not None, "a request outside of any run"
            plan = run.plan
            if is_summary_request(body):
                run.summaries += 1
                at = plan is not None and plan.summary and run.summaries == plan.index
                reply: ReplySpec = text_reply(SUMMARY, framing="chunked")
            else:
                run.conversation += 1
                at = plan is not None and not plan.summary and run.conversation == plan.index
                in_tool = at and plan is not None and plan.kind == "tool"
                reply = self._conversation_reply(body, run, in_tool)
        if plan is None or not at:
            return reply
        if plan.kind.endswith("waiting"):
            run.trigger()
            run.release.wait(HANG_GUARD)  # the test kills the run meanwhile
            return dropped_reply("never seen", after_events=0, framing="chunked")
        if plan.kind.endswith("racing"):
            run.trigger()  # the test kills the run once `delay` has passed
        return reply

    def _conversation_reply(
        self, body: dict[str, Any], run: RunState, kill_in_tool: bool
    ) -> ReplySpec:
        label = f"c{self.chain}r{run.number}n{run.conversation}"
        last = body["messages"][-1]["content"]
        after_tool = any(block.get("type") == "tool_result" for block in last)
        if kill_in_tool or (not after_tool and self.rng.random() < 0.4):
            tool_id = f"toolu_{label}"
            if kill_in_tool:
                run.killed_tool = tool_id
                # The output fills the pipe until the agent reads it, which it does only once
                # it watches the command's group: the kill comes after that. (A kill in the
                # instant between the start of a command and that watch orphans the command:
                # a gap of its own, which no test here can hit on purpose.)
                command = f"seq 1 40000; echo $$ > {run.fifo}; sleep 120"
            else:
                command = f"echo ran {label}"
            call = ToolCall("run_command", {"command": command}, id=tool_id)
            return tool_reply(call, framing="chunked")
        # One line on stdout per reply; the words grow the context towards a compaction.
        return text_reply(filler(f"reply {label}", self.rng.randint(60, 160)), framing="chunked")


@dataclass
class CliPlace:
    """Where runs of the console script keep their data against ``server``: ``root/home``
    (the store, the config) and ``root/project`` (the workspace)."""

    root: Path
    server: FakeAnthropicServer

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def workspace(self) -> Path:
        return self.root / "project"

    @property
    def store(self) -> Path:
        return self.home / "sessions.db"

    def env(self, **extra: str) -> dict[str, str]:
        return cli_env(self.home, self.server.base_url, **extra)


@dataclass
class Chain(CliPlace):
    number: int
    script: KillScript
    rng: random.Random
    kills: dict[str, int] = field(default_factory=dict)
    killed_tools: list[str] = field(default_factory=list)
    transcript: list[str] = field(default_factory=list)


def plans(rng: random.Random, runs: int) -> list[Plan]:
    """Each kind about as often as the others, in a seeded order; the first run is never a
    summary kill (there is nothing to compact yet)."""
    kinds = [KINDS[n % len(KINDS)] for n in range(runs)]
    rng.shuffle(kinds)
    if kinds and kinds[0].startswith("summary"):
        swap = next((i for i, kind in enumerate(kinds) if not kind.startswith("summary")), 0)
        kinds[0], kinds[swap] = kinds[swap], kinds[0]
    # A summary kill at the run's first summary request: a compaction often takes only one.
    return [
        Plan(kind, 1 if kind.startswith("summary") else rng.randint(1, 3), rng.uniform(0, 0.08))
        for kind in kinds
    ]


def user_lines(chain: int, number: int, plan: Plan | None, rng: random.Random) -> bytes:
    lines = [filler(f"chain {chain} run {number} line {n}", rng.randint(30, 90)) for n in range(3)]
    if plan is not None and plan.summary:
        lines.insert(rng.randint(0, len(lines)), "/compact")  # a compaction in every such run
    return "".join(f"{line}\n" for line in lines).encode()


def wait_killed_tool(fifo_fd: int, process: AgentProcess) -> int | None:
    """The shell pid (its process group) that the killed run's command wrote to the FIFO once it
    started; None if the run ended first."""
    pidfd = os.pidfd_open(process.popen.pid)
    try:
        ready, _, _ = select.select([fifo_fd, pidfd], [], [], HANG_GUARD)
    finally:
        os.close(pidfd)
    if fifo_fd not in ready:
        return None
    data = os.read(fifo_fd, 64).decode().strip()
    return int(data) if data else None


def group_gone(pid: int) -> bool:
    """Whether the command's shell (the leader of its group) ends within the hang guard: the
    watchdog kills the group when the agent dies. A group still there is killed here."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([pidfd], [], [], HANG_GUARD)
    finally:
        os.close(pidfd)
    if not ready:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    return bool(ready)


def one_run(chain: Chain, number: int, plan: Plan | None) -> AgentProcess:
    """Start a run, let it reach its kill point, kill it (a run without a plan ends by
    itself); check the invariants; the finished process."""
    fifo = chain.root / f"tool-{number}.fifo"
    os.mkfifo(fifo)
    # Read-write: the FIFO always has a writer (us), so it is readable only once data comes.
    fifo_fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    state = RunState(chain.number, number, plan, fifo)
    with chain.script.lock:
        chain.script.run = state
    args = ["--context-window", WINDOW, "--yes"] + (["--continue"] if number else [])
    env = chain.env()
    process = AgentProcess(args, cwd=chain.workspace, env=env)
    state.process = process
    killed_group: int | None = None
    try:
        process.send(user_lines(chain.number, number, plan, chain.rng))
        process.close_stdin()
        if plan is not None and plan.kind == "tool":
            killed_group = wait_killed_tool(fifo_fd, process)
            if killed_group is not None:
                process.kill()
        elif plan is not None and plan.kind == "printed":
            index = plan.index
            if process.wait_for(lambda: len(process.printed_lines()) >= index):
                process.kill()  # at once: a reply shown as complete must be stored by now
        elif plan is not None:
            process.wait_for(state.triggered.is_set)  # or the run ended before its kill point
            if state.triggered.is_set():
                if plan.kind.endswith("racing"):
                    time.sleep(plan.delay)  # not a wait for anything: a random kill point
                process.kill()
        code = process.finish()
    finally:
        state.release.set()
        os.close(fifo_fd)
        if process.popen.poll() is None:
            process.kill()
    what = f"killed {plan.kind}" if plan is not None and code == -signal.SIGKILL else "ended"
    chain.kills[what] = chain.kills.get(what, 0) + 1
    chain.transcript.append(f"run {number}: {plan} -> {what} (exit {code})")

    # The invariants, after every run.
    assert "Traceback" not in process.text_err, process.text_err
    where = f"chain {chain.number} (seed {SEED}), {chain.transcript[-1]}"
    assert process.error_lines() == [], (where, process.text_err)
    if what == "ended":
        assert code == 0, process.text_err
    check = check_store(chain.store)
    for line in process.printed_lines():
        # (A compaction may keep a reply verbatim in the child too: stored, maybe twice.)
        assert line in check.assistant_texts, f"{where}: printed but not stored: {line!r}"
    if killed_group is not None:
        assert state.killed_tool is not None
        chain.killed_tools.append(state.killed_tool)
        assert group_gone(killed_group), f"{where}: the killed run's command outlived it"
    return process


def run_chain(chain: Chain, runs: int) -> Chain:
    chain.workspace.mkdir(parents=True)
    (chain.workspace / "notes.txt").write_text("kill -9 fault runs\n")
    for number, plan in enumerate(plans(chain.rng, runs)):
        if number == 0 and plan.index == 1 and plan.kind != "tool":
            plan = Plan(plan.kind, 2, plan.delay)  # the first run stores something first
        one_run(chain, number, plan)
    # A last run, never killed: it resumes where the last kill left off and finishes.
    final = one_run(chain, runs, None)
    assert "Resuming session" in final.text_err
    assert final.printed_lines(), final.text_err
    # Every tool call that a kill interrupted was answered as "may have run".
    results = check_store(chain.store).tool_results
    for tool_id in chain.killed_tools:
        assert REPAIR in results[tool_id], (tool_id, results.get(tool_id))
    # Every run went on with the one conversation (its compactions are in its lineage).
    with open_store(chain.store, read_only=True) as store:
        assert store.count_conversations() == 1
    return chain


@pytest.fixture
def chains(tmp_path: Path) -> Iterator[list[Chain]]:
    made: list[Chain] = []
    with contextlib.ExitStack() as stack:
        for number in range(CHAINS):
            script = KillScript(number, SEED * 100 + number)
            server = stack.enter_context(FakeAnthropicServer(handler=script))
            made.append(
                Chain(
                    root=tmp_path / f"chain{number}",
                    server=server,
                    number=number,
                    script=script,
                    rng=random.Random(SEED * 100 + 50 + number),
                )
            )
        yield made
        for chain in made:
            assert chain.server.violations == [], chain.server.violations


def test_kill_9_at_random_points_leaves_a_sound_store_and_continue_repairs(
    chains: list[Chain],
) -> None:
    per_chain = [RUNS // CHAINS + (1 if n < RUNS % CHAINS else 0) for n in range(CHAINS)]
    with ThreadPoolExecutor(CHAINS) as pool:
        done = list(pool.map(run_chain, chains, per_chain))
    kills: dict[str, int] = {}
    for chain in done:
        for what, count in chain.kills.items():
            kills[what] = kills.get(what, 0) + count
    report = f"AGENTLOOP_FAULT_RUNS={RUNS} AGENTLOOP_FAULT_SEED={SEED}\n" + "\n".join(
        line for chain in done for line in chain.transcript
    )
    # The kill points were reached (a racing kill may come after the run ended), all kinds.
    killed = {what: n for what, n in kills.items() if what != "ended"}
    assert sum(killed.values()) >= RUNS * 3 // 4, report
    if CHAINS * len(KINDS) <= RUNS:
        for kind in KINDS:
            assert killed.get(f"killed {kind}", 0) >= 1, report
