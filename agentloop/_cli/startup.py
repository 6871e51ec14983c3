"""Start-up work done in the background, while the user types or the store opens.

Importing the ``anthropic`` SDK takes over a second and loading the tokenizer a few hundred
milliseconds; both are needed by the first request. Started at once in daemon threads, they
overlap with everything else the agent does before it sends (and with the user's typing in
the interactive mode); whoever needs them first simply waits for the import lock. A run that
ends before using them does not wait for them at exit.
"""

from __future__ import annotations

import contextlib
import threading


def _import_sdk() -> None:
    with contextlib.suppress(Exception):  # the real call reports problems, one line
        import anthropic  # noqa: F401


def _load_tokenizer() -> None:
    with contextlib.suppress(Exception):
        from agentloop._adapters.tokens import get_encoding

        get_encoding()


def prewarm(*, sdk: bool = True, tokenizer: bool = True) -> None:
    """Start importing the SDK and loading the tokenizer in daemon threads."""
    jobs = [job for job, wanted in ((_import_sdk, sdk), (_load_tokenizer, tokenizer)) if wanted]
    for job in jobs:
        threading.Thread(target=job, name=f"agentloop{job.__name__}", daemon=True).start()
