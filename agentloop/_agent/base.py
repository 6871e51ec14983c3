"""What every coding tool shares: the base class that turns failures into error results (and
makes every result safe to store and send: no lone surrogates, no secret values), the input
checks, and reading text files line by line without trusting their size."""

from __future__ import annotations

import abc
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from agentloop._agent.secrets import redact
from agentloop._agent.workspace import WorkspaceError, display_path
from agentloop._core.values.tool import ToolResult
from agentloop._core.values.tool_facts import ToolCall, ToolFact
from agentloop._errors import AgentloopError

__all__ = [
    "BINARY_SNIFF_BYTES",
    "CodingTool",
    "InputError",
    "ToolStateError",
    "decode_line",
    "is_binary",
    "is_binary_data",
    "iter_lines",
    "optional_bool",
    "optional_int",
    "optional_str",
    "required_str",
    "safe_result",
]

BINARY_SNIFF_BYTES = 8192


class ToolStateError(AgentloopError, ValueError):
    """A todo list, or saved tool state, that does not have the expected shape."""


class InputError(Exception):
    """Bad tool input; its message goes back to the model as an error result."""


class CodingTool(abc.ABC):
    """Turns every failure inside ``_run`` into an error result."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def __init__(self, name: str, description: str, input_schema: dict[str, Any]) -> None:
        self.name = name
        self.description = description
        self.input_schema = json.loads(json.dumps(input_schema))  # a private deep copy

    def run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        return safe_result(self._guarded(tool_input))

    def _guarded(self, tool_input: Mapping[str, Any]) -> ToolResult:
        try:
            if not isinstance(tool_input, Mapping):
                raise InputError("tool input must be a JSON object")
            return self._run(tool_input)
        except (InputError, WorkspaceError, ToolStateError) as error:
            return ToolResult(str(error), is_error=True)
        except OSError as error:
            return ToolResult(_describe_os_error(error), is_error=True)
        except Exception as error:  # a tool's failure is information for the model, not a crash
            return ToolResult(f"{self.name} failed: {type(error).__name__}: {error}", is_error=True)

    @abc.abstractmethod
    def _run(self, tool_input: Mapping[str, Any]) -> ToolResult:
        """The tool's work; raise ``InputError`` for bad input."""

    def facts(self, call: ToolCall) -> tuple[ToolFact, ...] | None:
        """What a call of this tool did, as facts a compaction carries (see
        :class:`~agentloop.ToolFacts`); a tool that changes or reads nothing says ``()``."""
        return ()


def safe_result(result: ToolResult) -> ToolResult:
    """``result`` fit to store and send: file-name bytes that are not UTF-8 shown as ``\\xNN``
    (a lone surrogate cannot be encoded, so it would crash the store), and the values of secret
    environment variables redacted."""
    content = redact(display_path(result.content))
    return result if content == result.content else ToolResult(content, result.is_error)


def _describe_os_error(error: OSError) -> str:
    reason = error.strerror or str(error) or type(error).__name__
    return f"{reason}: {error.filename}" if error.filename else reason


def required_str(tool_input: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    """The string at ``key``; :class:`InputError` when missing, not a string, or blank."""
    if key not in tool_input:
        raise InputError(f"missing required parameter {key!r}")
    value = tool_input[key]
    if not isinstance(value, str):
        raise InputError(f"parameter {key!r} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise InputError(f"parameter {key!r} must not be empty")
    return value


def optional_str(tool_input: Mapping[str, Any], key: str, default: str) -> str:
    """The string at ``key``, or ``default`` when it is absent or blank."""
    value = tool_input.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InputError(f"parameter {key!r} must be a string, got {type(value).__name__}")
    return value if value.strip() else default


def optional_bool(tool_input: Mapping[str, Any], key: str) -> bool:
    """The boolean at ``key``, ``False`` when absent."""
    value = tool_input.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InputError(f"parameter {key!r} must be true or false, got {value!r}")
    return value


def optional_int(tool_input: Mapping[str, Any], key: str, default: int, *, minimum: int) -> int:
    """The integer at ``key`` (``3.0`` counts, ``True`` does not), at least ``minimum``."""
    value = tool_input.get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"parameter {key!r} must be an integer, got {value!r}")
    if value < minimum:
        raise InputError(f"parameter {key!r} must be at least {minimum}, got {value}")
    return value


def is_binary_data(head: bytes) -> bool:
    """Whether a file's first bytes hold a NUL, the usual sign of a binary file."""
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def is_binary(path: Path) -> bool:
    """Whether the file's first bytes hold a NUL, the usual sign of a binary file."""
    with path.open("rb") as handle:
        return is_binary_data(handle.read(BINARY_SNIFF_BYTES))


def iter_lines(handle: IO[bytes], max_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """Lines of a binary file, each cut to ``max_bytes`` (flag says so) without ever holding
    a longer line in memory."""
    while True:
        chunk = handle.readline(max_bytes)
        if not chunk:
            return
        if chunk.endswith(b"\n") or len(chunk) < max_bytes:
            yield chunk, False
            continue
        rest = handle.readline(max_bytes)
        cut = rest not in (b"", b"\n", b"\r\n")
        while rest and not rest.endswith(b"\n"):
            rest = handle.readline(max_bytes)
        yield chunk, cut


def decode_line(raw: bytes) -> str:
    """One raw line as text without its line ending; invalid UTF-8 is replaced, not fatal."""
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")
