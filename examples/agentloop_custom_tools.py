"""AgentLoop with your own tools, system prompt and a preserved-state hook.

Offline by default (a scripted model plays the assistant); with ANTHROPIC_API_KEY set it talks
to Claude instead:

    python examples/agentloop_custom_tools.py
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from agentloop import (
    AgentLoop,
    CompactionSettings,
    ConversationCompacter,
    FunctionTool,
    LoopEvents,
    PreservedStateHook,
)
from agentloop.testing import ScriptedModel, text_reply, tool_call, tool_reply

inventory: dict[str, int] = {"apples": 3}


ledger: list[str] = []


def restock(tool_input: Mapping[str, Any]) -> str:
    item, amount = str(tool_input["item"]), int(tool_input["amount"])
    inventory[item] = inventory.get(item, 0) + amount
    ledger.append(f"restocked {amount} {item}; {inventory[item]} in stock")
    # Like real tools, it answers at length: the whole ledger, so the context fills up.
    return "\n".join([f"{item}: {inventory[item]} in stock", "Ledger:", *ledger * 8])


RESTOCK = FunctionTool(
    name="restock",
    description="Add units of an item to the inventory.",
    input_schema={
        "type": "object",
        "properties": {"item": {"type": "string"}, "amount": {"type": "integer"}},
        "required": ["item", "amount"],
    },
    function=restock,
)


def inventory_state() -> str:
    """Preserved through every compaction: the agent never forgets the stock levels."""
    return "## Inventory\n" + "\n".join(f"- {k}: {v}" for k, v in sorted(inventory.items()))


class Printer(LoopEvents):
    def on_transition(self, transition: Any) -> None:
        summary = transition.summary
        print(
            f"[compacted {summary.original_message_count} → {summary.compacted_message_count} "
            f"messages into session {transition.new_session_id[:8]}]"
        )
        prefix = transition.compacted_messages[0]
        state = next(b["text"] for b in prefix.content if "<preserved-state>" in b["text"])
        lines = state.splitlines()  # the ledger first, then the hooks' sections
        print("[the hook's state travels with it:]", lines[lines.index("## Inventory") + 1])


def build_model() -> tuple[Any, str]:
    if os.environ.get("ANTHROPIC_API_KEY"):
        from agentloop import AnthropicModel

        return AnthropicModel(), "claude-sonnet-5-5"
    script = []
    for n in range(6):
        script.append(tool_reply(tool_call("restock", {"item": "pears", "amount": n + 1})))
        script.append(text_reply(f"Restocked pears (round {n + 1})."))
    return ScriptedModel(script), "claude-sonnet-5-5"


def main() -> None:
    model, name = build_model()
    compacter = ConversationCompacter(
        model_name=name,
        model=model,
        context_window=3_000,  # tiny, so that this short example compacts
        max_output_tokens=512,
        settings=CompactionSettings(threshold=0.6),
        hooks=[PreservedStateHook("inventory", inventory_state)],
    )
    loop = AgentLoop(
        model=model,
        model_name=name,
        compacter=compacter,
        system="You manage a small shop's inventory. Use the restock tool.",
        tools=[RESTOCK],
        max_tokens=512,
        events=Printer(),
    )
    for n in range(6):
        result = loop.run_turn(f"Please restock {n + 1} pears.")
        print(result.text)
    print(inventory_state())


if __name__ == "__main__":
    main()
