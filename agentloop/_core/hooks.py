"""Preserved-state hooks: callables whose markdown is injected into every compacted context.

A hook that raises or overruns its time limit yields a marker line and a warning; compaction
goes on without it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PreservedStateHook:
    """A named source of state (todos, workflow phase, error strikes, recent tools...)."""

    name: str
    render: Callable[[], str]
    timeout: float = 2.0


def run_hooks(hooks: Sequence[PreservedStateHook]) -> tuple[str, list[str]]:
    """Run every hook; return the joined markdown and the warnings for hooks that failed."""
    sections: list[str] = []
    warnings: list[str] = []
    for hook in hooks:
        outcome: dict[str, str | BaseException] = {}

        def call(
            hook: PreservedStateHook = hook, outcome: dict[str, str | BaseException] = outcome
        ) -> None:
            try:
                outcome["value"] = hook.render()
            except BaseException as error:
                outcome["error"] = error

        # A daemon thread: a hook stuck forever must not keep the process alive at exit.
        worker = threading.Thread(target=call, name=f"hook-{hook.name}", daemon=True)
        worker.start()
        worker.join(hook.timeout)
        if worker.is_alive():
            problem = f"timed out after {hook.timeout:g}s"
        elif "error" in outcome:
            failure = outcome["error"]
            problem = f"failed: {type(failure).__name__}: {failure}"
        else:
            text = str(outcome.get("value", "")).strip()
            if text:
                sections.append(text)
            continue
        warnings.append(f"preserved-state hook '{hook.name}' {problem}")
        sections.append(f"<!-- preserved state '{hook.name}' unavailable: {problem} -->")
    return "\n\n".join(sections), warnings
