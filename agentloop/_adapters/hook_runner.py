"""Running preserved-state hooks: each in a daemon thread with its own time limit.

A hook that raises or overruns yields a marker line and a warning; compaction goes on without it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from agentloop._core.facts.preserved_state import HookOutput, PreservedStateHook


def run_hooks(hooks: Sequence[PreservedStateHook]) -> HookOutput:
    """Run every hook; return the joined markdown and the warnings for hooks that failed."""
    sections: list[str] = []
    warnings: list[str] = []
    names: list[str] = []
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
                names.append(hook.name)
            continue
        warnings.append(f"preserved-state hook '{hook.name}' {problem}")
        sections.append(f"<!-- preserved state '{hook.name}' unavailable: {problem} -->")
    return HookOutput("\n\n".join(sections), tuple(warnings), tuple(names))
