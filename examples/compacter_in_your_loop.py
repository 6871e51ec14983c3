"""The compacter alone, inside a hand-written `anthropic` tool-use loop.

Run with ANTHROPIC_API_KEY set, or with ANTHROPIC_BASE_URL pointing at a compatible server
(a key is then optional):

    python examples/compacter_in_your_loop.py "What is 1234 * 5678? Use the tool."

At every safe boundary (no tool_use waiting for its result) the loop asks the compacter; when
the conversation crosses the threshold it swaps in the compacted history. The model answers the
summary requests too, and its count_tokens endpoint measures every compacted result.
"""

from __future__ import annotations

import os
import sys

import anthropic
from anthropic.types import ToolParam

from agentloop import (
    AnthropicModel,
    ConversationCompacter,
    Message,
    history_betas,
    message_from_response,
)

MODEL = os.environ.get("AGENTLOOP_MODEL", "claude-sonnet-5-5")
TOOLS: list[ToolParam] = [
    {
        "name": "multiply",
        "description": "Multiply two integers.",
        "input_schema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    }
]


def main(prompt: str) -> None:
    # A compatible server may not need a key; the SDK insists on one, so give it a stand-in.
    key = os.environ.get("ANTHROPIC_API_KEY") or "not-needed"
    client = anthropic.Anthropic(api_key=key)
    compacter = ConversationCompacter(
        model_name=MODEL,
        # A real loop would resolve the window from the Models API; 200k is a safe example.
        context_window=int(os.environ.get("AGENTLOOP_CONTEXT_WINDOW", "200000")),
        model=AnthropicModel(client),  # summarizes, and counts tokens
    )
    messages: list[Message] = [Message.user(prompt)]
    session_id = "example-session"
    while True:
        transition = compacter.compact_and_transition(session_id, messages, tools=TOOLS)
        if transition is not None:
            summary = transition.summary
            print(
                f"compacted: {summary.original_message_count} messages → "
                f"{summary.compacted_message_count} ({summary.tokens_after:,} tokens, "
                f"counted by the {summary.tokens_after_source})",
                file=sys.stderr,
            )
            messages, session_id = list(transition.compacted_messages), transition.new_session_id
        # Once the API has written a summary (a compaction block opens the history), every
        # request needs its beta: history_betas says which, [] before the first compaction.
        response = client.beta.messages.create(
            model=MODEL,
            max_tokens=1024,
            tools=TOOLS,
            messages=[m.to_param() for m in messages],  # agentloop's MessageParam is the SDK's
            betas=history_betas(messages),
        )
        messages.append(message_from_response(response))  # content and usage, cache included
        calls = [block for block in response.content if block.type == "tool_use"]
        if not calls:
            print("".join(b.text for b in response.content if b.type == "text"))
            return
        results = []
        for call in calls:
            args = call.input if isinstance(call.input, dict) else {}
            product = int(str(args["a"])) * int(str(args["b"]))
            results.append({"type": "tool_result", "tool_use_id": call.id, "content": str(product)})
        messages.append(Message.user(results))


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "What is 1234 * 5678? Use the multiply tool.")
