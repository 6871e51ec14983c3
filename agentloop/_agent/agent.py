"""The coding agent: AgentLoop + workspace tools + todo state preserved through compaction."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentloop._core.compacter import CompactionSettings
from agentloop._core.context import CompactionDecision
from agentloop._core.hooks import PreservedStateHook
from agentloop._core.messages import Message
from agentloop._core.model import AsyncModel, Model, ModelResponse
from agentloop._core.results import CompactionOutcome, CompactionTransition
from agentloop._core.tool import ToolResult
from agentloop._core.validation import DEFAULT_MAX_TOKENS
from agentloop._loop.agent_loop import AgentLoop, LoopEvents, TurnResult
from agentloop._loop.compacter import ConversationCompacter
from sessions import SessionStore

SYSTEM_PROMPT = """\
You are agentloop, a careful and competent coding agent working in the user's project \
directory ({workspace}). You read code before you change it, make the smallest change that \
solves the problem, and verify your work by running the project's tests or the code itself.

How you work:
- Understand the request first. For anything with more than two steps, write a plan with the \
todo_write tool and keep it current: mark an item in_progress when you start it and completed \
when it is done.
- Use list_files and grep to find your way, read_file before editing, and edit_file for exact \
replacements (write_file only for new files or complete rewrites).
- Run commands with run_command to test and verify. The user may decline a command; then \
choose another way or ask.
- All paths are relative to the project directory; you cannot leave it.
- When something fails, read the error, fix the cause, and say what happened. Never claim a \
test passes unless you ran it.
- Be brief in what you write to the user: what you did, what you found, what is left.

Long conversations are compacted automatically: earlier messages may be replaced by a \
structured summary, with the todo list and recent tool calls preserved. Trust the summary and \
the preserved state, and re-read files when you need exact contents.
"""


def system_prompt(workspace: Path) -> str:
    """Byte-stable for a workspace (no dates or counters), so prompt caching keeps working."""
    return SYSTEM_PROMPT.format(workspace=workspace)


class _AgentEvents(LoopEvents):
    """Keeps the tool history and forwards everything to the UI's events."""

    def __init__(self, agent: CodingAgent, ui: LoopEvents) -> None:
        self.agent = agent
        self.ui = ui

    def on_text(self, delta: str) -> None:
        self.ui.on_text(delta)

    def on_usage(self, decision: CompactionDecision) -> None:
        self.ui.on_usage(decision)

    def on_compaction_start(self, decision: CompactionDecision) -> None:
        self.ui.on_compaction_start(decision)

    def on_transition(self, transition: CompactionTransition) -> None:
        self.ui.on_transition(transition)

    def on_compaction_skipped(self, reason: str) -> None:
        self.ui.on_compaction_skipped(reason)

    def on_tool_call(self, name: str, tool_input: dict[str, Any]) -> None:
        self.ui.on_tool_call(name, tool_input)

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None:
        self.agent.history.record(name, tool_input, is_error=result.is_error)
        self.ui.on_tool_result(name, tool_input, result)

    def on_reply(self, response: ModelResponse) -> None:
        self.ui.on_reply(response)


class CodingAgent:
    """A coding agent on a workspace, saved in a session store, resumable."""

    def __init__(
        self,
        *,
        model: Model | AsyncModel,
        model_name: str,
        workspace: Path,
        store: SessionStore,
        context_window: int,
        max_output_tokens: int,
        window_source: str,
        settings: CompactionSettings,
        approve: Callable[[str], bool],
        events: LoopEvents | None = None,
        resume_id: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        from agentloop._adapters.tokens import Calibration
        from agentloop._agent.tools import TodoList, ToolHistory, coding_tools

        self.store = store
        self.workspace = workspace
        self.todos = TodoList()
        self.history = ToolHistory()
        messages: list[Message] = []
        calibration = Calibration()
        if resume_id is not None:
            from agentloop._adapters.store import from_record

            session = store.get_session(resume_id)
            messages = [from_record(r) for r in store.get_messages(session.id)]
            saved = session.metadata
            if isinstance(saved.get("todos"), dict):
                self.todos = TodoList.from_dict(saved["todos"])
            if isinstance(saved.get("tool_history"), dict):
                self.history = ToolHistory.from_dict(saved["tool_history"])
            if isinstance(saved.get("calibration"), dict):
                calibration = Calibration.from_dict(saved["calibration"])
        hooks = [
            PreservedStateHook("todos", self.todos.render_markdown),
            PreservedStateHook("recent tools", self.history.render_markdown),
        ]
        reply_tokens = min(max_tokens, max_output_tokens)
        self.compacter = ConversationCompacter(
            model_name=model_name,
            context_window=context_window,
            model=model,
            max_output_tokens=reply_tokens,
            settings=settings,
            calibration=calibration,
            hooks=hooks,
            window_source=window_source,
        )
        tools = coding_tools(workspace, approve=approve, todos=self.todos)
        self.loop = AgentLoop(
            model=model,
            model_name=model_name,
            compacter=self.compacter,
            store=store,
            session_id=resume_id,
            workspace=str(workspace),
            messages=messages,
            system=system_prompt(workspace),
            tools=tools,
            max_tokens=reply_tokens,
            events=_AgentEvents(self, events or LoopEvents()),
        )

    @property
    def session_id(self) -> str:
        return self.loop.session_id

    def run_turn(self, text: str) -> TurnResult:
        if not self.loop.saved:
            # Like other agents: the first request names the session in listings.
            self.loop.title = " ".join(text.split())[:60]
        try:
            return self.loop.run_turn(text)
        finally:
            self.save_state()

    def compact(self, instructions: str | None = None) -> CompactionOutcome | None:
        try:
            return self.loop.compact(instructions)
        finally:
            self.save_state()

    def save_state(self) -> None:
        """Todos, tool history and calibration live in session metadata, so resume restores them."""
        if not self.loop.saved:
            return  # nothing was said yet: no session to keep
        calibration = self.compacter.calibration
        metadata: dict[str, Any] = {
            "todos": self.todos.to_dict(),
            "tool_history": self.history.to_dict(),
        }
        if calibration is not None:
            metadata["calibration"] = calibration.to_dict()
        self.store.update_session(self.loop.session_id, metadata=metadata)
