"""A :class:`CodingAgent` for the agent tests: a scripted model, a store, a workspace, commands
never approved, the window given as an override."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentloop import CompactionSettings, Model
from agentloop._agent.agent import CodingAgent
from agentloop._agent.shell import never_allow
from sessions import SessionStore

MODEL = "claude-sonnet-5-5"


def coding_agent(
    store: SessionStore,
    workspace: Path,
    model: Model,
    *,
    window: int = 200_000,
    resume: str | None = None,
    **options: Any,
) -> CodingAgent:
    """The agent on ``workspace``; ``options`` go to :class:`CodingAgent` as they are."""
    return CodingAgent(
        model=model,
        model_name=MODEL,
        workspace=workspace,
        store=store,
        context_window=window,
        max_output_tokens=1_024,
        window_source="override",
        settings=CompactionSettings(),
        approve=never_allow,
        resume_id=resume,
        **options,
    )
