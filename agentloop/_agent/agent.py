"""The coding agent: AgentLoop + workspace tools + what must survive a compaction.

What survives: the project's instruction files (in the system prompt, which is never
summarized), the todo list and the recent tool calls (preserved-state hooks), and the current
contents of the files the agent touched most recently (the :mod:`.recent_files` hook). The
tracked files, what was restored and the calibration live in the session metadata, so a
resumed session behaves the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloop._agent.instructions import Instructions, load_instructions, user_config_dir
from agentloop._agent.recent_files import (
    DEFAULT_RESTORE_FILES,
    DEFAULT_RESTORE_FRACTION,
    FileRestorer,
    RecentFiles,
    RestoreReport,
)
from agentloop._agent.session_prefix import (
    PREFIX_KEY,
    StoredPrefix,
    instructions_notice,
    instructions_seen,
    update_messages,
    update_text,
)
from agentloop._agent.workspace import Workspace
from agentloop._core.compaction.results import (
    CompactionOutcome,
    CompactionPlan,
    CompactionTransition,
)
from agentloop._core.compaction_core import CompactionSettings
from agentloop._core.measuring.context import CompactionDecision
from agentloop._core.values.blocks import is_text, text_block
from agentloop._core.values.carried import Carried
from agentloop._core.values.messages import ContentBlock, Message
from agentloop._core.values.model import AsyncModel, Model
from agentloop._core.values.profile_table import profile_of
from agentloop._core.values.tool import ToolResult
from agentloop._core.values.tool_facts import ToolCall
from agentloop._core.values.validation import DEFAULT_MAX_TOKENS
from agentloop._errors import StoreWriteError
from agentloop._loop.agent_loop import AgentLoop, LoopEvents, TurnResult
from agentloop._loop.conversation_compacter import ConversationCompacter
from agentloop._loop.status import CompactionStatus, compaction_status
from agentloop._loop.stop_reasons import THINKING_METADATA_KEY, SessionThinking
from agentloop._sessions import Lease, SessionError, SessionStore, workspace_key

if TYPE_CHECKING:
    from agentloop._adapters.session_costs import CostReport
    from agentloop._agent.mcp_tools import McpServers
    from agentloop._core.facts.receipt import Receipt
    from agentloop._core.measuring.pricing import Price
    from agentloop._loop.compaction_draft import CompactionDraft

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
structured summary, with the todo list, recent tool calls and the current contents of the \
files you touched most recently preserved. Trust the summary and the preserved state, and \
re-read other files when you need exact contents. Nothing is lost: when you need a detail from \
before a compaction that the summary left out, look it up with search_history.
"""

DEFAULT_INSTRUCTIONS_FRACTION = 0.10
"""The default instruction budget: this fraction of the context window."""
CARRIED_KEY = "carried_later"
"""The session metadata key of what the newest compaction carries and has not placed yet (the
text blocks of its system message), so an exit before the next message loses none of it."""
CARRIED_PARTS_KEY = "carried_later_parts"
"""Beside it, the parts that text renders (``Carried.to_dict``): read back without its text."""


def _carried_from_metadata(value: object, parts: object = None) -> Message | None:
    """The waiting carried message kept under :data:`CARRIED_KEY` (None: none, or not text),
    with its parts (:data:`CARRIED_PARTS_KEY`) when they were kept."""
    if not isinstance(value, list) or not value:
        return None
    texts = [b.get("text") for b in value if isinstance(b, dict) and is_text(b)]
    if len(texts) != len(value) or not all(isinstance(t, str) and t for t in texts):
        return None
    blocks = tuple(dict(text_block(str(t))) for t in texts)
    return Message("system", blocks, carried=Carried.from_dict(parts))


def system_prompt(workspace: Path, instructions: str = "") -> str:
    """Byte-stable for a workspace and its instruction files (no dates or counters), so prompt
    caching keeps working."""
    base = SYSTEM_PROMPT.format(workspace=workspace_key(workspace))
    return f"{base}\n{instructions}\n" if instructions else base


class _Bookkeeping(LoopEvents):
    """The agent's own books, kept from the loop's events before any face hears them: the tool
    history, the files touched, what the last compaction brought back."""

    def __init__(self, agent: CodingAgent) -> None:
        self.agent = agent

    def on_transition(self, transition: CompactionTransition) -> None:
        self.agent.restored = self.agent.restorer.last

    def on_tool_result(self, name: str, tool_input: dict[str, Any], result: ToolResult) -> None:
        self.agent.history.record(name, tool_input, is_error=result.is_error)
        call = ToolCall(name, tool_input, result.content, result.is_error)
        self.agent.recent_files.follow(self.agent.compacter.tool_facts.recognize(call) or ())

    def on_warning(self, message: str) -> None:
        """Said by the face that subscribed (or warned by default), not by the books."""


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
        instructions_budget_tokens: int | None = None,
        restore_budget_tokens: int | None = None,
        restore_files: int = DEFAULT_RESTORE_FILES,
        config_dir: Path | None = None,
        context_tools: bool = True,
        lease_owner: str | None = None,
        lease: Lease | None = None,
        mcp: McpServers | None = None,
    ) -> None:
        """``instructions_budget_tokens`` caps the instruction files (default 10 % of the
        window), ``restore_budget_tokens`` the files brought back after a compaction (default
        5 %), ``restore_files`` their number; 0 turns either off. ``config_dir`` holds the
        user's instruction files (default: :func:`user_config_dir`). ``context_tools`` gives
        the model ``context_status`` and ``compact_context``. ``lease`` is this writer's lease
        on the resumed session; a new session is leased to ``lease_owner``. ``mcp``: running
        MCP servers whose tools the agent offers (the caller closes them)."""
        from agentloop._adapters.tokens import Calibration
        from agentloop._agent.search_history import search_history_tool
        from agentloop._agent.tools import TodoList, ToolHistory, coding_tools

        self.store = store
        self.workspace = workspace
        space = Workspace(workspace)
        self.todos = TodoList()
        self.history = ToolHistory()
        self.recent_files = RecentFiles(space)
        self.restored: RestoreReport | None = None
        """What the last compaction of this session brought back (None: none yet)."""
        messages: list[Message] = []
        waiting: Message | None = None
        calibration = Calibration()
        stored: StoredPrefix | None = None
        if resume_id is not None:
            from agentloop._adapters.records import from_record

            session = store.get_session(resume_id)
            messages = [from_record(r) for r in store.get_messages(session.id)]
            saved = session.metadata
            stored = StoredPrefix.from_metadata(saved)
            if isinstance(saved.get("todos"), dict):
                self.todos = TodoList.from_dict(saved["todos"])
            if isinstance(saved.get("tool_history"), dict):
                self.history = ToolHistory.from_dict(saved["tool_history"])
            if isinstance(saved.get("calibration"), dict):
                calibration = Calibration.from_dict(saved["calibration"])
            if isinstance(saved.get("recent_files"), dict):
                self.recent_files = RecentFiles.from_dict(saved["recent_files"], space)
            if isinstance(saved.get("restored_files"), dict):
                self.restored = RestoreReport.from_dict(saved["restored_files"])
            waiting = _carried_from_metadata(saved.get(CARRIED_KEY), saved.get(CARRIED_PARTS_KEY))
        if restore_budget_tokens is None:
            restore_budget_tokens = int(context_window * DEFAULT_RESTORE_FRACTION)
        self.restorer = FileRestorer(
            space,
            self.recent_files,
            budget_tokens=restore_budget_tokens,
            count=restore_files,
            count_tokens=self._count_tokens,
            exclude=self._instruction_paths,
        )
        # The todo list and the tool calls reach the compacted context through the ledger
        # (``facts/ledger.py``, derived from the history); the files' contents through the hook.
        hooks = [self.restorer.hook()]
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
        # What a compaction before the last exit carried and could not place yet (its child
        # ended with a reply): it goes with the next message, as it would have.
        self.compacter.next_turn.hold(waiting)
        if instructions_budget_tokens is None:
            instructions_budget_tokens = int(context_window * DEFAULT_INSTRUCTIONS_FRACTION)
        self._space = space
        self._config_dir = config_dir if config_dir is not None else user_config_dir()
        self._instructions_budget = instructions_budget_tokens
        self.instructions = self._read_instructions()
        rendered = self.instructions.render()
        if stored is None:  # a new session (or one stored before its prefix was kept)
            system, in_system = system_prompt(workspace, rendered), rendered
        else:  # byte for byte what its requests began with: its thinking stays valid
            system, in_system = stored.system, stored.instructions
        tools = coding_tools(
            space, approve=approve, todos=self.todos, context=lambda: self.loop.messages
        )
        # Follows the conversation into every child session: the lineage is what it searches.
        tools.append(search_history_tool(store, lambda: self.loop.session_id))
        self.mcp = mcp
        tools += mcp.tools if mcp is not None else []
        self.loop = AgentLoop(
            model=model,
            model_name=model_name,
            compacter=self.compacter,
            store=store,
            session_id=resume_id,
            workspace=workspace_key(workspace),
            messages=messages,
            system=system,
            tools=tools,
            max_tokens=reply_tokens,
            events=_Bookkeeping(self),
            context_tools=context_tools,
        )
        self.loop.subscribe(events or LoopEvents())
        if mcp is not None and messages:  # big MCP results go as they went: shortened
            from agentloop._agent.mcp_tools import shortened_results

            self.loop.send_shortened(shortened_results(messages, mcp.max_tokens))
        self.loop.lease = lease
        self.loop.lease_owner = lease_owner
        if resume_id is not None:  # drop_block, once a session needed it, stays on
            self.loop.thinking = SessionThinking.from_metadata(saved)
        if stored is not None:
            # The session's own tools as first sent: one agentloop no longer has is answered
            # with an error if called; one it has gained is not offered to this session.
            self.loop.tool_definitions = [dict(tool) for tool in stored.tools]
        self.prefix = StoredPrefix(system, tuple(self.loop.tool_definitions), in_system)
        """The session's system prompt and tools, stored with it and reused on resume."""
        self._announced = instructions_seen(messages, in_system)
        self.instructions_notice = self._announce(rendered)
        """For the front end on resume: one line when the instruction files changed since the
        session started (None: they did not); the model gets the new text with the next
        message."""

    # -- the face: what a front end (the CLI) reads and calls, nothing deeper --------------

    @property
    def session_id(self) -> str:
        return self.loop.session_id

    @property
    def model_name(self) -> str:
        return self.loop.model_name

    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation as the model sees it now (a copy)."""
        return tuple(self.loop.messages)

    @property
    def saved(self) -> bool:
        """Whether the session exists in the store yet (it is created on its first message)."""
        return self.loop.saved

    @property
    def unsaved(self) -> bool:
        """Whether something said is only in memory because the store refused it."""
        return self.loop.unsaved

    @property
    def lease(self) -> Lease | None:
        """This writer's lease on the session (moved along by compactions)."""
        return self.loop.lease

    @lease.setter
    def lease(self, lease: Lease | None) -> None:
        self.loop.lease = lease

    @property
    def lease_owner(self) -> str | None:
        """Who this writer is: a session it creates is leased to it."""
        return self.loop.lease_owner

    @lease_owner.setter
    def lease_owner(self, owner: str | None) -> None:
        self.loop.lease_owner = owner

    def subscribe(self, listener: LoopEvents) -> Callable[[], None]:
        """Hear what the agent does (text, tools, compactions); returns what unsubscribes."""
        return self.loop.subscribe(listener)

    @property
    def effort(self) -> str | None:
        """How hard the model thinks (``--effort``; None: the model's default)."""
        return self.loop.thinking.effort

    @effort.setter
    def effort(self, effort: str | None) -> None:
        thinking = self.loop.thinking
        self.loop.thinking = SessionThinking(effort, thinking.drop_block, thinking.binding_retries)

    def context(self) -> CompactionDecision | None:
        """Context usage now and the compaction decision (None before anything is measured)."""
        return self.loop.context()

    def compaction_status(self) -> CompactionStatus:
        """The compaction settings and what preparing summaries did in this run."""
        return compaction_status(self.compacter)

    def plan(self) -> CompactionPlan:
        """What ``/compact`` would do now, without a model call or a write."""
        loop = self.loop
        return self.compacter.plan(loop.messages, system=loop.system, tools=loop.tool_definitions)

    def mcp_report(self) -> list[str]:
        """Lines for ``/mcp``: the MCP servers, their state, tools and cost (none: no servers)."""
        from agentloop._agent.mcp_tools import mcp_report

        counter = self.compacter.counter
        return mcp_report(self.mcp, self.loop.tool_definitions, counter.count_tools)

    def fixed_tokens(self) -> int:
        """What the system prompt and the tool definitions take of every request."""
        return self.compacter.fixed_tokens(self.loop.system, self.loop.tool_definitions)

    def close(self) -> None:
        """Stop what runs in the background (a summary being prepared); counted, not lost: a
        summary prepared and never applied is billed to the session (``/cost``)."""
        from agentloop._sessions import SessionError

        self.loop.close()
        self.compacter.preparation.discard("the session ended before it was used")
        with contextlib.suppress(SessionError):  # the bill is kept where the store takes it
            self._bill_discarded()

    def cost(
        self, prices: Mapping[str, Price] | None = None
    ) -> tuple[CostReport, CostReport] | None:
        """What this session and the whole conversation (across its compactions) were billed,
        from the usage the API reported; None before the session is saved."""
        if not self.loop.saved:
            return None
        from agentloop._adapters.session_costs import conversation_cost

        return conversation_cost(self.store, self.session_id, prices)

    def _count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as the compacter measures the system prompt (calibrated)."""
        return self.compacter.calibrate(self.compacter.counter.count_system(text))

    def _read_instructions(self) -> Instructions:
        return load_instructions(
            self._space,
            config_dir=self._config_dir,
            budget_tokens=self._instructions_budget,
            count_tokens=self._count_tokens,
        )

    def _announce(self, rendered: str) -> str | None:
        """The line telling the user the instruction files changed (None: nothing new to
        tell since the last one)."""
        if rendered == self._announced:
            return None
        notice = instructions_notice(self._announced, rendered, where=str(self.workspace))
        self._announced = rendered
        return notice

    def _instructions_update(self) -> tuple[list[ContentBlock], list[Message]]:
        """The instruction files read again: what goes with the next user message when their
        text differs from what the model reads now (the stored system prompt stays as it is)."""
        if not self.loop.messages and not self.loop.saved:
            return [], []  # nothing sent yet: the system prompt was rendered from them just now
        self.instructions = self._read_instructions()
        rendered = self.instructions.render()
        if rendered == instructions_seen(self.loop.messages, self.prefix.instructions):
            return [], []
        notice = self._announce(rendered)  # a change found on resume was told then
        if notice is not None:
            self.loop.events.on_warning(notice)
        profile = profile_of(self.loop.model, self.loop.model_name)
        return update_messages(update_text(rendered), system_messages=profile.system_messages)

    def _instruction_paths(self) -> list[str]:
        return [f.label for f in self.instructions.files if f.scope == "project"]

    def compaction_receipt(self) -> Receipt | None:
        """What the compaction that made this session left out of its context, by kind, each
        with the search that finds it (None: no compaction made this session)."""
        if not self.loop.saved:
            return None
        from agentloop._adapters.compaction_receipt import session_receipt

        later = self.compacter.next_turn.peek()  # placed with the next message: in context then
        context = [*self.loop.messages, *([] if later is None else [later])]
        try:
            return session_receipt(self.store, self.session_id, context, self.compacter.tool_facts)
        except SessionError:
            return None  # the store cannot say now: /context shows the rest

    def context_notes(self) -> list[str]:
        """Lines for ``/context``: the instruction files and their cost, what the last
        compaction brought back, and the warnings."""
        notes = [self.instructions.summary_line()]
        notes += [f"Instructions: warning: {w}" for w in self.instructions.warnings]
        left = self.compaction_receipt()
        notes += left.lines() if left is not None else []
        budget = self.restorer.budget_tokens
        if budget <= 0 or self.restorer.count <= 0:
            notes.append("Files restored after compaction: off")
        elif self.restored is not None:
            done = self.restored
            listed = ", ".join(done.restored) if done.restored else "none"
            notes.append(
                f"Files restored after the last compaction: {listed} "
                f"(~{done.tokens:,} of {done.budget_tokens:,} tokens)"
            )
            if done.skipped:
                left_out = ", ".join(f"{path} ({why})" for path, why in done.skipped)
                notes.append(f"Not restored after the last compaction: {left_out}")
        return notes

    def run_turn(self, text: str) -> TurnResult:
        if not self.loop.saved:
            # Like other agents: the first request names the session in listings.
            # (From its start only: a huge message is not split whole into words.)
            words = " ".join(text[:1000].split())  # cut after a word, with …, as lists show
            self.loop.title = words if len(words) <= 60 else words[:59].rsplit(" ", 1)[0] + "…"
        blocks, after = self._instructions_update()
        user_input: str | list[ContentBlock] = (
            [{"type": "text", "text": text}, *blocks] if blocks else text
        )
        try:
            return self.loop.run_turn(user_input, then=after)
        except KeyboardInterrupt:
            # Interrupted mid-turn: what was said and done so far is stored all the same
            # (or, if the store refuses it, kept in memory: ``loop.unsaved`` says so), and
            # nothing is left running in the background.
            self.loop.close()
            with contextlib.suppress(StoreWriteError):
                self.loop.flush()
            raise
        finally:
            self.save_state()

    def fork(self, session_id: str | None = None) -> str:
        """Continue in a new branch of the lineage from ``session_id`` (default: this session)
        as it is now; that session and its other branches stay as they are. Returns the id."""
        from agentloop._adapters.records import fork_session, from_record

        source = session_id or self.session_id
        if source == self.session_id:
            self.loop.flush()
        fork = fork_session(self.store, source)
        self.loop.switch(fork, [from_record(r) for r in self.store.get_messages(fork)])
        self.save_state()
        return fork

    def undo_compaction(self) -> tuple[str, int]:
        """Undo the compaction this session came from: continue in a new branch from the
        uncompacted parent, with what was said since the compaction (the compacted session
        stays as it was); automatic compaction then waits until the context has grown. Returns
        the new id and how many messages from after the compaction it kept."""
        from agentloop._adapters.records import from_record
        from agentloop._adapters.undo_branch import NothingToUndoError, undo_branch

        if not self.loop.saved:
            raise NothingToUndoError("nothing to undo: this conversation was never compacted")
        self.loop.flush()
        branch, kept = undo_branch(self.store, self.session_id)
        self.loop.switch(branch, [from_record(r) for r in self.store.get_messages(branch)])
        self.compacter.next_turn.drop()  # what the undone compaction carried: its summary is gone
        self.save_state()
        decision = self.loop.context()
        if decision is not None:  # past the trigger: not compacted again at the next message
            self.compacter.hold(decision.usage.tokens)
        return branch, kept

    def compact(self, instructions: str | None = None) -> CompactionOutcome | None:
        try:
            return self.loop.compact(instructions)
        finally:
            self.save_state()

    def draft_compaction(
        self, instructions: str | None = None
    ) -> CompactionDraft | CompactionOutcome | None:
        """``/compact --review``: the compaction worked out (its summary written, or the one
        prepared ahead taken) and not applied; apply it with :meth:`apply_compaction` or drop
        it. The outcome instead when nothing would be compacted."""
        return self.loop.draft_compaction(instructions)

    def apply_compaction(self, draft: CompactionDraft) -> CompactionOutcome | None:
        """Apply a reviewed compaction exactly as drafted (no second summary request)."""
        try:
            return draft.apply()
        finally:
            self.save_state()

    def clear(self) -> str:
        """Start a fresh conversation in this workspace (``/clear``): a new session, stored with
        its first message, with no todos or tool history; the session before stays in the
        store as it was, resumable. Returns the new id."""
        from agentloop._agent.tools import ToolHistory

        self.save_state()
        fresh = self.loop.start_fresh()
        self.todos.replace([])
        self.history = ToolHistory()
        return fresh

    def switch_model(self, model_name: str) -> None:
        """Send the next requests to ``model_name`` (``/model``). The prompt cache starts over
        (a cache belongs to one model), and the API may drop thinking another model wrote."""
        self.loop.model_name = self.compacter.model_name = model_name

    def save_state(self) -> None:
        """Todos, tool history, recent files, instructions and calibration live in session
        metadata, so resume restores them."""
        if not self.loop.saved or self.loop.unsaved:
            return  # nothing was said yet, or the store refuses writes: saved with the next
        calibration = self.compacter.calibration
        metadata: dict[str, Any] = {
            "todos": self.todos.to_dict(),
            "tool_history": self.history.to_dict(),
            "recent_files": self.recent_files.to_dict(),
            "instructions": self.instructions.to_dict(),
            PREFIX_KEY: self.prefix.to_dict(),
            THINKING_METADATA_KEY: self.loop.thinking.to_metadata(),
        }
        if self.restored is not None:
            metadata["restored_files"] = self.restored.to_dict()
        later = self.compacter.next_turn.peek()
        metadata[CARRIED_KEY] = None if later is None else list(later.content)  # None: removed
        parts = None if later is None else later.carried
        metadata[CARRIED_PARTS_KEY] = None if parts is None else parts.to_dict()
        if calibration is not None:
            metadata["calibration"] = calibration.to_dict()
        self.store.update_session(self.loop.session_id, metadata=metadata)
        self._bill_discarded()

    def _bill_discarded(self) -> None:
        """Summary requests whose summary was discarded (a review redone or aborted, a prepared
        one gone stale) are billed to the session they were made in, once, when discarded."""
        if not self.loop.saved or self.loop.unsaved:
            return
        usage, calls = self.compacter.preparation.take_discarded()
        if calls:
            from agentloop._adapters.session_costs import record_discarded

            model = self.compacter.settings.summary_model or self.loop.model_name
            record_discarded(self.store, self.loop.session_id, usage, calls, model)
