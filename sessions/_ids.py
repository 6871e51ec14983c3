"""Session ids: 26 lowercase Crockford base32 characters; the 8 the UI shows are random.

Layout: 8 random characters (40 bits), then 6 characters holding the whole seconds since
2020-01-01 UTC (30 bits: good until 2054), then 12 random characters (60 bits). What a user
sees and types is random, so a 4-character prefix (20 bits) is unique in practice across a few
thousand sessions; ordering never comes from the id but from the stored ``created_at``. Ids of
the earlier layout (the seconds first) stay valid: an id is only ever compared whole or by
prefix. References typed by a user may be a full id or a unique prefix of at least 4
characters (like git); they are case-insensitive and normalized to lowercase.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime

from ._store_errors import InvalidSessionIdError

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
"""Crockford's base32 alphabet, lowercase: no i, l, o, u (they read like 1, 1, 0, v)."""

ID_LENGTH = 26
MIN_PREFIX = 4
SHORT_LENGTH = 8
"""How many characters the UI shows (all random)."""
TIME_CHARS = 6

EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
_MAX_SECONDS = 32**TIME_CHARS - 1
_RANDOM_CHARS = ID_LENGTH - TIME_CHARS
_RANDOM_BITS = 5 * _RANDOM_CHARS
_REF_RE = re.compile(f"[{ALPHABET}]{{{MIN_PREFIX},{ID_LENGTH}}}")


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_session_id(now: datetime | None = None, rand: Callable[[int], bytes] | None = None) -> str:
    """A fresh id; ``now`` (tz-aware, default: the current time) and ``rand`` are for tests."""
    moment = now if now is not None else datetime.now(UTC)
    if moment.tzinfo is None:
        raise ValueError("new_session_id needs a timezone-aware datetime")
    seconds = int((moment - EPOCH).total_seconds())
    seconds = min(max(seconds, 0), _MAX_SECONDS)
    random_bytes = (rand or os.urandom)((_RANDOM_BITS + 7) // 8)
    random_value = int.from_bytes(random_bytes, "big") & ((1 << _RANDOM_BITS) - 1)
    randoms = _encode(random_value, _RANDOM_CHARS)
    return randoms[:SHORT_LENGTH] + _encode(seconds, TIME_CHARS) + randoms[SHORT_LENGTH:]


def _describe(ref: object) -> str:
    text = repr(ref)
    return text if len(text) <= 40 else text[:37] + "..."


def validate_session_ref(ref: str) -> str:
    """Return ``ref`` normalized (lowercase) if it is a full id or a prefix of >= 4 characters.

    Raises :class:`InvalidSessionIdError` for anything else: empty strings, spaces, path
    fragments such as ``../x``, characters outside the alphabet, prefixes that are too short.
    """
    if not isinstance(ref, str):
        raise InvalidSessionIdError(
            f"invalid session id {_describe(ref)}: expected a string", ref=str(ref)
        )
    # ASCII only: str.lower() maps some non-ASCII letters (the Kelvin sign) onto ASCII ones.
    normalized = ref.lower() if ref.isascii() else ref
    if _REF_RE.fullmatch(normalized):
        return normalized
    if not ref:
        reason = "it is empty"
    elif len(ref) > ID_LENGTH:
        reason = f"ids are {ID_LENGTH} characters long"
    elif len(ref) < MIN_PREFIX and _REF_RE.fullmatch(normalized + "0" * MIN_PREFIX):
        reason = f"a prefix needs at least {MIN_PREFIX} characters"
    else:
        reason = "ids use only 0-9 and a-z without i, l, o, u"
    raise InvalidSessionIdError(f"invalid session id {_describe(ref)}: {reason}", ref=ref)


def validate_session_id(session_id: str) -> str:
    """Like :func:`validate_session_ref` but only a complete 26-character id is accepted."""
    normalized = validate_session_ref(session_id)
    if len(normalized) != ID_LENGTH:
        raise InvalidSessionIdError(
            f"invalid session id {_describe(session_id)}: a full id has {ID_LENGTH} characters",
            ref=session_id,
        )
    return normalized


def short_id(session_id: str) -> str:
    """The 8-character form the UI shows."""
    return session_id[:SHORT_LENGTH]
