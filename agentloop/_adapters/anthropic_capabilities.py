"""What a model can do, read once per model from the Models API (``GET /v1/models/{id}`` with
the compaction beta, so that ``capabilities.compaction`` is filled) and cached; a built-in table
by model id answers when the lookup fails (offline, a proxy without the Models API, Bedrock).

``anthropic`` is imported inside functions only (see ``anthropic.py``)."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from agentloop._adapters.anthropic_errors import one_line, translated
from agentloop._adapters.windows import base_model_id, builtin_limits
from agentloop._core.compaction.api_compaction import accepts_system_messages
from agentloop._core.values.model import ON_DEMAND_COMPACTION_BETA
from agentloop._core.values.validation import EFFORT_LEVELS
from agentloop._errors import ModelError

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "EFFORT_LEVELS",
    "CapabilityCache",
    "ModelCapabilities",
    "builtin_capabilities",
    "capabilities_from_info",
    "fetch_capabilities",
    "fetch_model_limits",
    "is_bedrock",
]

_THINKING_TYPES = ("adaptive", "between_tools", "disabled", "enabled")
_MODELS_API_RETRIES = 1
_MODELS_API_TIMEOUT = 15.0

CapabilitySource = Literal["models_api", "builtin"]


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """What requests to one model may carry.

    ``thinking_types``: the ``thinking.type`` values it accepts; ``thinks_by_default``: the
    5.x models, which think unless told otherwise (the adapter then asks for ``adaptive`` with
    summarized display); ``effort_levels``: the ``output_config.effort`` values it accepts;
    ``compaction``: on-demand compaction with ``summarize`` (never True from the table: only
    the Models API says so); ``mid_conversation_system``: ``role: "system"`` messages are
    accepted (from a table: the Models API does not say it).
    """

    model: str
    thinking_types: frozenset[str]
    thinks_by_default: bool
    effort_levels: frozenset[str]
    compaction: bool
    max_tokens: int | None
    max_input_tokens: int | None
    mid_conversation_system: bool
    source: CapabilitySource


# The 5.x families think by default (adaptive); 4.x models only when asked.
_FIVE = re.compile(
    r"^claude-(?:sonnet|opus|haiku|fable|mythos)-5(?:-\d+)?$|^claude-mythos-preview$"
)
_ADAPTIVE_ONLY = frozenset({"adaptive"})
_ALL_EFFORT = frozenset(EFFORT_LEVELS)
_NO_XHIGH = frozenset({"low", "medium", "high", "max"})

# model id -> (thinking types, effort levels); see the notes' section 2 (THK).
_BUILTIN_THINKING: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    "claude-sonnet-5-5": (frozenset({"adaptive", "between_tools"}), _ALL_EFFORT),
    "claude-opus-5-5": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-fable-5-2": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-mythos-5-2": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-fable-5-1": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-mythos-5-1": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-fable-5": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-mythos-5": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-mythos-preview": (_ADAPTIVE_ONLY, _ALL_EFFORT),
    "claude-haiku-5-5": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-opus-5": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-sonnet-5": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-opus-4-8": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-opus-4-7": (frozenset({"adaptive", "disabled"}), _ALL_EFFORT),
    "claude-opus-4-6": (frozenset({"adaptive", "enabled", "disabled"}), _NO_XHIGH),
    "claude-sonnet-4-6": (frozenset({"adaptive", "enabled", "disabled"}), _NO_XHIGH),
    "claude-opus-4-5": (frozenset({"enabled", "disabled"}), _NO_XHIGH),
    "claude-sonnet-4-5": (frozenset({"enabled", "disabled"}), frozenset()),
    "claude-haiku-4-5": (frozenset({"enabled", "disabled"}), frozenset()),
}

"""Models that accept ``role: "system"`` messages mid-conversation (not Sonnet 5; Fable and
Mythos 5.2 are not listed by the docs yet)."""


def _thinks_by_default(model: str, types: frozenset[str]) -> bool:
    return "adaptive" in types and (
        "disabled" not in types or _FIVE.match(base_model_id(model)) is not None
    )


def builtin_capabilities(model: str) -> ModelCapabilities:
    """The capabilities the table gives ``model`` (by its base id): what is used when the
    Models API cannot be asked. A model nobody knows thinks only if its id is a 5.x one."""
    base = base_model_id(model)
    five = _FIVE.match(base) is not None
    types, efforts = _BUILTIN_THINKING.get(
        base, (_ADAPTIVE_ONLY, _ALL_EFFORT) if five else (frozenset(), frozenset())
    )
    limits = builtin_limits(model)
    return ModelCapabilities(
        model=model,
        thinking_types=types,
        thinks_by_default=_thinks_by_default(model, types),
        effort_levels=efforts,
        compaction=False,
        max_tokens=limits.max_output_tokens if limits else None,
        max_input_tokens=limits.context_window if limits else None,
        mid_conversation_system=accepts_system_messages(base),
        source="builtin",
    )


def _supported(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("supported") is True


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def capabilities_from_info(model: str, info: Mapping[str, Any]) -> ModelCapabilities:
    """The Models API's answer (``BetaModelInfo`` as JSON) read into :class:`ModelCapabilities`.
    What it does not say (an older server without ``capabilities``) comes from the table,
    except on-demand compaction, which is never assumed."""
    table = builtin_capabilities(model)
    caps = info.get("capabilities")
    max_tokens = _positive(info.get("max_tokens")) or table.max_tokens
    max_input = _positive(info.get("max_input_tokens")) or table.max_input_tokens
    if not isinstance(caps, Mapping):
        return ModelCapabilities(
            model,
            table.thinking_types,
            table.thinks_by_default,
            table.effort_levels,
            False,
            max_tokens,
            max_input,
            table.mid_conversation_system,
            "models_api",
        )
    thinking = caps.get("thinking")
    types_info = thinking.get("types") if isinstance(thinking, Mapping) else None
    if _supported(thinking) and isinstance(types_info, Mapping):
        types = frozenset(kind for kind in _THINKING_TYPES if _supported(types_info.get(kind)))
    elif isinstance(thinking, Mapping):
        types = frozenset({"disabled"})  # a model that does not think
    else:
        types = table.thinking_types
    effort = caps.get("effort")
    if isinstance(effort, Mapping):
        efforts = frozenset(
            level for level in EFFORT_LEVELS if _supported(effort) and _supported(effort.get(level))
        )
    else:
        efforts = table.effort_levels
    compaction = caps.get("compaction")
    on_demand = (
        _supported(compaction)
        and isinstance(compaction, Mapping)
        and _supported(compaction.get("summarize"))
    )
    return ModelCapabilities(
        model=model,
        thinking_types=types,
        thinks_by_default=_thinks_by_default(model, types),
        effort_levels=efforts,
        compaction=on_demand,
        max_tokens=max_tokens,
        max_input_tokens=max_input,
        mid_conversation_system=table.mid_conversation_system,
        source="models_api",
    )


def is_bedrock(client: Any) -> bool:
    """Whether ``client`` talks to Amazon Bedrock (its client class, or a Bedrock-style base
    URL): Bedrock has no on-demand compaction and no Models API."""
    if "bedrock" in type(client).__name__.lower():
        return True
    host = urlsplit(str(getattr(client, "base_url", ""))).hostname or ""
    return "bedrock" in host.lower()


def _lookup_client(client: anthropic.Anthropic) -> anthropic.Anthropic:
    # A fallback exists: one retry and a short timeout, whatever the client's own settings.
    return client.with_options(max_retries=_MODELS_API_RETRIES, timeout=_MODELS_API_TIMEOUT)


@contextlib.contextmanager
def _asking_about(
    model: str, client: anthropic.Anthropic | anthropic.AsyncAnthropic
) -> Iterator[None]:
    """Around a Models API lookup of ``model``: Bedrock refused up front, any failure made the
    one-line :class:`ModelError` the fallback catches."""
    import anthropic

    if is_bedrock(client):
        raise ModelError(f"the Models API is not available on Bedrock ({model})")
    try:
        yield
    except anthropic.NotFoundError as error:
        raise ModelError(
            f"the Models API does not know the model {model!r}", status_code=404
        ) from error
    except (anthropic.AnthropicError, TypeError) as error:
        raise _lookup_error(model, error, client) from error


def fetch_capabilities(model: str, client: anthropic.Anthropic) -> ModelCapabilities:
    """Ask the Models API about ``model``; raises a one-line :class:`ModelError` when it
    cannot answer (unknown model, no key, unreachable, Bedrock)."""
    with _asking_about(model, client):
        info = _lookup_client(client).beta.models.retrieve(model, betas=[ON_DEMAND_COMPACTION_BETA])
    return capabilities_from_info(model, info.model_dump(mode="json"))


async def afetch_capabilities(model: str, client: anthropic.AsyncAnthropic) -> ModelCapabilities:
    """The async form of :func:`fetch_capabilities`."""
    lookup = client.with_options(max_retries=_MODELS_API_RETRIES, timeout=_MODELS_API_TIMEOUT)
    with _asking_about(model, client):
        info = await lookup.beta.models.retrieve(model, betas=[ON_DEMAND_COMPACTION_BETA])
    return capabilities_from_info(model, info.model_dump(mode="json"))


def _lookup_error(
    model: str, error: BaseException, client: anthropic.Anthropic | anthropic.AsyncAnthropic
) -> ModelError:
    mapped = translated(error, client)
    detail = str(mapped) if mapped is not None else one_line(f"{type(error).__name__}: {error}")
    status = mapped.status_code if mapped is not None else None
    return ModelError(f"could not ask the Models API about {model}: {detail}", status_code=status)


@dataclass(frozen=True, slots=True)
class _Known:
    capabilities: ModelCapabilities
    failure: str | None
    """Why the Models API could not answer (the capabilities are then the table's)."""
    status: int | None = None
    """The HTTP status of that failure (404: the API does not know the model)."""


class CapabilityCache:
    """One lookup per model over the cache's life; a failed lookup is remembered too (its
    table answer and why), so a model the API cannot describe costs one failed call, not one
    per request."""

    def __init__(self) -> None:
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()

    def get(self, model: str) -> _Known | None:
        with self._lock:
            return self._known.get(model)

    def put(self, model: str, fetched: ModelCapabilities | ModelError) -> _Known:
        if isinstance(fetched, ModelError):
            known = _Known(builtin_capabilities(model), str(fetched), fetched.status_code)
        else:
            known = _Known(fetched, None)
        with self._lock:
            return self._known.setdefault(model, known)


def fetch_model_limits(
    model: str,
    *,
    client: anthropic.Anthropic | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
) -> tuple[int | None, int | None]:
    """``(max_input_tokens, max_tokens)`` of ``model`` from the Models API.

    Raises :class:`ModelError` when the API cannot answer (unknown model, no key, unreachable);
    the caller falls back to its built-in table. The lookup retries once with a short timeout,
    since a fallback exists.
    """
    import anthropic

    if client is None:
        settings: dict[str, Any] = {}
        if api_key is not None:
            settings["api_key"] = api_key
        if base_url is not None:
            settings["base_url"] = base_url
        try:
            client = anthropic.Anthropic(**settings)
        except anthropic.AnthropicError as error:  # e.g. an unreadable credentials file
            raise ModelError(
                f"could not ask the Models API about {model}: {one_line(str(error))}"
            ) from error
    caps = fetch_capabilities(model, client)
    return caps.max_input_tokens, caps.max_tokens
