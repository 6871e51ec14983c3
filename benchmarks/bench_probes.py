"""Probes of a compacted context, asked of the model: for people with an API key.

    ANTHROPIC_API_KEY=... python benchmarks/bench_probes.py [--model claude-sonnet-4-6]
        [--runs 3] [--size 160] [--transcripts coding calculator]

The method of Factory's published evaluation of context compression: compact a long session,
then ask the model, from the compacted context only, questions whose answers the original
history holds, and score the answers against it. Four kinds of probe:

* recall: an exact detail of the compacted span (an error line, a number the user gave);
* artifact: which files were created or modified;
* continuation: what is still to do (the open todos, the user's latest request);
* decision: what the user asked or ruled (their requests and constraints).

A probe's score is the share of its expected keys the answer holds (case and spacing aside),
so scoring needs no judge model. Each transcript is compacted once per run (by the model's own
summarizer), every probe asked, and the run-to-run spread over ``--runs`` runs reported.
Never run in CI (it calls the real API); ``tests/test_probes.py`` runs the extraction and the
scoring against the test server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from transcripts import CORPUS, Transcript  # noqa: E402
from transcripts.recorded import RECORDED  # noqa: E402

from agentloop import (  # noqa: E402
    AnthropicModel,
    CompactionSettings,
    ConversationCompacter,
    Message,
    ModelRequest,
    as_messages,
    default_tool_facts,
)
from agentloop._core.facts.ledger import derive  # noqa: E402
from agentloop._core.facts.receipt import span_facts  # noqa: E402
from agentloop._core.values.model import Model  # noqa: E402

ProbeKind = Literal["recall", "artifact", "continuation", "decision"]
PROBE_KINDS: tuple[ProbeKind, ...] = ("recall", "artifact", "continuation", "decision")
ASK = (
    "Answer from what you know of this conversation only, without calling any tool, in a few "
    "lines. Quote exact names, paths, numbers and messages where you can.\n\n{question}"
)


@dataclass(frozen=True, slots=True)
class Probe:
    kind: ProbeKind
    question: str
    keys: tuple[str, ...]
    """What a right answer holds (each counts the same)."""


def _normal(text: str) -> str:
    return " ".join(text.lower().replace("`", "").split())


def score(probe: Probe, answer: str) -> float:
    """The share of ``probe``'s keys that ``answer`` holds, case and spacing aside."""
    if not probe.keys:
        return 0.0
    said = _normal(answer)
    return sum(_normal(key) in said for key in probe.keys) / len(probe.keys)


def probes(history: Sequence[Message], replaced: int, *, per_kind: int = 3) -> list[Probe]:
    """The probes of a compaction that replaced ``history[:replaced]``, from what the history
    itself says (its tool calls and the user's words), at most ``per_kind`` of each kind."""
    facts = span_facts(history, 0, replaced, default_tool_facts())
    out: list[Probe] = []
    errors = [f for f in facts if f.kind == "errors"][-per_kind:]
    for fact in errors:
        words = fact.query.split()
        hint = " ".join(words[:2]) if words else "an error"
        out.append(
            Probe(
                "recall",
                f"What exact error line mentioning {hint} did a command print?",
                (fact.needles[0],),
            )
        )
    numbers = [f for f in facts if f.kind == "numbers"][-per_kind:]
    for fact in numbers:
        before, _, number = fact.needles[0].rpartition(" ")
        out.append(
            Probe(
                "recall",
                f"What number did the user give right after the words {before!r}?",
                (number.strip(".,;:!?()"),),
            )
        )
    ledger = derive(history[:replaced], facts=default_tool_facts())
    written = [f.path for f in ledger.files if f.created or f.modified]
    if written:
        out.append(
            Probe(
                "artifact",
                "Which files have you created or modified so far? List paths.",
                tuple(sorted(written)[: per_kind * 3]),
            )
        )
    now = derive(history, facts=default_tool_facts())
    open_todos = [content for status, content in now.todos if status != "completed"]
    if open_todos:
        out.append(
            Probe(
                "continuation", "Which items of your todo list are still open?", tuple(open_todos)
            )
        )
    done = [content for status, content in now.todos if status == "completed"][-per_kind:]
    if done:
        out.append(Probe("continuation", "Which todo items are already done?", tuple(done)))
    requests = [f for f in facts if f.kind == "requests"][-per_kind:]
    for fact in requests:
        head = fact.needles[0]
        words = head.split()
        key = " ".join(words[len(words) // 2 : len(words) // 2 + 4])
        out.append(
            Probe(
                "decision",
                f"The user once said something starting {' '.join(words[:5])!r}. "
                "What exactly did they ask or rule?",
                (key,),
            )
        )
    return out


@dataclass
class ProbeRun:
    scores: dict[ProbeKind, list[float]]


def ask(model: Model, model_name: str, context: Sequence[Message], probe: Probe) -> str:
    """The model's answer to ``probe`` from ``context`` (one request, no tools)."""
    messages = list(context)
    question = ASK.format(question=probe.question)
    if messages and messages[-1].role == "user":
        last = messages[-1]
        messages[-1] = Message(
            "user", (*last.content, {"type": "text", "text": question}), pinned=last.pinned
        )
    else:
        messages.append(Message.user(question))
    request = ModelRequest(
        model=model_name, messages=tuple(messages), max_tokens=1_024, metadata={"purpose": "probe"}
    )
    response = model.complete(request, None)
    return "\n".join(str(b.get("text", "")) for b in response.content if b.get("type") == "text")


def run_once(model: Model, model_name: str, transcript: Transcript) -> ProbeRun:
    """One compaction of ``transcript`` by ``model``'s summarizer, every probe asked."""
    history = as_messages(transcript.messages)
    compacter = ConversationCompacter(
        model_name=model_name,
        context_window=200_000,
        model=model,
        settings=CompactionSettings(strategy="summarize"),
    )
    transition = compacter.compact_and_transition(
        "probes", history, system=transcript.system, tools=transcript.tools, force=True
    )
    scores: dict[ProbeKind, list[float]] = {kind: [] for kind in PROBE_KINDS}
    if transition is None:
        return ProbeRun(scores)
    child = list(transition.compacted_messages)
    replaced = len(history) - (len(child) - 1)
    for probe in probes(history, replaced):
        scores[probe.kind].append(score(probe, ask(model, model_name, child, probe)))
    return ProbeRun(scores)


def table(runs: Sequence[ProbeRun]) -> str:
    """Per kind: the mean score of each run, their mean and the spread (min–max)."""
    rows = ["| probe | probes a run | mean score | spread over runs |", "|---|---:|---:|---:|"]
    for kind in PROBE_KINDS:
        means = [statistics.fmean(r.scores[kind]) for r in runs if r.scores[kind]]
        count = max((len(r.scores[kind]) for r in runs), default=0)
        if not means:
            rows.append(f"| {kind} | 0 | — | — |")
            continue
        rows.append(
            f"| {kind} | {count} | {statistics.fmean(means):.2f} "
            f"| {min(means):.2f}–{max(means):.2f} |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="claude-sonnet-4-6")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", type=int, default=160)
    parser.add_argument("--transcripts", nargs="+", default=["coding", "calculator"])
    args = parser.parse_args(argv)
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print("bench_probes asks the real API: set ANTHROPIC_API_KEY", file=sys.stderr)
        return 2
    builders = {**CORPUS, **RECORDED}
    model = AnthropicModel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in args.transcripts:
            transcript = builders[name](0, args.size)
            runs = [run_once(model, args.model, transcript) for _ in range(args.runs)]
            print(f"\n{name} ({len(transcript.messages)} messages, {args.runs} runs)\n")
            print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
