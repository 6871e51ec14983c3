"""The Messages API's prompt cache in the fake API, and what each answered request cost.

- A request's prefix is a sequence of positions: each tool definition, each system block (a
  string system is one block), then each content block of each visible message (a string content
  is one text block). Each position has a cumulative hash (canonical JSON of the block without
  its ``cache_control``, chained; a message's role goes into its first block's hash, and
  ``tool_choice`` / ``thinking`` into the first message's, since changing them invalidates the
  message cache) and a cumulative token count, counted as ``count_input_tokens`` counts.
- Breakpoints: blocks carrying ``cache_control`` (a ``tool_result``'s inner blocks count as
  the ``tool_result``), plus automatic caching: a top-level ``cache_control`` puts one on the last
  cacheable block. More than 4 in a request, one on a thinking block or an empty text block, or
  a 1h one after a 5m one are refused (:func:`cache_problems`).
- Read: the longest live entry found at a breakpoint's position or up to ``lookback`` (20)
  positions before one. Write: an entry at every breakpoint beyond the hit whose prefix counts
  at least the model's minimum; each written stretch is charged at the TTL of the breakpoint
  that ends it. Entries live 5 minutes (1 hour) from their last use, per model.
- :class:`Bill`: one answered request's tokens by price; :func:`billed_ratio` compares what a
  run paid with what it would have paid without a cache.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fake_api.compaction import visible_messages
from fake_api.counting import MediaPrices, block_tokens, json_tokens, text_tokens
from fake_api.model_facts import family

Ttl = Literal["5m", "1h"]
TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
MAX_BREAKPOINTS = 4
DEFAULT_CACHE_LOOKBACK = 20
DEFAULT_CACHE_MIN_TOKENS = 1024
"""The minimum cacheable prefix (Sonnet's; reports say 2,048 for Sonnet 4.6 and 4,096 for
Opus 4.5/4.6 and Haiku 4.5: pass a mapping to ``FakeAnthropicServer(cache_min_tokens=...)``)."""
MODEL_CACHE_MIN_TOKENS: Mapping[str, int] = {"sonnet-5-5": 512}
"""Per model family, where the docs give another minimum (Sonnet 5.5: 512 tokens)."""
WRITE_5M_PRICE = 1.25
WRITE_1H_PRICE = 2.0
READ_PRICE = 0.1

_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})
_TTL_ORDER = (
    "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block. "
    "Note that blocks are processed in the following order: `tools`, `system`, `messages`."
)


# ---------------------------------------------------------------------------------------------
# The prefix of a request


@dataclass(frozen=True)
class Position:
    """One block boundary of a request's prefix."""

    where: str
    """Where the block is in the request, as the API names it (``messages.2.content.0``)."""
    digest: str
    """Hash of the prefix up to and including this block."""
    tokens: int
    """Input tokens of the prefix up to and including this block."""
    cacheable: bool
    mark: Ttl | None
    """The TTL of the block's ``cache_control`` (None: no breakpoint on it)."""


@dataclass(frozen=True)
class Prefix:
    """A request's positions, in processing order, and its top-level ``cache_control``."""

    positions: tuple[Position, ...]
    automatic: Ttl | None = None

    @property
    def total(self) -> int:
        """All the request's input tokens (what ``count_tokens`` answers)."""
        return self.positions[-1].tokens if self.positions else 0

    @property
    def breakpoints(self) -> list[tuple[int, Ttl]]:
        """(position index, TTL) of each breakpoint, in order, automatic caching's included."""
        marks: list[tuple[int, Ttl]] = [
            (index, p.mark)
            for index, p in enumerate(self.positions)
            if p.mark is not None and p.cacheable
        ]
        if self.automatic is not None:
            last = _last_cacheable(self.positions)
            if last is not None and self.positions[last].mark is None:
                marks.append((last, self.automatic))
        return marks


@dataclass(frozen=True)
class _Slot:
    """One block of a request as the walk meets it (``block`` None: a message without any)."""

    where: str
    section: Literal["tool", "system", "message"]
    block: Any
    role: Any = None
    first: bool = False
    """The first visible block of its message (it carries the message's overhead and role)."""
    visible: bool = True


def request_prefix(
    body: Mapping[str, Any],
    *,
    token_factor: float = 1.0,
    message_overhead: int = 3,
    prices: MediaPrices | None = None,
) -> Prefix:
    """The positions of ``body`` (only what the server reads: messages before the last
    compaction block are not part of it)."""
    raw = media = 0
    digest = ""
    first_message = True
    positions: list[Position] = []
    for slot in _slots(body):
        if not slot.visible:
            continue
        block = slot.block
        item: list[Any]
        if slot.section == "tool":
            raw += json_tokens(_bare(block)) if isinstance(block, dict) else 0
            item = ["tool", _bare(block)]
        elif slot.section == "system":
            raw += text_tokens(str(block.get("text", ""))) if isinstance(block, dict) else 0
            item = ["system", _bare(block)]
        else:
            if block is not None:
                tally = block_tokens(block, prices)
                raw, media = raw + tally.text, media + tally.media
            if slot.first:
                raw += message_overhead
                item = ["message", slot.role, _bare(block)]
                if first_message:  # what invalidates the message cache as a whole
                    item.append({k: body.get(k) for k in ("thinking", "tool_choice")})
                    first_message = False
            else:
                item = ["block", _bare(block)]
        digest = hashlib.sha256((digest + _canonical(item)).encode()).hexdigest()
        tokens = math.ceil(raw * token_factor) + media
        positions.append(Position(slot.where, digest, tokens, _cacheable(block), _mark(block)))
    return Prefix(tuple(positions), _ttl(body.get("cache_control")))


def _slots(body: Mapping[str, Any]) -> Iterator[_Slot]:
    tools = body.get("tools")
    for index, tool in enumerate(tools if isinstance(tools, list) else []):
        yield _Slot(f"tools.{index}", "tool", tool)
    system = body.get("system")
    if isinstance(system, str):
        yield _Slot("system", "system", {"type": "text", "text": system})
    elif isinstance(system, list):
        for index, block in enumerate(system):
            yield _Slot(f"system.{index}", "system", block)
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    visible = visible_messages(messages)
    hidden = len(messages) - len(visible)
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        else:
            blocks = list(content) if isinstance(content, list) else []
        start = 0  # the first visible block of the message
        if index < hidden:
            start = len(blocks)
        elif index == hidden and isinstance(content, list):
            shown = visible[0].get("content") if isinstance(visible[0], dict) else None
            start = len(blocks) - len(shown) if isinstance(shown, list) else 0
        if not blocks:
            yield _Slot(f"messages.{index}", "message", None, role, True, index >= hidden)
        for position, block in enumerate(blocks):
            where = f"messages.{index}"
            if isinstance(content, list):
                where += f".content.{position}"
            yield _Slot(where, "message", block, role, position == start, position >= start)


def _bare(block: Any) -> Any:
    """``block`` without its ``cache_control`` (nor its inner blocks'): a marker is no content."""
    if not isinstance(block, dict):
        return block
    bare = {key: value for key, value in block.items() if key != "cache_control"}
    inner = bare.get("content")
    if isinstance(inner, list):
        bare["content"] = [_bare(item) if isinstance(item, dict) else item for item in inner]
    return bare


def _canonical(item: Any) -> str:
    return json.dumps(item, sort_keys=True, separators=(",", ":"), default=str)


def _cacheable(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") in _UNCACHEABLE:
        return False
    return block.get("type") != "text" or bool(str(block.get("text") or "").strip())


def _ttl(cache_control: Any) -> Ttl | None:
    if not isinstance(cache_control, dict) or cache_control.get("type") != "ephemeral":
        return None
    return "1h" if cache_control.get("ttl") == "1h" else "5m"


def _markers(where: str, block: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """The block and the inner blocks (a tool_result's) that carry ``cache_control``."""
    if not isinstance(block, dict):
        return
    if "cache_control" in block:
        yield where, block
    inner = block.get("content")
    for index, item in enumerate(inner if isinstance(inner, list) else []):
        if isinstance(item, dict) and "cache_control" in item:
            yield f"{where}.content.{index}", item


def _mark(block: Any) -> Ttl | None:
    ttls = [_ttl(marked.get("cache_control")) for _, marked in _markers("", block)]
    return next((ttl for ttl in ttls if ttl is not None), None)


def _last_cacheable(positions: tuple[Position, ...]) -> int | None:
    for index in range(len(positions) - 1, -1, -1):
        if positions[index].cacheable:
            return index
    return None


def cache_problems(body: Any) -> list[str]:
    """What the API refuses about ``cache_control`` in ``body`` (empty: nothing)."""
    if not isinstance(body, dict):
        return []
    problems: list[str] = []
    marks: list[tuple[str, Ttl | None]] = []
    last: _Slot | None = None  # the last cacheable visible block: automatic caching's
    for slot in _slots(body):
        if slot.visible and _cacheable(slot.block):
            last = slot
        for where, block in _markers(slot.where, slot.block):
            kind = block.get("type")
            if kind in _UNCACHEABLE:
                problems.append(f"{where}: cache_control cannot be set for {kind} blocks")
            elif kind == "text" and not str(block.get("text") or "").strip():
                problems.append(f"{where}: cache_control cannot be set for empty text blocks")
            problems.extend(_shape_problems(f"{where}.cache_control", block["cache_control"]))
            marks.append((where, _ttl(block["cache_control"])))
    top = body.get("cache_control")
    if top is not None:
        problems.extend(_shape_problems("cache_control", top))
        if last is not None and _mark(last.block) is None:
            marks.append((last.where, _ttl(top)))
    if len(marks) > MAX_BREAKPOINTS:
        problems.append(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marks)}."
        )
    seen_5m = False
    for where, ttl in marks:
        if ttl == "1h" and seen_5m:
            problems.append(f"{where}.cache_control.ttl: {_TTL_ORDER}")
        seen_5m = seen_5m or ttl == "5m"
    return problems


def _shape_problems(where: str, cache_control: Any) -> list[str]:
    if not isinstance(cache_control, dict) or cache_control.get("type") != "ephemeral":
        return [f"{where}.type: Input should be 'ephemeral'"]
    if cache_control.get("ttl", "5m") not in TTL_SECONDS:
        return [f"{where}.ttl: Input should be '5m' or '1h'"]
    return []


# ---------------------------------------------------------------------------------------------
# The cache


@dataclass(frozen=True)
class CacheUse:
    """What one request read from the cache and wrote to it, in tokens."""

    read: int = 0
    write_5m: int = 0
    write_1h: int = 0

    @property
    def write(self) -> int:
        return self.write_5m + self.write_1h

    def usage(self) -> dict[str, Any]:
        """The cache fields of the API's ``usage`` object."""
        return {
            "cache_creation_input_tokens": self.write,
            "cache_read_input_tokens": self.read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.write_5m,
                "ephemeral_1h_input_tokens": self.write_1h,
            },
        }


@dataclass
class _Entry:
    ttl: Ttl
    last_used: float


def min_cache_tokens(setting: int | Mapping[str, int] | None, model: str) -> int:
    """The minimum cacheable prefix of ``model``: ``setting`` itself, or its entry for the model
    (else its ``"*"`` entry, else :data:`DEFAULT_CACHE_MIN_TOKENS`); None: the docs' figure
    for the model's family (:data:`MODEL_CACHE_MIN_TOKENS`), else the default."""
    if setting is None:
        return MODEL_CACHE_MIN_TOKENS.get(family(model), DEFAULT_CACHE_MIN_TOKENS)
    if isinstance(setting, int):
        return setting
    return setting.get(model, setting.get("*", DEFAULT_CACHE_MIN_TOKENS))


class PromptCache:
    """Cache entries keyed by model and prefix hash, on an injectable clock. Thread-safe."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        lookback: int = DEFAULT_CACHE_LOOKBACK,
    ) -> None:
        self.lookback = lookback
        self._clock = clock
        self._offset = 0.0
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        """The clock plus what :meth:`advance` added."""
        return self._clock() + self._offset

    def advance(self, seconds: float) -> None:
        """Move time on (entries expire without a test sleeping)."""
        with self._lock:
            self._offset += seconds

    def live(self, model: str | None = None) -> int:
        """How many entries are alive (of ``model``, or of all models)."""
        with self._lock:
            now = self.now()
            keys = [
                key
                for key in self._entries
                if model is None or key[0].split("@")[0] == model  # any effort
            ]
            return sum(self._alive(key, now) for key in keys)

    def use(self, model: str, prefix: Prefix, min_tokens: int) -> CacheUse:
        """Read the longest live prefix at or before a breakpoint and write entries at the
        breakpoints beyond it (those at least ``min_tokens`` long)."""
        positions, marks = prefix.positions, prefix.breakpoints
        with self._lock:
            now = self.now()
            hit = -1
            for index, _ in marks:
                for candidate in range(index, max(hit, index - self.lookback - 1), -1):
                    if self._alive((model, positions[candidate].digest), now):
                        hit = candidate
                        break
            read = positions[hit].tokens if hit >= 0 else 0
            if hit >= 0:
                self._entries[model, positions[hit].digest].last_used = now
            written, write_5m, write_1h = read, 0, 0
            for index, ttl in marks:
                tokens = positions[index].tokens
                if index <= hit or tokens < min_tokens:
                    continue
                self._entries[model, positions[index].digest] = _Entry(ttl, now)
                if ttl == "1h":
                    write_1h += tokens - written
                else:
                    write_5m += tokens - written
                written = tokens
            return CacheUse(read, write_5m, write_1h)

    def _alive(self, key: tuple[str, str], now: float) -> bool:
        entry = self._entries.get(key)
        if entry is None:
            return False
        if now - entry.last_used < TTL_SECONDS[entry.ttl]:
            return True
        del self._entries[key]
        return False


# ---------------------------------------------------------------------------------------------
# Billing


@dataclass(frozen=True)
class Bill:
    """One answered ``POST /v1/messages``: its body and its tokens by price."""

    body: dict[str, Any] = field(compare=False)
    input_tokens: int
    cache_write_5m: int
    cache_write_1h: int
    cache_read: int
    output_tokens: int

    @property
    def uncached_input(self) -> int:
        """All input tokens: what the request would have cost without a cache."""
        return self.input_tokens + self.cache_write_5m + self.cache_write_1h + self.cache_read

    @property
    def billed_input(self) -> float:
        """What the input cost, in base input tokens."""
        return (
            self.input_tokens
            + WRITE_5M_PRICE * self.cache_write_5m
            + WRITE_1H_PRICE * self.cache_write_1h
            + READ_PRICE * self.cache_read
        )


def bill_from_usage(body: dict[str, Any], usage: Mapping[str, Any]) -> Bill:
    """The bill of a reply's ``usage`` (a compaction's iterations summed: each is billed)."""
    iterations = usage.get("iterations")
    parts = iterations if isinstance(iterations, list) and iterations else [usage]
    totals = [0, 0, 0, 0, 0]  # input, 5m write, 1h write, read, output
    for part in parts:
        written = int(part.get("cache_creation_input_tokens") or 0)
        split = part.get("cache_creation")
        hour = int(split.get("ephemeral_1h_input_tokens") or 0) if isinstance(split, dict) else 0
        values = (
            int(part.get("input_tokens") or 0),
            written - hour,
            hour,
            int(part.get("cache_read_input_tokens") or 0),
            int(part.get("output_tokens") or 0),
        )
        totals = [total + value for total, value in zip(totals, values, strict=True)]
    return Bill(body, *totals)


def billed_ratio(bills: Iterable[Bill]) -> float:
    """Billed input over uncached input, over ``bills`` (0 when they hold no input)."""
    billed = uncached = 0.0
    for bill in bills:
        billed += bill.billed_input
        uncached += bill.uncached_input
    return billed / uncached if uncached else 0.0
