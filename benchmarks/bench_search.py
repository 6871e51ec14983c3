"""Benchmark of full-text search over stored messages, SQLite beside PostgreSQL;
prints a table.

    python benchmarks/bench_search.py [--url postgresql://postgres@127.0.0.1:5432/test]
        [--messages 100000] [--runs 21] [--appends 301] [--sqlite-only | --postgres-only]

Targets: a search over 100,000 stored messages <= 50 ms (median), on both backends; appending
costs at most 20 % more with the index than without it.

The store holds ``--messages`` messages: half in one conversation compacted 50 times (a
lineage of 51 sessions, what ``search_history`` searches), half in 500 other conversations of
100 messages, spread over 5 workspaces. Texts are drawn from a Zipf-distributed vocabulary of
5,000 words (prose, commands, tool outputs); one detail ("the deploy key is ORCHID-7") is said
once in the big conversation and once in another. Searches: that rare detail, a word in about
1 % of the messages, one in about a third of them, and two words together, in the big
conversation, in a workspace (100 conversations) and in the whole store; through
``search_messages`` (SQL, excerpts, tool names: what the tool and the command get).

Append cost: the same store, a session per variant, appends interleaved with the index written
and not written (the indexing call replaced by a no-op; on SQLite in a second store, so that the
batches of index rows hold only the indexed appends' messages) and, on PostgreSQL, written in
the append's own transaction (how it was before its appends queued their messages): one 1 kB
message (the store benchmarks' message), and a turn of a 4 kB tool result and a 600-character
reply, 20 ms apart (less than a model call leaves between two turns' appends); medians and
means (both backends index in batches, on a thread of the store: SQLite every 64 messages,
PostgreSQL every 32 appends).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sessions import (  # noqa: E402
    NewMessage,
    SessionStore,
    open_store,
)

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
SECRET = "the deploy key is ORCHID-7, keep it out of the logs"


class Words:
    """A Zipf-like vocabulary: word k is drawn with weight 1/(k+1)."""

    def __init__(self, rng: random.Random, size: int = 5000) -> None:
        syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "da", "gor"]
        self.words = sorted(
            {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(size)}
        )
        rng.shuffle(self.words)
        self.weights = [1 / (k + 1) for k in range(len(self.words))]
        self.rng = rng

    def text(self, count: int) -> str:
        return " ".join(self.rng.choices(self.words, self.weights, k=count))


def said(role: Literal["user", "assistant"], text: str) -> NewMessage:
    return NewMessage(role=role, content=[{"type": "text", "text": text}])


def make_message(words: Words, n: int, rng: random.Random) -> list[NewMessage]:
    """A user request, or a tool round (call + result), or a reply: what a coding turn stores."""
    kind = n % 4
    if kind == 0:
        return [said("user", words.text(rng.randint(20, 60)))]
    if kind == 1:
        call = f"toolu_{n:08d}"
        return [
            NewMessage(
                role="assistant",
                content=[
                    {"type": "text", "text": words.text(rng.randint(10, 30))},
                    {
                        "type": "tool_use",
                        "id": call,
                        "name": rng.choice(["run_command", "read_file", "grep"]),
                        "input": {"command": f"pytest tests/test_{words.text(1)}.py -q"},
                    },
                ],
            ),
            NewMessage(
                role="user",
                content=[
                    {
                        "type": "tool_result",
                        "tool_use_id": call,
                        "content": words.text(rng.randint(100, 400)),
                    }
                ],
            ),
        ]
    return [said("assistant", words.text(rng.randint(40, 120)))]


def batch(words: Words, rng: random.Random, count: int, start: int) -> list[NewMessage]:
    messages: list[NewMessage] = []
    n = start
    while len(messages) < count:
        messages += make_message(words, n, rng)
        n += 1
    if messages[-1].role == "assistant" and messages[-1].content[-1].get("type") == "tool_use":
        messages.pop()
    return messages[:count]


def with_secret(messages: list[NewMessage]) -> list[NewMessage]:
    first = messages[0]
    text = f"{first.content[0]['text']} {SECRET}"
    return [said(first.role, text), *messages[1:]]


def build(store: SessionStore, total: int, rng: random.Random) -> tuple[str, str, str]:
    """The store described in the module docstring; returns the big conversation's head, a
    word in about 1 % of the messages and one in about a third of them."""
    words = Words(rng)
    half = total // 2
    per_session = max(half // 51, 2)
    root = store.create_session(model="m", workspace="/bench/w0", title="the long one")
    store.append_messages(root.id, with_secret(batch(words, rng, per_session, 0)))
    head = root
    made = per_session
    while made < half:
        child = store.transition(
            head.id, messages=batch(words, rng, 2, made), strategy="summarize", summary="s"
        )
        size = min(per_session, half - made)
        for start in range(0, size, 500):
            chunk = batch(words, rng, min(500, size - start), made + start)
            store.append_messages(child.id, chunk)
        head = child
        made += size + 2
    others = total - made
    for n in range(max(others // 100, 1)):
        other = store.create_session(model="m", workspace=f"/bench/w{n % 5}", title=f"task {n}")
        messages = batch(words, rng, 100, n * 100)
        store.append_messages(other.id, with_secret(messages) if n == 7 else messages)
    return head.id, words.words[1000], words.words[25]


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def mean_ms(samples: list[float]) -> float:
    return statistics.fmean(samples) * 1000


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def no_index() -> contextlib.AbstractContextManager[object]:
    """The store of before the index: appends write no index rows."""
    return mock.patch("sessions._sql_messages.index_messages", lambda *args, **kwargs: None)


def index_in_the_append() -> contextlib.AbstractContextManager[object]:
    """The store of before the batches (PostgreSQL): each append writes its index rows."""
    from sessions._sql_search import index_at_once

    def index(db: Any, root_id: str, rows: Any, **kwargs: Any) -> bool:
        index_at_once(db, root_id, rows)
        return False

    return mock.patch("sessions._sql_messages.index_messages", index)


def bench_searches(
    store: SessionStore, head: str, medium: str, common: str, runs: int
) -> list[tuple[str, float, int]]:
    cases: list[tuple[str, Callable[[], list[Any]]]] = [
        (
            "conversation: 'orchid' (2 messages)",
            lambda: store.search_messages("orchid", session_id=head),
        ),
        (
            f"conversation: '{medium}' (~1 %)",
            lambda: store.search_messages(medium, session_id=head),
        ),
        (
            f"conversation: '{common}' (~1/3)",
            lambda: store.search_messages(common, session_id=head),
        ),
        (
            f"conversation: '{medium} {common}'",
            lambda: store.search_messages(f"{medium} {common}", session_id=head),
        ),
        (
            "workspace: 'deploy key'",
            lambda: store.search_messages("deploy key", workspace="/bench/w2"),
        ),
        (
            f"workspace: '{common}'",
            lambda: store.search_messages(common, workspace="/bench/w2", limit=20),
        ),
        ("all: 'orchid'", lambda: store.search_messages("orchid", limit=20)),
        (f"all: '{medium}'", lambda: store.search_messages(medium, limit=20)),
        (f"all: '{common}'", lambda: store.search_messages(common, limit=20)),
    ]
    rows = []
    for label, function in cases:
        found = len(function())  # warm
        rows.append((label, median_ms([timed(function) for _ in range(runs)]), found))
    return rows


def set_durable(store: SessionStore, durable: bool) -> None:
    """Commits wait for the disk (the default), or not: the index's own cost, without the
    fsync that dominates (and varies) on this machine."""
    indexer: Any = getattr(store, "_indexer", None)
    if indexer is not None:  # a batch of the search index being written (SQLite)
        indexer.join()
    conn: Any = getattr(store, "_conn", None)
    if conn is None:
        raise SystemExit("the append benchmark needs a store with one connection")
    if type(store).__name__.startswith("Sqlite"):
        conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'OFF'}")
    else:
        conn.execute(f"SET synchronous_commit = {'on' if durable else 'off'}")


TURN_GAP = 0.02
"""Seconds between two turns' appends (a model call takes far longer): SQLite indexes a batch
on a thread of its own, between the turns."""


Variant = Literal["plain", "before", "now"]
AppendRow = tuple[str, dict[Variant, float]]


def bench_append(
    store: SessionStore, runs: int, plain_store: SessionStore | None = None, before: bool = False
) -> list[AppendRow]:
    """Appends without the index ("plain"), with it as the store writes it ("now") and, with
    ``before``, with the index rows written in the append's transaction ("before"; PostgreSQL
    until its appends queued their messages), interleaved. ``plain_store``: where the appends
    without the index go (SQLite: a store of its own, so that the batches written by the
    indexed appends hold only their own messages)."""
    rng = random.Random(7)
    words = Words(rng)
    stores: dict[Variant, SessionStore] = {"plain": plain_store or store}
    if before:
        stores["before"] = store
    stores["now"] = store
    sessions = {}
    start = batch(words, rng, 1000, 0)
    for variant, target in stores.items():
        sessions[variant] = target.create_session(model="m", workspace="/bench/append").id
        target.append_messages(sessions[variant], start)
    one = [said("user", "The parser now handles nested brackets. " * 25)]
    call = {"type": "tool_use", "id": "toolu_x", "name": "run_command", "input": {"command": "ls"}}
    turn = [
        NewMessage(
            role="user",
            content=[{"type": "tool_result", "tool_use_id": "toolu_x", "content": words.text(700)}],
        ),
        said("assistant", words.text(100)),
    ]
    modes: dict[Variant, Callable[[], contextlib.AbstractContextManager[object]]] = {
        "plain": no_index,
        "before": index_in_the_append,
        "now": contextlib.nullcontext,
    }
    rows: list[AppendRow] = []
    cases = (
        ("append 1 message (1 kB)", one, None, True),
        ("  1 message, commits not waiting for the disk", one, None, False),
        ("append a turn (4 kB tool result + reply)", turn, call, True),
        ("  a turn, commits not waiting for the disk", turn, call, False),
    )
    for label, messages, before_call, durable in cases:
        for target in stores.values():
            set_durable(target, durable)
        samples: dict[Variant, list[float]] = {variant: [] for variant in stores}
        for n in range(runs):
            if before_call is not None:
                asked = [NewMessage(role="assistant", content=[{**before_call, "id": f"t{n}"}])]
                for variant, target in stores.items():
                    target.append_messages(sessions[variant], asked)
                messages = [
                    NewMessage(
                        role="user",
                        content=[{**messages[0].content[0], "tool_use_id": f"t{n}"}],
                    ),
                    *messages[1:],
                ]
            # Interleaved, each first in turn: drift in the machine's load hits all alike.
            order = list(stores)
            shift = n % len(order)
            for variant in order[shift:] + order[:shift]:
                target, session = stores[variant], sessions[variant]
                with modes[variant]():
                    samples[variant].append(
                        timed(lambda: target.append_messages(session, messages))  # noqa: B023
                    )
            time.sleep(TURN_GAP)
        rows.append((label, {v: median_ms(x) for v, x in samples.items()}))
        # The mean counts every append, those slowed by a batch being indexed too.
        rows.append((f"{label}, mean", {v: mean_ms(x) for v, x in samples.items()}))
    for target in stores.values():
        set_durable(target, True)
    return rows


def run_backend(
    name: str, location: str, args: argparse.Namespace
) -> tuple[str, float, list[tuple[str, float, int]], list[AppendRow]]:
    rng = random.Random(23)
    with open_store(location) as store:
        started = time.perf_counter()
        head, medium, common = build(store, args.messages, rng)
        built = time.perf_counter() - started
        searches = bench_searches(store, head, medium, common, args.runs)
        if name == "SQLite":
            with open_store(str(Path(location).with_suffix(".plain.db"))) as plain:
                appends = bench_append(store, args.appends, plain)
        else:
            appends = bench_append(store, args.appends, before=True)
    return name, built, searches, appends


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--appends", type=int, default=301)
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--postgres-only", action="store_true")
    args = parser.parse_args()
    results = []
    if not args.postgres_only:
        with tempfile.TemporaryDirectory(prefix="bench-search-") as directory:
            results.append(run_backend("SQLite", str(Path(directory) / "search.db"), args))
    if not args.sqlite_only:
        import psycopg
        from psycopg import sql

        schema = f"bench_search_{uuid.uuid4().hex[:8]}"
        try:
            results.append(run_backend("PostgreSQL", f"{args.url}?schema={schema}", args))
        finally:
            with psycopg.connect(args.url, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
    names = [name for name, *_ in results]
    print(
        f"Search over {args.messages:,} stored messages, median of {args.runs} (target <= 50 ms)\n"
    )
    labels = [label for label, _, _ in results[0][2]]
    width = max(len(label) for label in labels)
    print(f"{'search'.ljust(width)}  " + "  ".join(f"{n:>16}" for n in names))
    for i, label in enumerate(labels):
        cells = [f"{r[2][i][1]:8.2f} ms ({r[2][i][2]:>2})" for r in results]
        print(f"{label.ljust(width)}  " + "  ".join(f"{c:>16}" for c in cells))
    print(
        f"\nAppend, median (and mean) of {args.appends}, {TURN_GAP * 1000:.0f} ms apart: "
        "without the index, then with it (target <= +20 %)"
    )
    heads: dict[Variant, str] = {
        "plain": "without",
        "before": "in the append (before)",
        "now": "in batches (now)",
    }
    for name, _, _, appends in results:
        variants = list(appends[0][1])
        width = max(len(label) for label, _ in appends)
        print(f"\n{name.ljust(width)}  " + "  ".join(f"{heads[v]:>24}" for v in variants))
        for label, figures in appends:
            plain = figures["plain"]
            cells = [f"{plain:.3f} ms"] + [
                f"{figures[v]:.3f} ms ({(figures[v] / plain - 1) * 100:+.0f} %)"
                for v in variants[1:]
            ]
            print(f"{label.ljust(width)}  " + "  ".join(f"{c:>24}" for c in cells))
    built = ", ".join(f"{name} {seconds:.0f} s" for name, seconds, *_ in results)
    print(f"\n(stores built in: {built}; Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
