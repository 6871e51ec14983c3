"""Credentials kept away from the model: which environment variables hold secrets, the
environment a shell command gets (without them), redaction from tool output, and the agent's
own environment block hidden from its commands.

A variable is a secret by its name — the Anthropic credentials, and any name with a word such as
``TOKEN``, ``SECRET``, ``PASSWORD``, ``PWD``, ``PASS``, ``KEY``, ``PAT``, ``DSN`` or
``CREDENTIALS`` in it, or a word ending in ``PASSWORD``/``TOKEN``/``SECRET`` (``GITHUB_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, ``PGPASSWORD``, ``MYSQL_PWD``, ``GH_PAT``, ``SENTRY_DSN``...) — or
by its value's shape: a URL with credentials in it (``postgres://user:pw@host``) or a token
with a well-known prefix (``sk-ant-``, ``ghp_``, ``github_pat_``, ``xoxb-``, ``AKIA``...).
Shell commands run without them unless the user lists them in ``$AGENTLOOP_KEEP_ENV`` (names
separated by commas or spaces). Whatever the environment, the values of secret variables (8
characters or more) are replaced in every tool result by ``[redacted $NAME]`` — and so are
their reversed, base64 and hex copies — before the result reaches the model, the screen or the
store; tokens of those well-known shapes and the password of a URL are redacted wherever they
come from.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "KEEP_ENV",
    "REDACT_MARGIN",
    "hide_from_children",
    "is_secret",
    "is_secret_name",
    "redact",
    "scrubbed_environment",
    "secret_values",
]

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
        "PASS",
        "PWD",
        "PASSPHRASE",
        "KEY",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "COOKIE",
        "PRIVATE",
        "PAT",
        "DSN",
    }
)
_ENDINGS = ("PASSWORD", "PASSWD", "TOKEN", "SECRET", "APIKEY")
"""A word that ends so is a secret too: ``PGPASSWORD``, ``NPMTOKEN``."""
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})
"""The working directories, whose names are only the word ``PWD``."""
_MIN_REDACTED_CHARS = 8  # shorter values ("1", "true") would redact ordinary words

_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])(?:sk-ant-[A-Za-z0-9_-]{20,}"
    r"|sk-(?:proj-)?[A-Za-z0-9_-]{32,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|(?:sk|rk)_live_[0-9A-Za-z]{20,}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|pypi-[A-Za-z0-9_-]{50,})"
)
"""Tokens of well-known services, recognised by their prefix and length."""
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s:@/?#\[\]]*)"
    r"(?::(?P<password>[^\s@/?#]+))?@"
)
"""A URL's userinfo: ``scheme://user:password@`` (or a key alone: ``https://key@host``)."""
_KEY_LIKE_USER = re.compile(r"[A-Za-z0-9_-]{16,}")

REDACT_MARGIN = 4096
"""How much more than it shows a truncated output keeps for redaction, so that a secret cut by
the truncation is still seen whole (and redacted) first."""


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a credential."""
    upper = name.upper()
    if upper in _ALWAYS:
        return True
    if upper in _NOT_SECRET:
        return False
    words = [word for word in re.split(r"[^A-Z0-9]+", upper) if word]
    return any(word in _WORDS or word.endswith(_ENDINGS) for word in words)


def is_secret(name: str, value: str) -> bool:
    """Whether the variable ``name=value`` holds a credential: by its name, or by its value's
    shape (a URL with credentials, a token with a well-known prefix)."""
    if is_secret_name(name):
        return True
    if _TOKEN.search(value) is not None:
        return True
    return "://" in value and any(
        _hide_url_credentials(match) != match.group() for match in _URL_CREDENTIALS.finditer(value)
    )


def _kept(environ: Mapping[str, str]) -> frozenset[str]:
    return frozenset(re.split(r"[,\s]+", environ.get(KEEP_ENV, "").strip())) - {""}


def scrubbed_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without its secret variables, except those the
    user keeps with ``$AGENTLOOP_KEEP_ENV``."""
    source = os.environ if environ is None else environ
    kept = _kept(source)
    return {k: v for k, v in source.items() if k in kept or not is_secret(k, v)}


def secret_values(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(name, value)`` of every secret variable worth redacting, longest value first (so a
    secret that contains another is replaced whole)."""
    source = os.environ if environ is None else environ
    return list(_secret_values(frozenset(source.items())))


@functools.lru_cache(maxsize=16)
def _secret_values(items: frozenset[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    found = [
        (name, value)
        for name, value in items
        if len(value.strip()) >= _MIN_REDACTED_CHARS and is_secret(name, value)
    ]
    return tuple(sorted(found, key=lambda item: (-len(item[1]), item[0])))


@functools.lru_cache(maxsize=256)
def _copies(value: str) -> tuple[str, ...]:
    """``value`` and the copies of it a command can make: reversed, base64 (standard and
    URL-safe, in each of the three alignments the value can have in a longer encoded text:
    the part that does not depend on its neighbours) and hex; longest first."""
    raw = value.encode()
    found = {value, value[::-1], raw.hex(), raw.hex().upper()}
    for start in range(3):
        piece = raw[start:]
        piece = piece[: len(piece) // 3 * 3]
        encoded = base64.b64encode(piece).decode()
        found |= {encoded, encoded.replace("+", "-").replace("/", "_")}
    return tuple(
        sorted((c for c in found if len(c) >= _MIN_REDACTED_CHARS), key=lambda c: (-len(c), c))
    )


def _hide_url_credentials(match: re.Match[str]) -> str:
    scheme, user, password = match.group("scheme", "user", "password")
    if password is not None:
        return f"{scheme}{user}:[redacted]@"
    if _KEY_LIKE_USER.fullmatch(user):
        return f"{scheme}[redacted]@"
    return match.group()


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with the value of every secret variable (and its reversed, base64 and hex
    copies) replaced by ``[redacted $NAME]``, well-known tokens by ``[redacted token]`` and a
    URL's password by ``[redacted]``."""
    for name, value in secret_values(environ):
        for copy in _copies(value):
            if copy in text:
                text = text.replace(copy, f"[redacted ${name}]")
    text = _TOKEN.sub("[redacted token]", text)
    return _URL_CREDENTIALS.sub(_hide_url_credentials, text) if "://" in text else text


# ---------------------------------------------------------------------------------------------
# The agent's own environment block


def hide_from_children(environ: Mapping[str, str] | None = None) -> int:
    """Overwrite the secret variables in this process's original environment block — what
    ``/proc/<pid>/environ`` shows to a process of the same user, a command of the agent's
    included — after moving them to a copy, so that they still work here (``getenv``, the
    SDK, a database driver's reconnection). Linux only (elsewhere nothing is done); call it
    before other threads start. Returns how many entries were hidden."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    try:
        # Fields 50 and 51 of /proc/self/stat: where the block starts and ends.
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])
        libc = ctypes.CDLL(None, use_errno=True)
        block = ctypes.string_at(start, end - start)
    except (OSError, ValueError, IndexError):
        return 0
    source = os.environ if environ is None else environ
    kept = _kept(source)
    hidden = 0
    offset = 0
    for entry in block.split(b"\0"):
        name, _, value = entry.partition(b"=")
        text_name = os.fsdecode(name)
        secret = (
            bool(name)
            and text_name not in kept
            and is_secret(text_name, value.decode("utf-8", "replace"))
        )
        if secret:
            current = os.environb.get(name)
            if current is not None:  # a copy of its own: it goes on working in this process
                libc.setenv(name, current, 1)
            ctypes.memset(start + offset, 0, len(entry))
            hidden += 1
        offset += len(entry) + 1
    return hidden
