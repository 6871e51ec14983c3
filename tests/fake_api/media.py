"""Reading images and PDFs the way the API does: sizes from the file header, pages from the PDF.

Written independently of the corpus's generators (tests/transcripts/media.py) so that each checks
the other.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from dataclasses import dataclass

IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
MAX_IMAGE_EDGE = 1568
"""The API scales an image down until its long edge is at most this many pixels."""
IMAGE_TOKEN_CAP = 1600
"""... and until it costs at most about this many tokens."""
PIXELS_PER_TOKEN = 750


@dataclass(frozen=True)
class ImageInfo:
    media_type: str
    width: int
    height: int


def decode_base64(data: object) -> bytes | None:
    """The bytes of base64 ``data``, or None when it is not valid base64."""
    if not isinstance(data, str) or not data:
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def sniff_image(data: bytes) -> ImageInfo | None:
    """Media type and pixel size read from a PNG, JPEG, GIF or WebP header (None: not one)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return ImageInfo("image/png", width, height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return ImageInfo("image/gif", width, height)
    if data.startswith(b"\xff\xd8"):
        return _jpeg(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    return None


_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg(data: bytes) -> ImageInfo | None:
    index = 2
    while index + 4 <= len(data):
        if data[index] != 0xFF:
            return None
        marker = data[index + 1]
        if marker == 0xFF:  # fill byte
            index += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            index += 2
            continue
        (length,) = struct.unpack(">H", data[index + 2 : index + 4])
        if marker in _JPEG_SOF and index + 9 <= len(data):
            height, width = struct.unpack(">HH", data[index + 5 : index + 9])
            return ImageInfo("image/jpeg", width, height)
        index += 2 + length
    return None


def _webp(data: bytes) -> ImageInfo | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return ImageInfo("image/webp", width, height)
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return ImageInfo("image/webp", width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return ImageInfo("image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    return None


def image_tokens(width: int, height: int, *, cap: int = IMAGE_TOKEN_CAP) -> int:
    """What the API charges for an image: about ``width * height / 750`` after scaling it down
    to a long edge of at most 1568 pixels and at most ``cap`` tokens."""
    w, h = float(width), float(height)
    longest = max(w, h, 1.0)
    if longest > MAX_IMAGE_EDGE:
        w, h = w * MAX_IMAGE_EDGE / longest, h * MAX_IMAGE_EDGE / longest
    return max(1, min(cap, math.ceil(w * h / PIXELS_PER_TOKEN)))


_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_COUNT = re.compile(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)|/Count\s+(\d+)[^>]*?/Type\s*/Pages\b")


def pdf_pages(data: bytes) -> int | None:
    """The number of pages of a PDF (None: not a PDF). Page objects are counted; a PDF whose
    pages hide in compressed object streams falls back to the page tree's ``/Count``."""
    if not data.startswith(b"%PDF-"):
        return None
    pages = len(_PAGE.findall(data))
    if pages:
        return pages
    counts = [int(a or b) for a, b in _COUNT.findall(data)]
    return max(counts) if counts else 1
