"""``kill -9`` of the ``agentloop`` console script at seeded random points, in chains of runs on
one store (SQLite or PostgreSQL), with the invariants checked after each run. Used by
``tests/test_faults_kill.py`` (a sample) and ``benchmarks/stress_faults.py`` (the big counts).

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
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fake_api import FakeAnthropicServer, ReplySpec, ToolCall, dropped_reply, text_reply, tool_reply

import support.store_contract as store_contract
from sessions import open_store
from support.loop_scripts import SUMMARY, filler, is_summary_request
from support.processes import HANG_GUARD, WINDOW, AgentProcess, CliPlace, check_store, cli_env

REPAIR = "interrupted: the tool may have run; its result is unknown"
Backend = Literal["sqlite", "postgresql"]

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
        return self._spring(plan if at else None, run) or reply

    def compaction(self, body: dict[str, Any]) -> ReplySpec | None:
        """An on-demand compaction request (the API writes the summary, the default model's
        path): a summary request like any other for the kill points; None: the server's own
        summary is sent."""
        with self.lock:
            run = self.run
            assert run is not None, "a request outside of any run"
            plan = run.plan
            run.summaries += 1
            at = plan is not None and plan.summary and run.summaries == plan.index
        return self._spring(plan if at else None, run)

    def _spring(self, plan: Plan | None, run: RunState) -> ReplySpec | None:
        """The kill point of ``plan`` reached (None: not this request): a reply that never
        comes for the waiting kinds, else None (the reply goes out; a racing kill follows)."""
        if plan is None:
            return None
        if plan.kind.endswith("waiting"):
            run.trigger()
            run.release.wait(HANG_GUARD)  # the test kills the run meanwhile
            return dropped_reply("never seen", after_events=0, framing="chunked")
        if plan.kind.endswith("racing"):
            run.trigger()  # the test kills the run once `delay` has passed
        return None

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
class Chain(CliPlace):
    """One chain of runs on one store (``location``: a file or a ``postgresql://`` URL)."""

    number: int
    script: KillScript
    rng: random.Random
    backend: Backend
    location: str
    seed: int
    forked: bool
    """Runs forked from the zygote (:mod:`support.zygote`) instead of exec'd."""
    planned: dict[str, int] = field(default_factory=dict)
    """Runs by the kind of kill point planned (a plan may miss: the run ended first)."""
    kills: dict[str, int] = field(default_factory=dict)
    killed_tools: list[str] = field(default_factory=list)
    transcript: list[str] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        return cli_env(self.home, self.server.base_url, AGENTLOOP_STORE=self.location, **extra)


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
    process = AgentProcess(args, cwd=chain.workspace, env=chain.env(), forked=chain.forked)
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
    if plan is not None:
        chain.planned[plan.kind] = chain.planned.get(plan.kind, 0) + 1
    chain.kills[what] = chain.kills.get(what, 0) + 1
    chain.transcript.append(f"{chain.backend} run {number}: {plan} -> {what} (exit {code})")

    # The invariants, after every run.
    assert "Traceback" not in process.text_err, process.text_err
    where = f"chain {chain.number} (seed {chain.seed}), {chain.transcript[-1]}"
    assert process.error_lines() == [], (where, process.text_err)
    if what == "ended":
        assert code == 0, process.text_err
    check = check_store(chain.location)
    for line in process.printed_lines():
        # (A compaction may keep a reply verbatim in the child too: stored, maybe twice.)
        assert line in check.assistant_texts, f"{where}: printed but not stored: {line!r}"
    if killed_group is not None:
        assert state.killed_tool is not None
        chain.killed_tools.append(state.killed_tool)
        assert group_gone(killed_group), f"{where}: the killed run's command outlived it"
    return process


def run_chain(chain: Chain, runs: int) -> Chain:
    """``runs`` killed runs, then one that ends by itself; the chain-wide invariants."""
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
    results = check_store(chain.location).tool_results
    for tool_id in chain.killed_tools:
        assert REPAIR in results[tool_id], (tool_id, results.get(tool_id))
    # Every run went on with the one conversation (its compactions are in its lineage).
    with open_store(chain.location, read_only=True) as store:
        assert store.count_conversations() == 1
    return chain


@contextlib.contextmanager
def chains(
    root: Path, backends: list[Backend], seed: int, *, forked: bool = False
) -> Iterator[list[Chain]]:
    """One chain per entry of ``backends``, each on its own store (a fresh PostgreSQL schema,
    dropped afterwards), workspace and fake API. On leaving: no server saw a request that
    breaks the API's rules."""
    made: list[Chain] = []
    with contextlib.ExitStack() as stack:
        for number, backend in enumerate(backends):
            chain_seed = seed * 100 + number
            script = KillScript(number, chain_seed)
            server = stack.enter_context(FakeAnthropicServer(handler=script))
            server.compaction_handler = script.compaction
            place = root / f"chain{number}"
            if backend == "postgresql":
                schema = store_contract.fresh_schema()
                stack.callback(store_contract.drop_schema, schema)
                location = store_contract.with_schema(store_contract.postgres_url(), schema)
            else:
                location = str(place / "home" / "sessions.db")
            made.append(
                Chain(
                    root=place,
                    server=server,
                    number=number,
                    script=script,
                    rng=random.Random(seed * 100 + 50 + number),
                    backend=backend,
                    location=location,
                    seed=seed,
                    forked=forked,
                )
            )
        yield made
        for chain in made:
            assert chain.server.violations == [], chain.server.violations


def run_chains(made: list[Chain], runs: int) -> dict[str, int]:
    """``runs`` killed runs spread over the chains, the chains side by side (one thread each);
    how the runs ended, by kind (``killed <kind>`` or ``ended``)."""
    count = len(made)
    per_chain = [runs // count + (1 if n < runs % count else 0) for n in range(count)]
    with ThreadPoolExecutor(count) as pool:
        done = list(pool.map(run_chain, made, per_chain))
    kills: dict[str, int] = {}
    for chain in done:
        for what, n in chain.kills.items():
            kills[what] = kills.get(what, 0) + n
    return kills
