"""agentloop inside the `anthropic` SDK's own tool runner: the threshold, sessions, resume.

Run with ANTHROPIC_API_KEY set, or with ANTHROPIC_BASE_URL pointing at a compatible server
(a key is then optional):

    python examples/tool_runner_sessions.py "Read README.md and ARCHITECTURE.md, then say
    in one line what agentloop is."

The runner runs the tools as it always does; agentloop measures the context after every
reply, asks the runner to compact at the trigger (the API writes the summary), keeps parent
and child sessions in a store (`sessions.db` in the working directory) and carries the
ledger of what the tools did after the next user turn. Then a second, async runner is built
from the stored session and asked a follow-up question: it continues where the first stopped.
AGENTLOOP_CONTEXT_WINDOW (default 20,000) is small, so that a few files compact.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import anthropic
from anthropic import beta_async_tool, beta_tool

from agentloop import ON_DEMAND_COMPACTION_BETA, CompactionTransition, LoopEvents
from agentloop.integrations.tool_runner import RunnerCompaction
from sessions import SessionStore, open_store

MODEL = os.environ.get("AGENTLOOP_MODEL", "claude-sonnet-5-5")
WINDOW = int(os.environ.get("AGENTLOOP_CONTEXT_WINDOW", "20000"))
SYSTEM = "You read the agentloop repository with the read_file tool and answer briefly."
ROOT = Path(__file__).resolve().parent.parent


def _read(path: str) -> str:
    target = (ROOT / path).resolve()
    if ROOT not in target.parents or not target.is_file():
        return f"no such file: {path}"
    return target.read_text(errors="replace")[:12_000]


@beta_tool
def read_file(path: str) -> str:
    """Read a file of the repository.

    Args:
        path: The file's path, relative to the repository's root.
    """
    return _read(path)


@beta_async_tool(name="read_file")
async def read_file_async(path: str) -> str:
    """Read a file of the repository.

    Args:
        path: The file's path, relative to the repository's root.
    """
    return _read(path)


class Notices(LoopEvents):
    def on_transition(self, transition: CompactionTransition) -> None:
        s = transition.summary
        before = f"{s.tokens_before:,} tokens ({s.tokens_before_source})"
        after = f"{s.tokens_after:,} ({s.tokens_after_source})"
        print(
            f"compacted: {before} → {after}, session {transition.new_session_id}", file=sys.stderr
        )


def _key() -> str:
    # A compatible server may not need a key; the SDK insists on one, so give it a stand-in.
    return os.environ.get("ANTHROPIC_API_KEY") or "not-needed"


def first(prompt: str, store: SessionStore) -> str:
    """The first runner: a session from scratch; returns its first session (the root)."""
    compaction = RunnerCompaction(store=store, context_window=WINDOW, events=Notices())
    root = compaction.session_id
    client = anthropic.Anthropic(api_key=_key())
    runner = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=2_000,
        system=SYSTEM,
        tools=[read_file],
        messages=[{"role": "user", "content": prompt}],
        betas=[ON_DEMAND_COMPACTION_BETA],
        thread=False,  # the whole history each turn (the tests' server keeps no threads)
    )
    for message in compaction.follow(runner):
        for block in message.content:
            if block.type == "text" and message.stop_reason == "end_turn":
                print(block.text)
    return root


async def resume(root: str, question: str, store: SessionStore) -> None:
    """A second, async runner continues the stored session at its newest descendant."""
    compaction = RunnerCompaction(store=store, session_id=root, context_window=WINDOW)
    client = anthropic.AsyncAnthropic(api_key=_key())
    runner = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=2_000,
        system=SYSTEM,  # the stored session's: kept thinking is bound to them
        tools=[read_file_async],
        messages=[*compaction.history(), {"role": "user", "content": question}],
        betas=[ON_DEMAND_COMPACTION_BETA],
        thread=False,
    )
    async for message in compaction.afollow(runner):
        if message.stop_reason == "end_turn":
            print("".join(b.text for b in message.content if b.type == "text"))
    print(f"session {compaction.session_id} ({len(compaction.transitions)} more compactions)")


def main(prompt: str) -> None:
    with open_store("sessions.db") as store:
        root = first(prompt, store)
        asyncio.run(resume(root, "And in one more line: what did you read?", store))


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "Read README.md and ARCHITECTURE.md: what is agentloop?")
