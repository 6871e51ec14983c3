"""The compacter alone, inside a hand-written `anthropic` tool-use loop.

Run with ANTHROPIC_API_KEY set (or ANTHROPIC_BASE_URL pointing at a compatible server):

    python examples/compacter_in_your_loop.py "What is 1234 * 5678? Use the tool."

At every safe boundary (no tool_use waiting for its result) the loop asks the compacter; when
the conversation crosses the threshold it swaps in the compacted history.
"""

from __future__ import annotations

import os
import sys

import anthropic

from agentloop import ConversationCompacter, Message, Usage

MODEL = os.environ.get("AGENTLOOP_MODEL", "claude-sonnet-5-5")
TOOLS = [
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
    client = anthropic.Anthropic()
    # A real loop would resolve the window from the Models API; 200k is a safe example value.
    compacter = ConversationCompacter(model_name=MODEL, context_window=200_000)
    messages: list[Message] = [Message.user(prompt)]
    session_id = "example-session"
    while True:
        transition = compacter.compact_and_transition(session_id, messages, tools=TOOLS)
        if transition is not None:
            print(
                f"compacted: {transition.summary.original_message_count} messages → "
                f"{len(transition.compacted_messages)}",
                file=sys.stderr,
            )
            messages, session_id = list(transition.compacted_messages), transition.new_session_id
        response = client.messages.create(
            model=MODEL,
            max_tokens=1024,
            tools=TOOLS,  # type: ignore[arg-type]
            messages=[m.to_param() for m in messages],  # type: ignore[misc]
        )
        usage = Usage(
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
        )
        blocks = [block.model_dump(exclude_none=True) for block in response.content]
        messages.append(Message.assistant(blocks, usage=usage))
        calls = [block for block in response.content if block.type == "tool_use"]
        if not calls:
            print("".join(b.text for b in response.content if b.type == "text"))
            return
        results = []
        for call in calls:
            args = call.input if isinstance(call.input, dict) else {}
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": call.id,
                    "content": str(int(str(args["a"])) * int(str(args["b"]))),
                }
            )
        messages.append(Message.user(results))


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "What is 1234 * 5678? Use the multiply tool.")
