"""Real media for the corpus, generated in code: PNG images and multi-page PDF documents.

Both are valid files (a PNG decoder and a PDF reader open them), cached per parameters so that
building the corpus many times stays cheap.
"""

from __future__ import annotations

import base64
import functools
import random
import struct
import zlib
from collections.abc import Sequence
from typing import Literal

Pattern = Literal["ui", "chart", "noise"]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data))
        + kind
        + data
        + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def _ui_row(y: int, width: int, height: int) -> bytes:
    """A row of a flat application screenshot: header bar, sidebar, content, a button."""
    header, sidebar = max(1, height // 12), max(1, width // 5)
    if y < header:
        return bytes((33, 37, 41)) * width
    button = height * 3 // 4 <= y < height * 3 // 4 + max(1, height // 20)
    row = bytes((248, 249, 250)) * sidebar
    content = width - sidebar
    if button:
        start = content // 2
        row += bytes((255, 255, 255)) * start + bytes((13, 110, 253)) * (content - start)
    elif y % 24 < 2:
        row += bytes((222, 226, 230)) * content
    else:
        row += bytes((255, 255, 255)) * content
    return row


def _chart_row(y: int, width: int, height: int) -> bytes:
    bars = 8
    step = max(1, width // bars)
    row = b""
    for bar in range(bars):
        top = height - (height * (bar + 2)) // (bars + 2)
        colour = (54, 162, 235) if y >= top else (255, 255, 255)
        row += bytes(colour) * (step if bar < bars - 1 else width - step * (bars - 1))
    return row


@functools.cache
def png(width: int, height: int, pattern: Pattern = "ui", seed: int = 0) -> bytes:
    """A real RGB PNG of ``width`` x ``height`` pixels.

    ``ui`` and ``chart`` compress to a few kilobytes whatever their size (a big image, small
    base64); ``noise`` hardly compresses (a small image, big base64)."""
    if width < 1 or height < 1:
        raise ValueError("an image needs at least one pixel")
    rng = random.Random(seed)
    raw = bytearray()
    for y in range(height):
        raw.append(0)  # filter type: none
        if pattern == "noise":
            raw += rng.randbytes(width * 3)
        elif pattern == "chart":
            raw += _chart_row(y, width, height)
        else:
            raw += _ui_row(y, width, height)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(raw), 6))
        + _chunk(b"IEND", b"")
    )


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _pdf_text(text: str) -> str:
    """A PDF literal string body (Latin-1 only, specials escaped)."""
    text = text.encode("latin-1", "replace").decode("latin-1")
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


@functools.cache
def _pdf(title: str, pages: tuple[tuple[str, ...], ...]) -> bytes:
    objects: list[bytes] = []  # object n is objects[n - 1]
    page_ids = [5 + 2 * index for index in range(len(pages))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{pid} 0 R" for pid in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects.append(f"<< /Title ({_pdf_text(title)}) /Producer (agentloop tests) >>".encode())
    for lines in pages:
        content = ["BT", "/F1 11 Tf", "14 TL", "72 740 Td"]
        content += [f"({_pdf_text(line)}) Tj T*" for line in lines]
        content.append("ET")
        stream = "\n".join(content).encode("latin-1")
        page_id = 5 + len(objects) - 4
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {page_id + 1} 0 R >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 4 0 R >>\n"
        f"startxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)


def pdf(title: str, pages: Sequence[Sequence[str]]) -> bytes:
    """A real PDF with one page per item of ``pages`` (each a list of text lines)."""
    if not pages:
        raise ValueError("a PDF needs at least one page")
    return _pdf(title, tuple(tuple(lines) for lines in pages))
