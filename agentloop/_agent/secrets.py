"""Credentials kept away from the model: which environment variables hold secrets, the
environment a shell command gets (without them), and redaction of their values from tool output.

A variable is a secret by its name: the Anthropic credentials, and any name with a word such as
``TOKEN``, ``SECRET``, ``PASSWORD``, ``KEY`` or ``CREDENTIALS`` in it (``GITHUB_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, ``OPENAI_API_KEY``...). Shell commands run without them unless the
user lists them in ``$AGENTLOOP_KEEP_ENV`` (names separated by commas or spaces). Whatever the
environment, the values of secret variables (8 characters or more) are replaced in every tool
result by ``[redacted $NAME]`` before the result reaches the model, the screen or the store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["KEEP_ENV", "is_secret_name", "redact", "scrubbed_environment", "secret_values"]

KEEP_ENV = "AGENTLOOP_KEEP_ENV"
"""Names of secret variables the user lets shell commands see anyway."""

_ALWAYS = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"})
_WORDS = frozenset(
    {
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "KEY",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "COOKIE",
        "PRIVATE",
    }
)
_MIN_REDACTED_CHARS = 8  # shorter values ("1", "true") would redact ordinary words


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a credential."""
    upper = name.upper()
    return upper in _ALWAYS or any(word in _WORDS for word in re.split(r"[^A-Z0-9]+", upper))


def _kept(environ: Mapping[str, str]) -> frozenset[str]:
    return frozenset(re.split(r"[,\s]+", environ.get(KEEP_ENV, "").strip())) - {""}


def scrubbed_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without its secret variables, except those the
    user keeps with ``$AGENTLOOP_KEEP_ENV``."""
    source = os.environ if environ is None else environ
    kept = _kept(source)
    return {k: v for k, v in source.items() if k in kept or not is_secret_name(k)}


def secret_values(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(name, value)`` of every secret variable worth redacting, longest value first (so a
    secret that contains another is replaced whole)."""
    source = os.environ if environ is None else environ
    found = [
        (name, value)
        for name, value in source.items()
        if is_secret_name(name) and len(value.strip()) >= _MIN_REDACTED_CHARS
    ]
    return sorted(found, key=lambda item: (-len(item[1]), item[0]))


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with the value of every secret variable replaced by ``[redacted $NAME]``."""
    for name, value in secret_values(environ):
        if value in text:
            text = text.replace(value, f"[redacted ${name}]")
    return text
