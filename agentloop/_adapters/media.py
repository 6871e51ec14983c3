"""Estimating what images and PDFs cost, from their own bytes (dimensions, pages).

The API charges an image about ``width * height / 750`` tokens after scaling it to fit its
limits, and a PDF page a text-plus-image cost, whatever the size of the base64 text. These
estimates are only guesses: the API's own count (``count_tokens``, usage) decides.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Mapping
from typing import Any

IMAGE_FALLBACK_TOKENS = 1_600
"""An image whose size cannot be read: about a 1.15-megapixel image, the largest unscaled."""
IMAGE_MAX_EDGE = 1_568
IMAGE_MAX_TOKENS = 1_600
PDF_PAGE_TOKENS = 1_800
"""A page of a PDF: its text plus the page image, a typical figure (the API says 1,500-3,000)."""
PDF_FALLBACK_PAGES = 3
_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_HEADER_BYTES = 64 * 1024


def _decoded(data: str, limit: int | None) -> bytes:
    text = data if limit is None else data[: (limit // 3 + 1) * 4]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=False)
    except (binascii.Error, ValueError):
        return b""


def image_size(raw: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG, GIF, JPEG or WebP header; None when unreadable."""
    if raw.startswith(b"\x89PNG\r\n\x1a\n") and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return width, height
    if raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        width, height = struct.unpack("<HH", raw[6:10])
        return width, height
    if raw.startswith(b"RIFF") and raw[8:12] == b"WEBP" and len(raw) >= 30:
        chunk = raw[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(raw[24:27], "little"), 1 + int.from_bytes(
                raw[27:30], "little"
            )
        if chunk == b"VP8 ":
            width, height = struct.unpack("<HH", raw[26:30])
            return width & 0x3FFF, height & 0x3FFF
        if chunk == b"VP8L" and len(raw) >= 25:
            bits = int.from_bytes(raw[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if raw.startswith(b"\xff\xd8"):
        return _jpeg_size(raw)
    return None


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    index = 2
    while index + 9 < len(raw):
        if raw[index] != 0xFF:
            index += 1
            continue
        marker = raw[index + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            index += 2
            continue
        length = int.from_bytes(raw[index + 2 : index + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", raw[index + 5 : index + 9])
            return width, height
        index += 2 + length
    return None


def image_tokens(width: int, height: int) -> int:
    """What the API charges for an image of this size (scaled to fit its limits first)."""
    if width <= 0 or height <= 0:
        return IMAGE_FALLBACK_TOKENS
    scale = min(1.0, IMAGE_MAX_EDGE / max(width, height))
    scaled = (width * scale) * (height * scale)
    return max(1, min(IMAGE_MAX_TOKENS, round(scaled / 750)))


def image_block_tokens(block: Mapping[str, Any]) -> int:
    """An image block's estimated cost, from the dimensions in its base64 data when it has any."""
    source = block.get("source")
    if isinstance(source, Mapping) and isinstance(source.get("data"), str):
        size = image_size(_decoded(source["data"], _HEADER_BYTES))
        if size is not None:
            return image_tokens(*size)
    return IMAGE_FALLBACK_TOKENS


def pdf_pages(data: str) -> int | None:
    """How many pages a base64 PDF has (its page objects); None when it is not a PDF."""
    raw = _decoded(data, None)
    if not raw.startswith(b"%PDF"):
        return None
    return len(_PAGE.findall(raw)) or None


def pdf_block_tokens(block: Mapping[str, Any]) -> int:
    """A base64 PDF document's estimated cost: its pages times a typical page cost."""
    source = block.get("source")
    pages = None
    if isinstance(source, Mapping) and isinstance(source.get("data"), str):
        pages = pdf_pages(source["data"])
    return (pages or PDF_FALLBACK_PAGES) * PDF_PAGE_TOKENS
