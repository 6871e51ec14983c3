"""The fake Messages API (``tests/fake_api/``) under its historical name, plus its fixture.

``conftest.py`` loads this module as a pytest plugin, so every test can ask for ``fake_api``;
``from fake_anthropic import ...`` keeps working for everything the package exports.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_api import (
    ANTHROPIC_VERSION,
    DEFAULT_MODELS,
    IMAGE_TOKEN_CAP,
    PDF_PAGE_TOKENS,
    TEST_API_KEY,
    ErrorReply,
    FakeAnthropicServer,
    Handler,
    ImageInfo,
    MediaPrices,
    ModelSpec,
    RecordedRequest,
    Reply,
    ReplySpec,
    ToolCall,
    api_error,
    check_request,
    image_tokens,
    invalid_request,
    overloaded,
    pdf_pages,
    prompt_too_long,
    rate_limited,
    sniff_image,
    text_reply,
    text_tokens,
    tool_reply,
    unauthorized,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MODELS",
    "IMAGE_TOKEN_CAP",
    "PDF_PAGE_TOKENS",
    "TEST_API_KEY",
    "ErrorReply",
    "FakeAnthropicServer",
    "Handler",
    "ImageInfo",
    "MediaPrices",
    "ModelSpec",
    "RecordedRequest",
    "Reply",
    "ReplySpec",
    "ToolCall",
    "api_error",
    "check_request",
    "fake_api",
    "image_tokens",
    "invalid_request",
    "overloaded",
    "pdf_pages",
    "prompt_too_long",
    "rate_limited",
    "sniff_image",
    "text_reply",
    "text_tokens",
    "tool_reply",
    "unauthorized",
]


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropicServer]:
    """A running :class:`FakeAnthropicServer` on 127.0.0.1 (stopped after the test)."""
    with FakeAnthropicServer() as server:
        yield server
