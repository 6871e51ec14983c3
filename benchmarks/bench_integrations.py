"""agentloop's ``CompactionMiddleware`` beside LangChain's own ``SummarizationMiddleware``, each
in the same LangChain v1 agent (``create_agent`` with ``ChatAnthropic``: the real SDK over real
HTTP), replaying the project's transcript corpus against the test server. Prints a table.

    python benchmarks/bench_integrations.py [--size N] [--window N]

The server answers each conversation request with the transcript's next assistant message and
each summary request with a summary; the agent's tools return the transcript's recorded results
in order; the user's turns are the transcript's requests (as ``benchmarks/bench_cost.py`` does
through ``AgentLoop``). Both middlewares trigger at agentloop's trigger for the window;
LangChain's keeps its default 20 messages and trims what its summarizer sees to 4,000 tokens.

Columns, per transcript and middleware:

* **compactions** made;
* **facts to the summarizer**: the transcript's planted facts (errors buried in long outputs,
  file paths, the user's requests, searches, documents) that a summary request showed, out of
  those the conversation held before its last compaction;
* **after / trigger**: the largest request right after a compaction, as the server counts it,
  over the trigger (under 1: the compaction made room);
* **over the window**: conversation requests larger than the window (the API refuses them:
  "prompt is too long"; here they are let through and counted).

Needs ``pip install -e ".[langchain]"``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import bench_support  # noqa: F401  (puts the repository and tests/ on sys.path)
from fake_api import TEST_API_KEY, FakeAnthropicServer, Reply, text_reply
from support.integrations import is_summary_request
from support.replay import recorded_results, replies, user_turns
from transcripts import Transcript, corpus

from agentloop import ConversationCompacter
from agentloop.testing import FunctionModel

MODEL = "claude-sonnet-4-6"
LANGCHAIN_PROMPT = "Context Extraction Assistant"
"""How LangChain's summary request (its default prompt) is told apart."""
SUMMARY = (
    "## Goal\nKeep the shop backend healthy and finish the current task.\n\n"
    "## Progress\nthe work is under way; see the recent messages\n\n"
    "## Next steps\ncontinue the task"
)


def _texts(value: Any) -> Iterator[str]:
    """Every string in a request body (block texts, tool inputs, tool results...)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def facts_of(transcript: Transcript) -> list[str]:
    facts = transcript.facts
    out = [*facts.error_needles, *facts.paths, *facts.search_queries, *facts.document_titles]
    for request in facts.requests:
        text = request.text
        out += [text] if len(text) <= 600 else [text[:300], text[-300:]]
    return out


def is_any_summary(body: dict[str, Any]) -> bool:
    return is_summary_request(body) or LANGCHAIN_PROMPT in json.dumps(body["messages"][-1])


@dataclass
class Replayer:
    """The server's handler: the transcript's replies in order, summaries when asked."""

    replies: deque[list[dict[str, Any]]]
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.bodies.append(body)
        if is_any_summary(body):
            return text_reply(SUMMARY)
        if not self.replies:
            return text_reply("done")
        return Reply(content=tuple(self.replies.popleft()))


@dataclass(frozen=True)
class Row:
    compactions: int
    facts_seen: int
    facts_held: int
    after_over_trigger: float | None
    over_window: int
    requests: int
    violations: int
    """Requests the server found invalid under the API's rules."""


def run(transcript: Transcript, which: str, window: int) -> Row:
    from langchain.agents import create_agent
    from langchain.agents.middleware.summarization import SummarizationMiddleware
    from langchain_anthropic import ChatAnthropic
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import StructuredTool

    from agentloop.integrations.langchain import CompactionMiddleware

    compacter = ConversationCompacter(
        model_name=MODEL, context_window=window, model=FunctionModel(str)
    )
    trigger = compacter.trigger_tokens
    handler = Replayer(replies(transcript.messages))
    results = recorded_results(transcript.messages)

    def recorded(**_arguments: Any) -> str:
        return results.popleft().content if results else "(no output)"

    tools = [
        StructuredTool.from_function(
            recorded,
            name=tool["name"],
            description=tool.get("description") or tool["name"],
            args_schema=tool["input_schema"],
        )
        for tool in transcript.tools
        if "input_schema" in tool  # a server tool (web search) runs on the API, not here
    ]
    with FakeAnthropicServer(handler=handler) as server:
        model = ChatAnthropic(
            model_name=MODEL,
            base_url=server.base_url,
            api_key=TEST_API_KEY,  # type: ignore[arg-type]
            max_retries=0,
            max_tokens_to_sample=4_096,
            timeout=None,
            stop=None,
        )
        middleware: Any
        if which == "agentloop":
            middleware = CompactionMiddleware(context_window=window)
        else:
            middleware = SummarizationMiddleware(model, trigger=("tokens", trigger))
        agent: Any = create_agent(
            model, tools=tools, system_prompt=transcript.system, middleware=[middleware]
        )
        state: dict[str, Any] = {"messages": []}
        for blocks in user_turns(transcript.messages):
            state["messages"] = [*state["messages"], HumanMessage(content=blocks)]  # type: ignore[arg-type]
            state = agent.invoke(state, {"recursion_limit": 10_000})
        counted = [server.count_input_tokens(body) for body in handler.bodies]
        violations = len(server.violations)
    summaries = [i for i, body in enumerate(handler.bodies) if is_any_summary(body)]
    after = [
        counted[i]
        for s in summaries
        for i in itertools.islice(range(s + 1, len(handler.bodies)), 1)
        if not is_any_summary(handler.bodies[i])
    ]
    facts = facts_of(transcript)
    held: set[str] = set()
    seen: set[str] = set()
    if summaries:
        before = "\n".join(t for body in handler.bodies[: summaries[-1]] for t in _texts(body))
        shown = "\n".join(t for s in summaries for t in _texts(handler.bodies[s]))
        held = {f for f in facts if f in before}
        seen = {f for f in held if f in shown}
    conversation = [
        c for c, body in zip(counted, handler.bodies, strict=True) if not is_any_summary(body)
    ]
    return Row(
        compactions=len(summaries),
        facts_seen=len(seen),
        facts_held=len(held),
        after_over_trigger=max(after) / trigger if after else None,
        over_window=sum(c > window for c in conversation),
        requests=len(conversation),
        violations=violations,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=120, help="messages per transcript")
    parser.add_argument("--window", type=int, default=30_000, help="the context window")
    args = parser.parse_args(argv)
    try:
        import langchain_anthropic  # noqa: F401
    except ImportError:
        print('needs the extra: pip install -e ".[langchain]"', file=sys.stderr)
        return 1
    print(f"window {args.window:,}; transcripts of ~{args.size} messages\n")
    print(
        "| transcript | middleware | compactions | facts to the summarizer "
        "| after / trigger | over the window |"
    )
    print("|:---|:---|---:|---:|---:|---:|")
    invalid = {"agentloop": 0, "langchain": 0}
    for transcript in corpus(seed=1, size=args.size):
        for which in ("agentloop", "langchain"):
            row = run(transcript, which, args.window)
            invalid[which] += row.violations
            ratio = "—" if row.after_over_trigger is None else f"{row.after_over_trigger:.2f}"
            label = (
                "agentloop CompactionMiddleware"
                if which == "agentloop"
                else ("LangChain SummarizationMiddleware")
            )
            print(
                f"| {transcript.name} | {label} | {row.compactions} "
                f"| {row.facts_seen} of {row.facts_held} | {ratio} "
                f"| {row.over_window} of {row.requests} |",
                flush=True,
            )
    print(
        f"\nRequests the server refused under the API's rules: agentloop {invalid['agentloop']}, "
        f"LangChain {invalid['langchain']}."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
