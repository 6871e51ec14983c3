"""Start-up work done in the background, while the user types or the store opens.

Importing the ``anthropic`` SDK takes over a second and loading the tokenizer a few hundred
milliseconds; both are needed by the first request (and rich, some 200 ms, by the first reply
drawn on a terminal). Started at once in daemon threads, they overlap with everything else the
agent does before it sends (and with the user's typing in the interactive mode); whoever needs
them first simply waits for the import lock. A run that ends before using them does not wait
for them at exit.
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


def _import_renderer() -> None:
    with contextlib.suppress(Exception):  # drawing the first reply imports it anyway
        import rich.markdown  # noqa: F401


def prewarm(*, sdk: bool = True, tokenizer: bool = True, renderer: bool = False) -> None:
    """Start importing the SDK, loading the tokenizer and (``renderer``) importing the
    Markdown renderer of a terminal's replies in daemon threads."""
    wanted_jobs = ((_import_sdk, sdk), (_load_tokenizer, tokenizer), (_import_renderer, renderer))
    jobs = [job for job, wanted in wanted_jobs if wanted]
    for job in jobs:
        threading.Thread(target=job, name=f"agentloop{job.__name__}", daemon=True).start()
