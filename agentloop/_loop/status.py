"""What a conversation's compaction is set to and has done, as one read-only value: what a face
(``/context``, the status line) shows without reaching into the compacter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentloop._core.compaction.prepared import Preparation
    from agentloop._core.measuring.context import Calibrator
    from agentloop._loop.conversation_compacter import ConversationCompacter


@dataclass(frozen=True, slots=True)
class CompactionStatus:
    """The compacter's settings and state at one moment."""

    enabled: bool
    """Automatic compaction is on."""
    trigger_tokens: int
    window_source: str
    """Where the context window's size came from (catalog, API, override...)."""
    max_output_tokens: int
    calibration: Calibrator | None
    standing_instructions: str | None
    """What every summary is told besides the default instruction (None: nothing)."""
    prepare_mark_tokens: int | None
    """Past this many tokens a summary is prepared in the background (None: preparing is off)."""
    prepared_messages: int | None
    """Messages the summary prepared and ready covers (None: none is ready)."""
    preparation: Preparation
    """What preparing summaries did in this run (counts, discarded usage)."""


def compaction_status(compacter: ConversationCompacter) -> CompactionStatus:
    """The status of ``compacter`` now."""
    settings = compacter.settings
    ready = compacter.prepared
    prepare_at = settings.prepare_at
    return CompactionStatus(
        enabled=settings.enabled,
        trigger_tokens=compacter.trigger_tokens,
        window_source=compacter.window_source,
        max_output_tokens=compacter.max_output_tokens,
        calibration=compacter.calibration,
        standing_instructions=settings.standing_instructions or None,
        prepare_mark_tokens=None
        if prepare_at is None
        else int(compacter.trigger_tokens * prepare_at),
        prepared_messages=None if ready is None else len(ready.covered),
        preparation=compacter.preparation,
    )
