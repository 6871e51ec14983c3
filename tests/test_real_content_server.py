"""The test server counts real content like the API: images by their pixels, PDFs by their pages,
a fixed cost per message, a tokenizer that charges more than tiktoken; ``count_tokens`` answers
exactly what ``/v1/messages`` reports; and its rules know server tools, citations and media."""

from __future__ import annotations

import base64
import json
import math
import struct
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from fake_api import (
    TEST_API_KEY,
    FakeAnthropicServer,
    check_request,
    image_tokens,
    invalid_request,
    sniff_image,
    text_reply,
    text_tokens,
)
from transcripts import CORPUS, coding_session, media_session, pdf, png, research_session

MODEL = "claude-sonnet-4-6"


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as running:
        yield running


def _image(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": encoded},
    }


def _document(data: bytes, title: str) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    source = {"type": "base64", "media_type": "application/pdf", "data": encoded}
    return {"type": "document", "source": source, "title": title}


def _user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": list(blocks)}]}


TEXT = {"type": "text", "text": "What is in this file?"}


# ---------------------------------------------------------------------------------------------
# Opaque content is charged as the API charges it, never by its base64


@pytest.mark.parametrize(
    ("width", "height", "pattern", "expected"),
    [
        (1280, 800, "ui", math.ceil(1280 * 800 / 750)),  # 1,366
        (2400, 1350, "chart", 1600),  # scaled to a 1,568 long edge, then capped
        (120, 90, "noise", math.ceil(120 * 90 / 750)),  # 15, with 40 KB of base64
        (200, 200, "ui", math.ceil(200 * 200 / 750)),
    ],
)
def test_an_image_costs_its_pixels(width: int, height: int, pattern: Any, expected: int) -> None:
    server = FakeAnthropicServer()
    data = png(width, height, pattern)
    cost = server.count_input_tokens(_user(_image(data), TEXT)) - server.count_input_tokens(
        _user(TEXT)
    )
    assert cost == expected == image_tokens(width, height)


def test_image_cost_does_not_follow_base64_size() -> None:
    server = FakeAnthropicServer()
    big_flat = _image(png(2400, 1350, "chart"))
    small_noisy = _image(png(120, 90, "noise"))
    assert len(json.dumps(small_noisy)) > len(json.dumps(big_flat))
    bare = server.count_input_tokens(_user(TEXT))
    big_cost = server.count_input_tokens(_user(big_flat, TEXT)) - bare
    small_cost = server.count_input_tokens(_user(small_noisy, TEXT)) - bare
    assert (big_cost, small_cost) == (1600, 15)
    # The old behaviour (JSON of the block) is one option away, and is wildly different.
    server.media_costs = False
    assert server.count_input_tokens(_user(small_noisy)) > 10_000


def test_images_inside_tool_results_are_charged_too() -> None:
    server = FakeAnthropicServer()
    data = png(1280, 800)
    use = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.png"}}

    def body(content: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "model": MODEL,
            "messages": [
                {"role": "user", "content": "show me a.png"},
                {"role": "assistant", "content": [use]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": content}
                    ],
                },
            ],
        }

    with_image = body([{"type": "text", "text": "a.png"}, _image(data)])
    without = body([{"type": "text", "text": "a.png"}])
    assert check_request(dict(with_image, max_tokens=5)) == []
    assert server.count_input_tokens(with_image) - server.count_input_tokens(without) == 1366


@pytest.mark.parametrize("pages", [1, 3, 7])
def test_a_pdf_costs_its_pages(pages: int) -> None:
    server = FakeAnthropicServer(pdf_page_tokens=1800)
    data = pdf("Spec", [[f"Page {n}", "text " * 50] for n in range(pages)])
    bare = server.count_input_tokens(_user(TEXT))
    with_pdf = server.count_input_tokens(_user(_document(data, "Spec"), TEXT))
    assert with_pdf - bare == pages * 1800 + 1  # the title "Spec" is one token
    server.pdf_page_tokens = 2500
    assert server.count_input_tokens(_user(_document(data, "Spec"), TEXT)) - bare == (
        pages * 2500 + 1
    )


def test_a_pdf_costs_the_same_whatever_its_size() -> None:
    server = FakeAnthropicServer()
    small = pdf("Guide", [["short"], ["short"]])
    large = pdf("Guide", [["a long line of text " * 20] * 40, ["more " * 300] * 30])
    assert len(large) > 10 * len(small)
    assert server.count_input_tokens(_user(_document(small, "Guide"))) == (
        server.count_input_tokens(_user(_document(large, "Guide")))
    )


def test_text_documents_are_counted_as_text() -> None:
    server = FakeAnthropicServer()
    text = "Retention: invoices ten years. " * 40
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": text},
        "title": "Policy",
    }
    tokens = server.count_input_tokens(_user(document)) - server.count_input_tokens(
        {"model": MODEL, "messages": [{"role": "user", "content": [TEXT]}]}
    )
    plain = server.count_input_tokens(_user({"type": "text", "text": text}))
    assert abs(tokens - (plain - server.count_input_tokens(_user(TEXT)))) <= 3


def test_media_are_not_scaled_by_the_token_factor_but_text_and_overhead_are() -> None:
    plain = FakeAnthropicServer()
    heavy = FakeAnthropicServer(token_factor=2.0, message_overhead=50)
    image_only = _user(_image(png(1280, 800)))
    assert heavy.count_input_tokens(image_only) == 1366 + 100  # overhead 50 × 2
    assert plain.count_input_tokens(image_only) == 1366 + 3
    text = "word " * 100
    text_only = _user({"type": "text", "text": text})
    assert heavy.count_input_tokens(text_only) == math.ceil((text_tokens(text) + 50) * 2.0)


def test_message_overhead_is_charged_per_message() -> None:
    transcript = coding_session(0, 60)
    low = FakeAnthropicServer(message_overhead=3)
    high = FakeAnthropicServer(message_overhead=203)
    body = transcript.body()
    assert high.count_input_tokens(body) - low.count_input_tokens(body) == 200 * len(
        transcript.messages
    )


def test_header_sniffing_of_other_formats() -> None:
    gif = b"GIF89a" + struct.pack("<HH", 640, 480) + b"\x00" * 10
    jpeg = (
        b"\xff\xd8"
        + b"\xff\xe0"
        + struct.pack(">H", 16)
        + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
        + b"\xff\xc0"
        + struct.pack(">HBHHB", 17, 8, 600, 800, 3)
        + b"\x00" * 9
        + b"\xff\xd9"
    )
    webp = b"RIFF\x00\x00\x00\x00WEBPVP8X" + b"\x00" * 8 + (1023).to_bytes(3, "little")
    webp += (767).to_bytes(3, "little")
    assert sniff_image(gif) is not None and sniff_image(gif) == sniff_image(gif)
    found = [sniff_image(data) for data in (gif, jpeg, webp, png(33, 21))]
    assert [(i.media_type, i.width, i.height) for i in found if i] == [
        ("image/gif", 640, 480),
        ("image/jpeg", 800, 600),
        ("image/webp", 1024, 768),
        ("image/png", 33, 21),
    ]
    assert sniff_image(b"not an image") is None


# ---------------------------------------------------------------------------------------------
# count_tokens is the same count as /v1/messages, through the real SDK


@pytest.mark.parametrize("name", ["coding", "media", "research"])
@pytest.mark.parametrize(
    "options",
    [
        {"prompt_caching": False},
        {"message_overhead": 40, "token_factor": 1.3},
        {"prompt_caching": True, "cache_min_tokens": 1},  # a system shorter than the minimum
    ],
    ids=["plain", "overhead-and-factor", "caching"],
)
def test_count_tokens_equals_what_messages_reports(name: str, options: dict[str, Any]) -> None:
    transcript = CORPUS[name](2, 40)
    system: Any = [
        {"type": "text", "text": transcript.system, "cache_control": {"type": "ephemeral"}}
    ]
    messages: Any = transcript.messages
    tools: Any = transcript.tools
    with FakeAnthropicServer(**options) as server:
        client = server.client()
        counted = client.messages.count_tokens(
            model=MODEL, system=system, tools=tools, messages=messages
        )
        server.enqueue(text_reply("ok"), text_reply("ok again"))
        for _ in range(2):  # the second time, a cached prefix is read
            reply = client.messages.create(
                model=MODEL, max_tokens=100, system=system, tools=tools, messages=messages
            )
            usage = reply.usage
            reported = (
                usage.input_tokens
                + (usage.cache_read_input_tokens or 0)
                + (usage.cache_creation_input_tokens or 0)
            )
            assert counted.input_tokens == reported
        assert counted.input_tokens == server.count_input_tokens(server.count_requests[0])
        if options.get("prompt_caching"):
            assert usage.cache_read_input_tokens
        assert server.violations == []


def test_count_tokens_refuses_what_the_api_refuses(server: FakeAnthropicServer) -> None:
    client = server.client()
    messages: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.count_tokens(model=MODEL, messages=messages, extra_body={"max_tokens": 9})
    assert "max_tokens: Extra inputs are not permitted" in str(caught.value)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.count_tokens(model=MODEL, messages=[{"role": "assistant", "content": "x"}])
    assert len(server.count_requests) == 2


def test_count_tokens_can_be_unavailable(server: FakeAnthropicServer) -> None:
    server.count_tokens_error = invalid_request("count_tokens is not supported on this deployment")
    with pytest.raises(anthropic.BadRequestError, match="not supported"):
        server.client().messages.count_tokens(
            model=MODEL, messages=[{"role": "user", "content": "x"}]
        )


def test_count_tokens_over_raw_http(server: FakeAnthropicServer) -> None:
    transcript = media_session(1, 30)
    body = json.dumps(transcript.body(max_tokens=None)).encode()
    request = urllib.request.Request(
        f"{server.base_url}/v1/messages/count_tokens",
        data=body,
        headers={
            "x-api-key": TEST_API_KEY,
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer == {"input_tokens": server.count_input_tokens(transcript.body())}


# ---------------------------------------------------------------------------------------------
# The rules know server tools, citations and media


def _assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "search please"},
            {"role": "assistant", "content": list(blocks)},
            {"role": "user", "content": "thanks"},
        ],
    }


SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": 1}}
RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "u", "title": "t", "encrypted_content": "e"}],
}
CITED = {
    "type": "text",
    "text": "cited",
    "citations": [
        {
            "type": "web_search_result_location",
            "url": "u",
            "title": "t",
            "cited_text": "c",
            "encrypted_index": "i",
        }
    ],
}


def test_research_transcripts_pass_the_rules() -> None:
    assert check_request(research_session(0, 60).body()) == []
    assert check_request(_assistant(SEARCH, RESULT, CITED)) == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_assistant(RESULT, SEARCH), "does not follow its server_tool_use"),
        (_assistant(SEARCH, CITED), "without a corresponding result"),
        (_assistant(SEARCH, RESULT, SEARCH, RESULT), "server_tool_use ids must be unique"),
        (
            _assistant(SEARCH, dict(RESULT, content=[{"type": "web_search_result", "url": "u"}])),
            "title: Field required",
        ),
        (
            _assistant(
                {
                    "type": "text",
                    "text": "x",
                    "citations": [
                        {
                            "type": "web_search_result_location",
                            "url": "u",
                            "title": "t",
                            "cited_text": "c",
                        }
                    ],
                }
            ),
            "encrypted_index: Field required",
        ),
        (
            {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": [SEARCH]}]},
            "only allowed in assistant messages",
        ),
        (_user(_image(png(8, 8), "image/jpeg")) | {"max_tokens": 5}, "does not match"),
        (_user(_image(b"\x00" * 30)) | {"max_tokens": 5}, "Could not process image"),
        (
            _user(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "%%"},
                }
            )
            | {"max_tokens": 5},
            "invalid base64",
        ),
        (_user(_document(b"not a pdf", "x")) | {"max_tokens": 5}, "PDF specified was not valid"),
    ],
)
def test_rule_violations_with_real_content(body: dict[str, Any], expected: str) -> None:
    problems = check_request(body)
    assert any(expected in problem for problem in problems), problems
