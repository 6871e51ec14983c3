"""The slash commands and the keys of the interactive mode, as ``/help`` and ``--help`` list
them: plain data and one function, light at import (``agentloop --help`` loads this, not the
read loop of :mod:`agentloop._cli.repl`)."""

from __future__ import annotations

SLASH_COMMANDS: tuple[tuple[str, str], ...] = (
    ("/compact [instructions]", "compact the conversation now (instructions guide the summary)"),
    ("/compact --dry-run", "preview a compaction (and its instructions); writes nothing"),
    ("/compact --review", "show the summary and the ledger first; then apply, ask again or abort"),
    ("/undo-compaction", "continue from before the last compaction, in a new branch"),
    ("/context", "context usage, where compaction triggers, the window and its source"),
    ("/cost", "tokens and price of this session and of the whole conversation"),
    ("/clear", "start a fresh conversation (the current one is kept: --resume continues it)"),
    ("/model [NAME]", "the model; with a NAME, switch to it for the next turns"),
    ("/sessions", "conversations of this workspace"),
    ("/mcp", "MCP servers: their state, tools and what their definitions cost"),
    ("/help", "this help"),
    ("/exit, /quit", "leave (the session is saved; continue later with --continue)"),
)
"""Usage and one line of help for each slash command, in the order ``/help`` lists them."""

TOOLS_HELP = (
    "The agent's own tools: context_status (how full its context is) and compact_context "
    "(asks\nfor a compaction at the next safe point; not when compaction is off)."
)
KEY_ITEMS = (
    "Enter sends",
    "\\ then Enter, or Alt-Enter: a new line",
    "a paste is one message (a long one shows as [pasted N lines])",
    "↑ history",
    "Ctrl-C clears the line (twice on an empty line: quit)",
    "Ctrl-D quits",
    "Ctrl-C while the agent works: interrupt",
)


def help_text(width: int | None) -> str:
    """``/help``, wrapped to ``width`` terminal cells (None: unwrapped)."""
    from agentloop._cli.cells import joined, paragraph, two_columns

    lines = ["Commands:", *two_columns(SLASH_COMMANDS, width)]
    lines += joined("Keys: ", KEY_ITEMS, width)
    lines += paragraph(" ".join(TOOLS_HELP.split()), width)
    return "\n".join(lines)
