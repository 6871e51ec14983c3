"""Opaque, verifiable signatures of the fake API (thinking and on-demand compaction blocks).

A signature is ``fakesig1.<base64url JSON payload>.<HMAC-SHA256 of it>``: the server reads the
payload back (model, account, prefix digests, hidden token figure...) and checks the HMAC with
its own secret, so that a signature edited by a client no longer verifies. Also the canonical
JSON and the digests the prefix check chains (:func:`canonical`, :func:`step`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

PREFIX = "fakesig1."


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces: key order and formatting never matter."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def step(state: str, item: Any) -> str:
    """The next link of a hash chain: ``state`` followed by ``item``."""
    return digest(state + "|" + canonical(item))


def sign(secret: bytes, payload: Mapping[str, Any]) -> str:
    data = base64.urlsafe_b64encode(canonical(dict(payload)).encode()).decode().rstrip("=")
    mac = hmac.new(secret, data.encode(), hashlib.sha256).hexdigest()[:40]
    return f"{PREFIX}{data}.{mac}"


def read(signature: Any) -> dict[str, Any] | None:
    """The payload of one of our signatures, unverified (None: not one of ours, or mangled)."""
    if not isinstance(signature, str) or not signature.startswith(PREFIX):
        return None
    parts = signature[len(PREFIX) :].split(".")
    if len(parts) != 2:
        return None
    data = parts[0] + "=" * (-len(parts[0]) % 4)
    try:
        payload = json.loads(base64.urlsafe_b64decode(data.encode()))
    except (ValueError, binascii.Error):
        return None
    return payload if isinstance(payload, dict) else None


def verify(secret: bytes, signature: Any) -> dict[str, Any] | None:
    """The payload when ``signature`` is ours and unaltered, else None."""
    payload = read(signature)
    if payload is None:
        return None
    data, mac = signature[len(PREFIX) :].split(".")
    expected = hmac.new(secret, data.encode(), hashlib.sha256).hexdigest()[:40]
    return payload if hmac.compare_digest(mac, expected) else None


def looks_signed(signature: Any) -> bool:
    """Whether ``signature`` has our format (altered or not)."""
    return isinstance(signature, str) and signature.startswith(PREFIX)
