"""``agentloop -p``: one turn, then the final answer only, as text or JSON for scripts.

``--output-format text`` prints the final reply once it is stored; ``json`` prints one object
(text, session id, usage, compactions...); ``stream-json`` prints one JSON object per line as
things happen, ending with that same result object.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TextIO

from agentloop._cli.cost_report import configured_prices
from agentloop._cli.ui import TerminalUI
from agentloop._errors import AgentloopError

if TYPE_CHECKING:
    from agentloop._agent.agent import CodingAgent
    from agentloop._core.compaction.results import CompactionTransition
    from agentloop._core.values.model import ModelResponse
    from agentloop._core.values.tool import ToolResult
    from agentloop._loop.agent_loop import TurnResult

OutputFormat = Literal["text", "json", "stream-json"]
STDIN_TAG = "stdin"


def with_context(prompt: str | None, piped: str) -> str:
    """The message for ``-p``: the prompt, then what was piped in (``git diff | agentloop -p``)."""
    piped = piped.rstrip("\n")
    if not piped.strip():
        return prompt or ""
    if not prompt:
        return piped
    return f"{prompt}\n\n<{STDIN_TAG}>\n{piped}\n</{STDIN_TAG}>"


def _line(out: TextIO, value: dict[str, Any]) -> None:
    out.write(json.dumps(value, ensure_ascii=False) + "\n")
    out.flush()


def compaction_json(transition: CompactionTransition) -> dict[str, Any]:
    summary = transition.summary
    return {
        "from_session_id": transition.original_session_id,
        "session_id": transition.new_session_id,
        "strategy": summary.strategy,
        "messages_before": summary.original_message_count,
        "messages_after": summary.compacted_message_count,
        "tokens_before": summary.tokens_before,
        "tokens_after": summary.tokens_after,
        "tokens_before_source": summary.tokens_before_source,
        "tokens_after_source": summary.tokens_after_source,
    }


class StreamJsonUI(TerminalUI):
    """:class:`TerminalUI` that also writes each event as a JSON line on ``out``."""

    def __init__(self, out: TextIO, err: TextIO, *, tty: bool) -> None:
        super().__init__(out, err, tty=tty, stream=False)
        self.json_out = out

    def on_text(self, delta: str) -> None:
        self.spinner.stop()
        _line(self.json_out, {"type": "text", "text": delta})

    def on_reply(self, response: ModelResponse | None) -> None:
        super().on_reply(response)
        if response is not None:
            usage = response.usage.to_dict()
            _line(
                self.json_out,
                {"type": "reply", "stop_reason": response.stop_reason, "usage": usage},
            )

    def on_tool_call(self, name: str, tool_input: dict[str, Any]) -> None:
        super().on_tool_call(name, tool_input)
        _line(self.json_out, {"type": "tool_call", "name": name, "input": tool_input})

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None:
        super().on_tool_result(name, tool_input, result)
        _line(
            self.json_out,
            {
                "type": "tool_result",
                "name": name,
                "is_error": result.is_error,
                "content": result.content,
            },
        )

    def on_transition(self, transition: CompactionTransition) -> None:
        super().on_transition(transition)
        _line(self.json_out, {"type": "compaction", **compaction_json(transition)})


def _usage(ui: TerminalUI) -> dict[str, int]:
    total: dict[str, int] = {}
    for usage in ui.usage:
        for key, value in usage.to_dict().items():
            total[key] = total.get(key, 0) + value
    return total


def result_json(
    agent: CodingAgent,
    ui: TerminalUI,
    result: TurnResult | None,
    *,
    error: str | None,
    kept: bool,
) -> dict[str, Any]:
    """The object ``--output-format json`` prints (and ``stream-json`` ends with)."""
    decision = agent.context()
    cost: dict[str, Any] | None = None
    reports = agent.cost(configured_prices()) if kept else None
    if reports is not None:
        cost = {"session": reports[0].to_dict(), "conversation": reports[1].to_dict()}
    return {
        "type": "result",
        "is_error": error is not None,
        "error": error,
        "text": result.text if result is not None else "",
        "session_id": agent.session_id if kept else None,
        "stop_reason": result.stop_reason if result is not None else None,
        "tool_calls": result.tool_calls if result is not None else 0,
        "usage": _usage(ui),
        "compactions": [compaction_json(t) for t in (result.transitions if result else [])],
        "cost": cost,
        "context": None
        if decision is None
        else {
            "tokens": decision.usage.tokens,
            "tokens_source": decision.usage.source,
            "window": decision.usage.window,
            "compacts_at": decision.trigger_tokens,
        },
    }


def run_print(
    agent: CodingAgent,
    ui: TerminalUI,
    text: str,
    *,
    output_format: OutputFormat,
    kept: Callable[[], bool],
) -> int:
    """Run ``text`` as the one turn; print the answer; 0, or 1 if the turn failed.

    ``kept()`` says whether the session is kept after this run (a new session whose model never
    answered is removed)."""
    result: TurnResult | None = None
    error: str | None = None
    if output_format == "stream-json":
        _line(
            ui.out,
            {"type": "start", "session_id": agent.session_id, "model": agent.model_name},
        )
    from agentloop._sessions import SessionError

    ui.begin_turn()
    try:
        result = agent.run_turn(text)
    except (AgentloopError, SessionError) as failure:  # a store error too (a lost lease)
        error = str(failure)
    except KeyboardInterrupt:
        error = "interrupted"
    finally:
        ui.end_turn()
    if output_format == "text":
        if result is not None and result.text:
            # Printed once the reply is stored: an answer shown is an answer kept.
            ui.out.write(result.text.rstrip("\n") + "\n")
            ui.out.flush()
    else:
        payload = result_json(agent, ui, result, error=error, kept=kept())
        if output_format == "json":
            ui.out.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")
        else:
            _line(ui.out, payload)
        ui.out.flush()
    if error is not None:
        print(f"agentloop: error: {error}", file=sys.stderr)
        return 130 if error == "interrupted" else 1
    return 0
