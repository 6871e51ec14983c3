"""What a model can do, read once per model from the Models API (``GET /v1/models/{id}`` with
the compaction beta, so that ``capabilities.compaction`` is filled) into its
:class:`~agentloop._core.values.model_profile.ModelProfile` and cached; the shipped table
(``profile_table``) answers when the lookup fails (offline, a proxy without the Models API,
Bedrock).

``anthropic`` is imported inside functions only (see ``anthropic.py``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentloop._adapters.anthropic_errors import one_line, translated
from agentloop._core.values.model import ON_DEMAND_COMPACTION_BETA
from agentloop._core.values.model_profile import THINKING_TYPES, ModelLifecycle, ModelProfile
from agentloop._core.values.profile_table import builtin_profile, thinks_by_default
from agentloop._core.values.validation import EFFORT_LEVELS
from agentloop._errors import ModelError

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "EFFORT_LEVELS",
    "CapabilityCache",
    "ModelCapabilities",
    "ModelLifecycle",
    "builtin_capabilities",
    "capabilities_from_info",
    "fetch_capabilities",
    "fetch_model_limits",
    "is_bedrock",
]

_MODELS_API_RETRIES = 1
_MODELS_API_TIMEOUT = 15.0

ModelCapabilities = ModelProfile
"""The older name of :class:`~agentloop._core.values.model_profile.ModelProfile`."""
builtin_capabilities = builtin_profile
"""The older name of :func:`~agentloop._core.values.profile_table.builtin_profile`."""


def lifecycle_from_info(info: Mapping[str, Any]) -> ModelLifecycle | None:
    """The lifecycle in a Models API answer; None when it says none (an older server)."""
    stage = info.get("lifecycle")
    if not isinstance(stage, str) or not stage:
        return None

    def day(value: object) -> str | None:
        return value[:10] if isinstance(value, str) and len(value) >= 10 else None

    return ModelLifecycle(stage, day(info.get("deprecated_at")), day(info.get("retires_at")))


def _supported(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("supported") is True


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def capabilities_from_info(model: str, info: Mapping[str, Any]) -> ModelProfile:
    """The Models API's answer (``BetaModelInfo`` as JSON) read into the model's profile: what
    it does not say (an older server without ``capabilities``; system messages, prices, which
    it never says) stays the table's, except on-demand compaction, which is never assumed."""
    table = builtin_profile(model)
    caps = info.get("capabilities")
    profile = replace(
        table,
        on_demand_compaction=False,
        max_output_tokens=_positive(info.get("max_tokens")) or table.max_output_tokens,
        context_window=_positive(info.get("max_input_tokens")) or table.context_window,
        source="models_api",
        lifecycle=lifecycle_from_info(info),
    )
    if not isinstance(caps, Mapping):
        return profile
    thinking = caps.get("thinking")
    types_info = thinking.get("types") if isinstance(thinking, Mapping) else None
    if _supported(thinking) and isinstance(types_info, Mapping):
        types = frozenset(kind for kind in THINKING_TYPES if _supported(types_info.get(kind)))
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
    return replace(
        profile,
        thinking_types=types,
        thinks_by_default=thinks_by_default(types, table.signed_thinking),
        effort_levels=efforts,
        on_demand_compaction=on_demand,
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


def fetch_capabilities(model: str, client: anthropic.Anthropic) -> ModelProfile:
    """Ask the Models API about ``model``; raises a one-line :class:`ModelError` when it
    cannot answer (unknown model, no key, unreachable, Bedrock)."""
    with _asking_about(model, client):
        info = _lookup_client(client).beta.models.retrieve(model, betas=[ON_DEMAND_COMPACTION_BETA])
    return capabilities_from_info(model, info.model_dump(mode="json"))


async def afetch_capabilities(model: str, client: anthropic.AsyncAnthropic) -> ModelProfile:
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
    capabilities: ModelProfile
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

    def put(self, model: str, fetched: ModelProfile | ModelError) -> _Known:
        if isinstance(fetched, ModelError):
            known = _Known(builtin_profile(model), str(fetched), fetched.status_code)
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
    return caps.context_window, caps.max_output_tokens
