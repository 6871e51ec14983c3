"""What survives a compaction, per kind of fact.

    python benchmarks/bench_survival.py [--size 240] [--seeds 0 1] [--markdown]
    python benchmarks/bench_survival.py --agents [--size 320] [--windows 200000 60000 16000]

Every transcript of the corpus (``tests/transcripts``: the generated ones and those recorded
through agentloop's own tools) is compacted 5 times in succession, as a long session is: the
history up to a cut, compacted; the compacted context plus the next part of the transcript,
compacted again; and so on. The summaries are the offline digest (deterministic, no model).
For every compaction the facts of the span it replaced (``agentloop._core.facts.receipt``: paths
touched, commands and how they ended, error lines, numbers the user gave, user requests, todo
states) are looked for:

* (a) verbatim in the compacted context, the summary's text left out;
* (b) by one ``search_history`` query, the tool's real search over the stored history;
* (c) stale or wrong: the context shows another state than the history's latest (a todo done
  shown open, a command's older exit code, a file shown unchanged that a file tool changed
  since, a test shown failing that passed since);
* (d) in the summary alone (the digest), for comparison.

"after 5" looks for the facts of every span of the transcript in the context after its fifth
compaction. Importable: ``tests/test_survival.py`` runs :func:`measure` and asserts the targets.

Then the sessions of other agents' tools (Claude Code, pi, OpenHands, Codex), at 200k, 60k and
16k windows, with a summary of one bare sentence, measured against the generator's own record
of what happened: see ``survival_agents`` (``--agents`` for that table alone; its CI test is
``tests/test_survival_agents.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import survival_agents  # noqa: E402
from fake_api import FakeAnthropicServer  # noqa: E402
from transcripts import CORPUS, Transcript  # noqa: E402
from transcripts.recorded import RECORDED  # noqa: E402

from agentloop import (  # noqa: E402
    CompactionSettings,
    ConversationCompacter,
    Message,
    as_messages,
    default_tool_facts,
)
from agentloop._adapters.records import to_record  # noqa: E402
from agentloop._agent.search_history import SearchHistoryTool  # noqa: E402
from agentloop._core.facts.ledger import Ledger, find_ledger  # noqa: E402
from agentloop._core.facts.receipt import (  # noqa: E402
    KINDS,
    LABELS,
    Fact,
    Kind,
    context_text,
    present,
    receipt,
    span_facts,
)
from agentloop._sessions import SessionStore, open_store  # noqa: E402

FACTS = default_tool_facts()
"""What each call did, as a compaction through the public API reads it."""

MODEL = "claude-sonnet-4-6"
WINDOW = 200_000
COMPACTIONS = 5
TARGETS: dict[Kind, tuple[float, float]] = {
    "paths": (1.0, 0.0),
    "commands": (1.0, 0.0),
    "todos": (1.0, 0.0),
    "errors": (0.95, 1.0),
    "requests": (0.95, 1.0),
}
"""Per kind: the share that must be in the context, and the share recoverable by a search
(the targets; none is set for numbers, and none is stale anywhere)."""


@dataclass
class Tally:
    facts: int = 0
    in_context: int = 0
    recoverable: int = 0
    stale: int = 0
    in_summary: int = 0
    missed: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.facts += other.facts
        self.in_context += other.in_context
        self.recoverable += other.recoverable
        self.stale += other.stale
        self.in_summary += other.in_summary
        self.missed += other.missed


@dataclass
class Survival:
    """Per kind: every compaction's span, and every span after the last compaction."""

    each: dict[Kind, Tally] = field(default_factory=lambda: {k: Tally() for k in KINDS})
    after: dict[Kind, Tally] = field(default_factory=lambda: {k: Tally() for k in KINDS})
    compactions: int = 0
    transcripts: int = 0

    def misses(self) -> list[str]:
        """Every target the measure falls short of, said."""
        out = []
        for label, table in (("each compaction", self.each), ("after 5", self.after)):
            for kind, (in_context, recoverable) in TARGETS.items():
                tally = table[kind]
                if not tally.facts:
                    out.append(f"{label}: no {kind} facts in the corpus")
                    continue
                if tally.in_context < in_context * tally.facts:
                    out.append(f"{label}: {kind} {tally.in_context}/{tally.facts} in context")
                if tally.recoverable < recoverable * tally.facts:
                    out.append(f"{label}: {kind} {tally.recoverable}/{tally.facts} recoverable")
            for kind in KINDS:
                if table[kind].stale:
                    out.append(f"{label}: {table[kind].stale} stale {kind}")
        return out


def _truth_changed(history: Sequence[Message]) -> dict[str, bool]:
    """Per path: whether a file tool wrote it after the model last saw all of it (a whole
    read, or a write), by the history itself."""
    changed: dict[str, bool] = {}
    calls: dict[str, tuple[str, dict[str, object]]] = {}
    for message in history:
        for block in message.content:
            if block.get("type") == "tool_use":
                calls[str(block.get("id"))] = (str(block.get("name")), dict(block["input"]))
            elif block.get("type") == "tool_result" and not block.get("is_error"):
                name, tool_input = calls.pop(str(block.get("tool_use_id")), ("", {}))
                path = tool_input.get("path")
                whole = "offset" not in tool_input and "limit" not in tool_input
                if not isinstance(path, str):
                    continue
                if name == "edit_file":
                    changed[path] = True
                elif name == "write_file" or (name == "read_file" and whole):
                    changed[path] = False
    return changed


def stale(fact: Fact, ledger: Ledger | None, changed: dict[str, bool]) -> bool:
    """Whether the context's ledger shows ``fact`` in another state than the history's."""
    if ledger is None:
        return False
    if fact.kind == "commands":
        command, outcome = fact.needles
        return any(c.command == command and c.outcome != outcome for c in ledger.commands)
    if fact.kind == "todos":
        content = fact.needles[0].partition("] ")[2]
        content = content.removeprefix("(in progress) ")
        shown = [(s, c) for s, c in ledger.todos if c == content]
        want = fact.needles[0]
        marks = {"completed": "[x]", "in_progress": "[ ] (in progress)", "pending": "[ ]"}
        return any(f"{marks.get(s, '[ ]')} {c}" != want for s, c in shown)
    if fact.kind == "paths":
        path = fact.needles[0]
        return any(
            f.path == path and f.state.startswith("unchanged") and changed.get(path, False)
            for f in ledger.files
        )
    return False


def recoverable(fact: Fact, tool: SearchHistoryTool) -> bool:
    result = tool.run({"query": fact.query or fact.needles[0], "limit": 12, "excerpt_chars": 600})
    text = " ".join(result.content.split())
    return all(" ".join(n.split())[:200] in text for n in fact.needles[:1])


def _store_session(store: SessionStore, history: Sequence[Message]) -> str:
    session = store.create_session(model=MODEL, workspace="/bench/survival")
    store.append_messages(session.id, [to_record(m) for m in history])
    return session.id


def measure_transcript(
    transcript: Transcript,
    store: SessionStore,
    survival: Survival,
    *,
    compactions: int,
    window: int = WINDOW,
) -> None:
    """Compact ``transcript`` ``compactions`` times in succession and tally every span."""
    original = as_messages(transcript.messages)
    tool = SearchHistoryTool(store, _store_session(store, original))
    found: dict[Fact, bool] = {}

    def search(fact: Fact) -> bool:
        if fact not in found:  # the same fact is looked for again after the last compaction
            found[fact] = recoverable(fact, tool)
        return found[fact]

    compacter = ConversationCompacter(
        model_name=MODEL,
        context_window=window,
        settings=CompactionSettings(strategy="summarize"),
    )
    context: list[Message] = []
    index: list[int | None] = []  # the original index of each context message (None: prefix)
    done = 0
    child: list[Message] = []
    spans: list[tuple[int, int]] = []
    for cut in survival_agents.cuts(original, compactions)[:compactions]:
        context += original[done:cut]
        index += list(range(done, cut))
        done = cut
        transition = compacter.compact_and_transition(
            "bench", context, system=transcript.system, tools=transcript.tools, force=True
        )
        if transition is None:
            continue
        child = list(transition.compacted_messages)
        tail = len(child) - 1
        replaced = [i for i in index[: len(index) - tail] if i is not None]
        start, end = replaced[0], replaced[-1] + 1
        spans.append((start, end))
        history = original[:cut]
        ledger, changed = find_ledger(child), _truth_changed(history)
        summary = transition.summary.summary
        context_all = context_text(child, without=(summary,))
        digest = context_text([Message.user(summary or "-")])
        for fact in span_facts(history, start, end, FACTS):
            tally = survival.each[fact.kind]
            tally.facts += 1
            if present(fact, context_all):
                tally.in_context += 1
            else:
                tally.missed.append(f"{transcript.name}: {fact.label[:120]}")
            tally.in_summary += present(fact, digest)
            tally.recoverable += search(fact)
            tally.stale += stale(fact, ledger, changed)
        context = child
        index = [None, *index[len(index) - tail :]]
        survival.compactions += 1
    if not spans:
        return
    history = original[:done]
    summary = context[0].summary.text if context and context[0].summary else ""
    context_all = context_text(context, without=(summary,))
    digest = context_text([Message.user(summary or "-")])
    ledger, changed = find_ledger(context), _truth_changed(history)
    for fact in span_facts(history, spans[0][0], spans[-1][1], FACTS):
        tally = survival.after[fact.kind]
        tally.facts += 1
        tally.in_context += present(fact, context_all)
        tally.in_summary += present(fact, digest)
        tally.recoverable += search(fact)
        tally.stale += stale(fact, ledger, changed)
        if not present(fact, context_all):
            tally.missed.append(f"{transcript.name}: {fact.label[:120]}")
    survival.transcripts += 1


def transcripts(seeds: Sequence[int], size: int) -> Iterator[Transcript]:
    for seed in seeds:
        for build in CORPUS.values():
            yield build(seed, size)
        for record in RECORDED.values():
            yield record(seed, size)


def measure(
    seeds: Sequence[int] = (0,),
    size: int = 240,
    compactions: int = COMPACTIONS,
    window: int = WINDOW,
) -> Survival:
    """The survival of every fact of the corpus (see the module's docstring)."""
    survival = Survival()
    with tempfile.TemporaryDirectory() as home, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no model: summaries will be digests" is the point
        store = open_store(Path(home) / "survival.db")
        try:
            for transcript in transcripts(seeds, size):
                measure_transcript(
                    transcript, store, survival, compactions=compactions, window=window
                )
        finally:
            store.close()
    return survival


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "—"


def table(survival: Survival) -> str:
    """The table as Markdown (the README's)."""
    rows = [
        "| fact | kind of fact | facts | in context (a) | recoverable (b) | stale (c) "
        "| in the digest |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for label, part in (("each compaction", survival.each), ("after 5", survival.after)):
        for kind in KINDS:
            t = part[kind]
            rows.append(
                f"| {label} | {LABELS[kind]} | {t.facts:,} | {_share(t.in_context, t.facts)} "
                f"| {_share(t.recoverable, t.facts)} | {t.stale} "
                f"| {_share(t.in_summary, t.facts)} |"
            )
    return "\n".join(rows)


def receipt_timing(runs: int = 5) -> tuple[int, int, int, float]:
    """The receipt of a compaction of a coding session that fills a 200k window: the parent's
    messages, its tokens as the test server counts them, the facts, and the median time."""
    transcript = CORPUS["coding"](0, 300)
    tokens = FakeAnthropicServer().count_input_tokens(transcript.body())
    history = as_messages(transcript.messages)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no model: the digest, as in the table
        compacter = ConversationCompacter(
            model_name=MODEL,
            context_window=WINDOW,
            settings=CompactionSettings(strategy="summarize"),
        )
        transition = compacter.compact_and_transition("r", history, force=True)
    assert transition is not None
    child = list(transition.compacted_messages)
    replaced = len(history) - (len(child) - 1)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        shown = receipt(history, replaced, child, FACTS)
        times.append(time.perf_counter() - start)
    return len(history), tokens, sum(shown.facts.values()), statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=None, help="240; 320 with --agents")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--compactions", type=int, default=COMPACTIONS)
    parser.add_argument("--window", type=int, default=WINDOW)
    parser.add_argument(
        "--agents",
        action="store_true",
        help="only the sessions of other agents' tools (Claude Code, pi, OpenHands, Codex)",
    )
    parser.add_argument("--windows", type=int, nargs="+", default=list(survival_agents.WINDOWS))
    args = parser.parse_args(argv)
    if args.agents:
        size = args.size or survival_agents.SIZE
        return agents_table(args.seeds, size, args.windows, args.compactions)
    survival = measure(args.seeds, args.size or 240, args.compactions, args.window)
    print(
        f"{survival.transcripts} transcripts, {survival.compactions} compactions "
        f"(window {args.window:,}, digest summaries)\n"
    )
    print(table(survival))
    messages, tokens, facts, seconds = receipt_timing()
    print(
        f"\n| the receipt after a compaction | {messages} messages, {tokens:,} tokens, "
        f"{facts} facts | {seconds * 1000:.1f} ms (median of 5; goal < 50 ms) |"
    )
    misses = survival.misses()
    print("\ntargets: " + ("all met" if not misses else "; ".join(misses)))
    for kind in KINDS:
        for line in survival.each[kind].missed[:3]:
            print(f"  not in context ({kind}): {line}")
    agents = agents_table(args.seeds, survival_agents.SIZE, args.windows, args.compactions)
    return 0 if not misses and not agents else 1


def agents_table(seeds: Sequence[int], size: int, windows: Sequence[int], compactions: int) -> int:
    """The other agents' sessions (``survival_agents``): the table, the targets, what misses."""
    rows = survival_agents.measure(seeds, size, windows, compactions=compactions)
    print(
        f"\nSessions of other agents' tools (size {size}, seeds {list(seeds)}), {compactions} "
        "successive compactions, a summary of one bare sentence; each compaction's span · all "
        "spans after the last\n"
    )
    print(survival_agents.table(rows))
    misses = [miss for row in rows for miss in row.misses()]
    print("\ntargets: " + ("all met" if not misses else f"{len(misses)} missed"))
    for miss in misses[:24]:
        print(f"  {miss}")
    for row in rows:
        for kind in survival_agents.KINDS:
            for line in row.each[kind].lost[:1]:
                print(f"  cut, not found ({kind}): {line}")
        for line in row.stale[:1]:
            print(f"  stale: {line}")
    return 0 if not misses else 1


if __name__ == "__main__":
    sys.exit(main())
