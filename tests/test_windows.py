from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentloop._adapters.windows import (
    BUILTIN_LIMITS,
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_OUTPUT_TOKENS,
    ContextWindowResolver,
    ModelLimits,
    base_model_id,
)
from agentloop._errors import ConfigurationError

NOW = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


class FakeApi:
    def __init__(self, answer: tuple[int | None, int | None] | Exception) -> None:
        self.answer = answer
        self.calls: list[str] = []

    def __call__(self, model: str) -> tuple[int | None, int | None]:
        self.calls.append(model)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def cache_path(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "models.json"


def test_explicit_override_wins(cache_path: Path) -> None:
    api = FakeApi((777_000, 32_000))
    resolver = ContextWindowResolver(fetch=api, cache_path=cache_path)
    limits = resolver.resolve("claude-sonnet-4-6", override=150_000)
    assert limits.context_window == 150_000
    assert limits.source == "override"
    assert limits.max_output_tokens == 64_000  # from the table; never above the window
    assert api.calls == []
    assert resolver.resolve("claude-sonnet-4-6", override=10_000).max_output_tokens == 10_000


def test_configured_overrides_apply_to_dated_ids(cache_path: Path) -> None:
    api = FakeApi((777_000, 32_000))
    resolver = ContextWindowResolver(
        fetch=api, cache_path=cache_path, overrides={"claude-haiku-4-5": 123_000}
    )
    assert resolver.resolve("claude-haiku-4-5-20251001").context_window == 123_000
    # An explicit per-call override beats the configured one.
    assert resolver.resolve("claude-haiku-4-5", override=99_000).context_window == 99_000
    assert api.calls == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, "200000", True])
def test_invalid_override_is_a_one_line_configuration_error(cache_path: Path, bad: object) -> None:
    resolver = ContextWindowResolver(fetch=None, cache_path=cache_path)
    with pytest.raises(ConfigurationError) as info:
        resolver.resolve("claude-opus-4-6", override=bad)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    assert "context window" in str(info.value)
    with pytest.raises(ConfigurationError):
        ContextWindowResolver(fetch=None, cache_path=None, overrides={"m": bad})  # type: ignore[dict-item]


def test_fetch_used_once_then_cached_on_disk(cache_path: Path) -> None:
    api = FakeApi((444_000, 55_000))
    resolver = ContextWindowResolver(fetch=api, cache_path=cache_path, clock=Clock())
    first = resolver.resolve("claude-opus-4-6")
    second = resolver.resolve("claude-opus-4-6")
    assert first == second == ModelLimits(444_000, 55_000, "models_api")
    assert api.calls == ["claude-opus-4-6"]

    assert stat.S_IMODE(cache_path.stat().st_mode) == 0o600
    stored = json.loads(cache_path.read_text())
    assert stored["models"]["claude-opus-4-6"]["context_window"] == 444_000
    assert not [p for p in cache_path.parent.iterdir() if p.name != cache_path.name]

    offline = FakeApi(ConnectionError("no network"))
    again = ContextWindowResolver(fetch=offline, cache_path=cache_path, clock=Clock())
    assert again.resolve("claude-opus-4-6") == ModelLimits(444_000, 55_000, "cache")
    assert offline.calls == []


def test_fetch_failure_is_memoized_per_resolver(cache_path: Path) -> None:
    api = FakeApi(RuntimeError("401 no key"))
    resolver = ContextWindowResolver(fetch=api, cache_path=cache_path)
    for _ in range(3):
        assert resolver.resolve("claude-opus-4-6").source == "builtin"
    assert api.calls == ["claude-opus-4-6"]
    assert not cache_path.exists()


def test_stale_cache_entry_is_refreshed(cache_path: Path) -> None:
    clock = Clock()
    ContextWindowResolver(
        fetch=FakeApi((444_000, 55_000)), cache_path=cache_path, clock=clock
    ).resolve("claude-opus-4-6")
    clock.now = NOW + timedelta(days=8)
    fresh = FakeApi((555_000, 66_000))
    limits = ContextWindowResolver(fetch=fresh, cache_path=cache_path, clock=clock).resolve(
        "claude-opus-4-6"
    )
    assert limits == ModelLimits(555_000, 66_000, "models_api")
    assert fresh.calls == ["claude-opus-4-6"]
    # Within the week the refreshed entry is used as is.
    clock.now = NOW + timedelta(days=14)
    unused = FakeApi(AssertionError("should not be asked"))
    assert ContextWindowResolver(fetch=unused, cache_path=cache_path, clock=clock).resolve(
        "claude-opus-4-6"
    ) == ModelLimits(555_000, 66_000, "cache")


def test_stale_cache_beats_builtin_when_api_is_down(cache_path: Path) -> None:
    clock = Clock()
    ContextWindowResolver(
        fetch=FakeApi((444_000, 55_000)), cache_path=cache_path, clock=clock
    ).resolve("claude-opus-4-6")
    clock.now = NOW + timedelta(days=30)
    down = FakeApi(TimeoutError())
    limits = ContextWindowResolver(fetch=down, cache_path=cache_path, clock=clock).resolve(
        "claude-opus-4-6"
    )
    assert limits == ModelLimits(444_000, 55_000, "cache")
    assert down.calls == ["claude-opus-4-6"]


def test_fetch_raising_falls_back_to_builtin(cache_path: Path) -> None:
    resolver = ContextWindowResolver(fetch=FakeApi(ConnectionError()), cache_path=cache_path)
    assert resolver.resolve("claude-sonnet-4-6") == ModelLimits(1_000_000, 64_000, "builtin")
    assert resolver.resolve("claude-haiku-4-5") == ModelLimits(200_000, 64_000, "builtin")


def test_fetch_without_window_is_unavailable(cache_path: Path) -> None:
    resolver = ContextWindowResolver(fetch=FakeApi((None, None)), cache_path=cache_path)
    assert resolver.resolve("claude-opus-4-7").source == "builtin"
    assert not cache_path.exists()


def test_fetch_without_max_tokens_keeps_known_output_limit(cache_path: Path) -> None:
    resolver = ContextWindowResolver(fetch=FakeApi((900_000, None)), cache_path=cache_path)
    assert resolver.resolve("claude-opus-4-7") == ModelLimits(900_000, 128_000, "models_api")


def test_no_fetch_and_no_cache_uses_the_table() -> None:
    resolver = ContextWindowResolver(fetch=None, cache_path=None)
    limits = resolver.resolve("claude-mythos-preview")
    assert limits == ModelLimits(1_000_000, 128_000, "builtin")
    assert limits.warning is None


def test_unknown_model_gets_the_default_and_a_warning(cache_path: Path) -> None:
    resolver = ContextWindowResolver(fetch=FakeApi(KeyError("404")), cache_path=cache_path)
    limits = resolver.resolve("gpt-something")
    assert limits.source == "default"
    assert (limits.context_window, limits.max_output_tokens) == (
        DEFAULT_CONTEXT_WINDOW,
        DEFAULT_MAX_OUTPUT_TOKENS,
    )
    assert limits.warning is not None
    assert "gpt-something" in limits.warning
    assert "\n" not in limits.warning


def test_dated_ids_match_their_base_model(cache_path: Path) -> None:
    resolver = ContextWindowResolver(fetch=None, cache_path=cache_path)
    assert resolver.resolve("claude-haiku-4-5-20251001") == ModelLimits(200_000, 64_000, "builtin")
    assert resolver.resolve("claude-opus-4-6@20260101").source == "builtin"
    assert base_model_id("claude-haiku-4-5-20251001") == "claude-haiku-4-5"
    # A different version number is not a dated id of an older model.
    assert resolver.resolve("claude-opus-5-9").source == "default"
    assert base_model_id("claude-opus-5-5") == "claude-opus-5-5"


def test_every_sdk_model_id_is_in_the_table() -> None:
    from typing import get_args

    from anthropic.types.model import Model

    literal = get_args(Model)[0]
    resolver = ContextWindowResolver(fetch=None, cache_path=None)
    for model in get_args(literal):
        assert resolver.resolve(model).source == "builtin", model
    assert set(BUILTIN_LIMITS) <= set(get_args(literal))


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[]",
        '{"version": 1, "models": []}',
        '{"version": 1, "models": {"claude-opus-4-6": {"context_window": "big"}}}',
        '{"version": 1, "models": {"claude-opus-4-6": {"context_window": 1, "fetched_at": "x"}}}',
        '{"version": 99, "models": {}}',
        "\x00\xff",
    ],
)
def test_corrupt_cache_is_ignored_and_rewritten(cache_path: Path, content: str) -> None:
    cache_path.parent.mkdir(parents=True)
    cache_path.write_text(content, encoding="utf-8", errors="surrogateescape")
    api = FakeApi((333_000, 44_000))
    resolver = ContextWindowResolver(fetch=api, cache_path=cache_path, clock=Clock())
    assert resolver.resolve("claude-opus-4-6") == ModelLimits(333_000, 44_000, "models_api")
    assert api.calls == ["claude-opus-4-6"]
    stored = json.loads(cache_path.read_text())
    assert stored["models"]["claude-opus-4-6"]["context_window"] == 333_000


def test_cache_keeps_other_models(cache_path: Path) -> None:
    ContextWindowResolver(fetch=FakeApi((1, 1)), cache_path=cache_path, clock=Clock()).resolve("a")
    ContextWindowResolver(fetch=FakeApi((2, 2)), cache_path=cache_path, clock=Clock()).resolve("b")
    models = json.loads(cache_path.read_text())["models"]
    assert set(models) == {"a", "b"}


def test_unwritable_cache_never_crashes(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    resolver = ContextWindowResolver(
        fetch=FakeApi((321_000, 12_000)), cache_path=blocker / "models.json"
    )
    assert resolver.resolve("claude-opus-4-6") == ModelLimits(321_000, 12_000, "models_api")
