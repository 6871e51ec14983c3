"""The transcript corpus itself: valid under the API's rules, deterministic, scalable, realistic,
and its planted facts really are where it says they are."""

from __future__ import annotations

import ast
import json
import re
import struct
import zlib
from typing import Any

import pytest
from fake_api import FakeAnthropicServer, check_request, pdf_pages, sniff_image
from fake_api.counting import MediaPrices, block_tokens
from fake_api.media import decode_base64
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transcripts import (
    CORPUS,
    Transcript,
    coding_session,
    corpus,
    duplicate_tool_use_id,
    media_session,
    pasted_log_session,
    research_session,
    steering_session,
)

from agentloop import as_messages, validate_messages

NAMES = sorted(CORPUS)


def _blocks(transcript: Transcript) -> list[tuple[int, dict[str, Any]]]:
    return [
        (index, block)
        for index, message in enumerate(transcript.messages)
        for block in message["content"]
    ]


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(item.get("text", "") for item in content or [] if item.get("type") == "text")


# ---------------------------------------------------------------------------------------------
# Valid, deterministic, scalable


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(NAMES),
    seed=st.integers(0, 10**6),
    size=st.integers(20, 160),
)
def test_every_transcript_is_a_valid_request(name: str, seed: int, size: int) -> None:
    transcript = CORPUS[name](seed, size)
    assert check_request(transcript.body()) == []
    assert check_request(transcript.body(max_tokens=None), count_tokens=True) == []
    validate_messages(as_messages(transcript.messages), allow_pending_tool_use=False)
    messages = transcript.messages
    assert messages[0]["role"] == "user" and messages[-1]["role"] == "user"
    ids = [block["id"] for _, block in _blocks(transcript) if "id" in block]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name", NAMES)
def test_builders_are_deterministic_per_seed(name: str) -> None:
    build = CORPUS[name]
    assert build(7, 60).messages == build(7, 60).messages
    assert build(7, 60).facts == build(7, 60).facts
    assert build(7, 60).messages != build(8, 60).messages


@pytest.mark.parametrize("size", [20, 120, 600])
def test_size_scales_the_transcripts(size: int) -> None:
    for transcript in corpus(seed=size, size=size):
        count = len(transcript.messages)
        # A small session overshoots by what it takes to place all its events.
        assert size <= count <= max(size + 4, 70), (transcript.name, count)
    big = coding_session(1, 600)
    server = FakeAnthropicServer()
    assert server.count_input_tokens(big.body()) > 150_000


def test_a_builder_copy_is_private() -> None:
    transcript = coding_session(2, 40)
    copied = transcript.copy_messages()
    copied[0]["content"][0]["text"] = "changed"
    assert transcript.messages[0]["content"][0].get("text") != "changed"


# ---------------------------------------------------------------------------------------------
# Realistic content and proportions


def test_tool_inputs_and_outputs_in_real_proportions() -> None:
    """Tool inputs (write/edit bodies) are 20-37 % of a long session's tokens, as in real
    sessions; tool results are the largest part."""
    for build in (coding_session, steering_session, research_session):
        transcript = build(5, 600)
        totals: dict[str, int] = {}
        for _, block in _blocks(transcript):
            tally = block_tokens(block, MediaPrices())
            totals[block["type"]] = totals.get(block["type"], 0) + tally.text + tally.media
        whole = sum(totals.values())
        assert 0.20 <= totals["tool_use"] / whole <= 0.37, (transcript.name, totals)
        assert totals["tool_result"] == max(totals.values())


def test_whole_file_writes_are_python_of_2_to_20_kb() -> None:
    transcript = coding_session(3, 400)
    writes = [
        block["input"]
        for _, block in _blocks(transcript)
        if block.get("type") == "tool_use" and block["name"] == "write_file"
    ]
    assert len(writes) >= 5
    for tool_input in writes:
        assert 1_900 <= len(tool_input["content"]) <= 21_000
        ast.parse(tool_input["content"])
    edits = [
        block["input"]
        for _, block in _blocks(transcript)
        if block.get("type") == "tool_use" and block["name"] == "edit_file"
    ]
    assert edits and all(e["old_string"] and e["new_string"] != e["old_string"] for e in edits)


def test_outputs_look_like_the_real_tools() -> None:
    transcript = coding_session(4, 300)
    outputs = "\n".join(
        _result_text(block) for _, block in _blocks(transcript) if block["type"] == "tool_result"
    )
    for marker in (
        "passed in",  # pytest
        "diff --git a/",  # git diff
        "Traceback (most recent call last):",
        "\tmodified:   ",  # git status
        "     1\t",  # a numbered read_file
        "has been updated. Here's the result of running `cat -n`",
    ):
        assert marker in outputs, marker


# ---------------------------------------------------------------------------------------------
# The planted facts


@pytest.mark.parametrize("seed", [0, 11])
def test_buried_errors_are_in_the_middle_and_unique(seed: int) -> None:
    for transcript in corpus(seed, 150):
        blob = json.dumps(transcript.messages, ensure_ascii=False)
        for error in transcript.facts.errors:
            message = transcript.messages[error.message_index]
            [result] = [
                b
                for b in message["content"]
                if b.get("type") == "tool_result" and b["tool_use_id"] == error.tool_use_id
            ]
            text = _result_text(result)
            assert len(text) == error.output_chars
            assert text[error.offset :].startswith(error.line)
            # Past what a head-and-tail shortening keeps (2,000 characters: 1,400 + 600).
            assert error.offset > 1_400 and error.output_chars - error.offset > 600
            for needle in error.needles:
                assert needle in error.line or needle in text
                encoded = json.dumps(needle, ensure_ascii=False)[1:-1]
                assert blob.count(encoded) == 1, (transcript.name, needle)
            if error.kind == "module_not_found":
                assert abs(error.offset - 4_200) < 150 and abs(error.output_chars - 5_300) < 150
                assert "ModuleNotFoundError: No module named '" in error.line
            else:
                assert re.fullmatch(r'\s*File "src/app/db\.py", line \d+, in \w+', error.line)


@pytest.mark.parametrize("name", NAMES)
def test_requests_and_steering_are_where_the_facts_say(name: str) -> None:
    transcript = CORPUS[name](3, 150)
    facts = transcript.facts
    for request in facts.requests:
        message = transcript.messages[request.message_index]
        assert message["role"] == "user"
        last = message["content"][-1]
        assert last == {"type": "text", "text": request.text}
        has_results = any(b["type"] == "tool_result" for b in message["content"])
        assert has_results == (request.kind == "steering")
    # No text a person typed comes after the latest request.
    latest = facts.latest_request
    for message in transcript.messages[latest.message_index + 1 :]:
        if message["role"] == "user":
            assert all(b["type"] == "tool_result" for b in message["content"])
    texts = [r.text for r in facts.requests]
    assert len(texts) == len(set(texts))


def test_the_newest_request_of_a_steering_session_is_old_steering() -> None:
    for seed in range(4):
        transcript = steering_session(seed, 200)
        latest = transcript.facts.latest_request
        assert latest.kind == "steering"
        assert latest.message_index < 0.7 * len(transcript.messages)
        assert len(transcript.facts.steering) == 3


def test_pasted_log_is_the_newest_request_and_about_27k_tokens() -> None:
    transcript = pasted_log_session(0, 120)
    latest = transcript.facts.latest_request
    assert latest.kind == "typed" and len(latest.text) > 100_000
    assert latest.message_index < 0.6 * len(transcript.messages)
    server = FakeAnthropicServer()
    tokens = server.count_message_tokens([transcript.messages[latest.message_index]])
    assert 20_000 < tokens < 45_000
    assert latest.text.startswith("CI log from last night's failing run")
    assert latest.text.endswith("bumped httpx to 0.28 in pyproject.toml.")


def _png_pixels(data: bytes) -> tuple[int, int, int]:
    """Decode a PNG's IDAT (no filtering is used) and return width, height and row bytes."""
    width, height = struct.unpack(">II", data[16:24])
    index, idat = 8, b""
    while index < len(data):
        (length,) = struct.unpack(">I", data[index : index + 4])
        kind = data[index + 4 : index + 8]
        body = data[index + 8 : index + 8 + length]
        (crc,) = struct.unpack(">I", data[index + 8 + length : index + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IDAT":
            idat += body
        index += 12 + length
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + width * 3)
    return width, height, len(raw) // height


def test_images_are_real_pngs_of_the_stated_size() -> None:
    transcript = media_session(0, 150)
    facts = transcript.facts
    assert {(i.width, i.height) for i in facts.images} == {(1280, 800), (2400, 1350), (120, 90)}
    assert any(i.in_tool_result for i in facts.images)
    assert any(not i.in_tool_result for i in facts.images)
    found = []
    for index, block in _blocks(transcript):
        items = block["content"] if block["type"] == "tool_result" else [block]
        for item in items if isinstance(items, list) else []:
            if item.get("type") == "image":
                data = decode_base64(item["source"]["data"])
                assert data is not None
                info = sniff_image(data)
                assert info is not None and info.media_type == item["source"]["media_type"]
                width, height, _ = _png_pixels(data)
                assert (width, height) == (info.width, info.height)
                found.append((index, width, height, len(item["source"]["data"])))
    assert found == [(i.message_index, i.width, i.height, i.base64_chars) for i in facts.images]
    # A big flat image has a small base64 and a small noisy one a big base64.
    sizes = {(i.width, i.height): i.base64_chars for i in facts.images}
    assert sizes[(2400, 1350)] < sizes[(120, 90)]


def test_the_document_is_a_real_multi_page_pdf() -> None:
    transcript = media_session(0, 150)
    [document] = transcript.facts.documents
    block = transcript.messages[document.message_index]["content"][0]
    assert block["type"] == "document" and block["title"] == document.title
    data = decode_base64(block["source"]["data"])
    assert data is not None and data.startswith(b"%PDF-1.4")
    assert pdf_pages(data) == document.pages >= 3
    # The cross-reference table points at every object.
    xref = int(data.rsplit(b"startxref\n", 1)[1].split(b"\n", 1)[0])
    entries = data[xref:].split(b"\n")[3:]
    for number, entry in enumerate(entries[: int(data[xref:].split(b"\n")[1].split()[1]) - 1]):
        offset = int(entry.split()[0])
        assert data[offset:].startswith(f"{number + 1} 0 obj".encode())
    assert document.title.encode("latin-1", "replace") in data


def test_searches_carry_queries_results_and_citations() -> None:
    transcript = research_session(0, 150)
    facts = transcript.facts
    assert len(facts.searches) == 3 and len(set(facts.search_queries)) == 3
    for search in facts.searches:
        blocks = transcript.messages[search.message_index]["content"]
        [use] = [b for b in blocks if b["type"] == "server_tool_use"]
        [result] = [b for b in blocks if b["type"] == "web_search_tool_result"]
        assert use["input"] == {"query": search.query} and use["id"] == search.server_tool_use_id
        assert result["tool_use_id"] == use["id"]
        assert tuple(r["url"] for r in result["content"]) == search.urls
        assert tuple(r["title"] for r in result["content"]) == search.titles
        assert all(r["encrypted_content"] and r["page_age"] for r in result["content"])
        citations = [c for b in blocks if b["type"] == "text" for c in b.get("citations", [])]
        assert tuple(c["url"] for c in citations) == search.cited_urls
        assert all(c["cited_text"] and c["encrypted_index"] for c in citations)
    assert facts.thinking_blocks > 5 and facts.redacted_thinking_blocks > 0
    kinds = [b["type"] for _, b in _blocks(transcript)]
    assert kinds.count("thinking") == facts.thinking_blocks
    assert kinds.count("redacted_thinking") == facts.redacted_thinking_blocks


def test_interruptions_look_like_a_real_agents() -> None:
    transcript = CORPUS["interrupted"](0, 150)
    facts = transcript.facts
    assert len(facts.interrupted_tool_use_ids) == 2 and len(facts.placeholder_indexes) == 2
    results = {
        b["tool_use_id"]: b for _, b in _blocks(transcript) if b.get("type") == "tool_result"
    }
    for tool_id in facts.interrupted_tool_use_ids:
        assert results[tool_id]["is_error"] is True
        assert "interrupted" in _result_text(results[tool_id])
    requests = {r.message_index for r in facts.requests}
    for index in facts.placeholder_indexes:
        assert transcript.messages[index]["role"] == "assistant"
        assert index - 1 in requests and index + 1 in requests


def test_paths_are_every_path_a_file_tool_touched() -> None:
    transcript = coding_session(6, 200)
    touched = {
        block["input"]["path"]
        for _, block in _blocks(transcript)
        if block.get("type") == "tool_use"
        and block["name"] in ("read_file", "edit_file", "write_file")
    }
    assert set(transcript.facts.paths) == touched
    assert set(transcript.facts.written_paths) <= touched


def test_duplicate_tool_use_id_breaks_exactly_one_rule() -> None:
    transcript = coding_session(0, 120)
    messages, index = duplicate_tool_use_id(transcript)
    assert index >= len(messages) // 2
    problems = check_request(transcript.body(messages=messages))
    assert len(problems) == 1
    assert problems[0].startswith(f"messages.{index}.") and "unique" in problems[0]
