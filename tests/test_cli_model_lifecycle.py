"""A model's life as the Models API says it (``lifecycle``, ``deprecated_at``, ``retires_at`` of
``GET /v1/models/{id}``), through the real CLI against the test server: a deprecated model said
once, in one line, with its date (at start-up when the API was asked then, else after the first
request on it, ``/model`` included); a retired one refused before anything is sent."""

from __future__ import annotations

import json

import pytest
from fake_api import ModelSpec, text_reply
from support.cli import CLI

from agentloop._cli.model_check import DeprecationNotices, deprecation
from agentloop._sessions import default_store_path

OLD = "claude-older-4-9"
"""A model the SDK's table does not list: only the Models API can say it is deprecated."""
LINE = (
    f"agentloop: warning: {OLD} is deprecated (the Models API): it retires on 2099-01-31 "
    "(a current model: -m, or /model in a session)"
)


def _deprecated(cli: CLI, name: str = OLD) -> None:
    cli.fake_api.models[name] = ModelSpec(
        name,
        200_000,
        64_000,
        lifecycle="deprecated",
        deprecated_at="2026-10-01T00:00:00Z",
        retires_at="2099-01-31T00:00:00Z",
    )


def _said(err: str) -> list[str]:
    return [" ".join(line.split()) for line in err.splitlines() if "deprecated" in line]


def test_the_models_api_answers_the_lifecycle(cli: CLI) -> None:
    import urllib.request

    _deprecated(cli)

    def get(name: str) -> dict[str, object]:
        url = f"{cli.fake_api.base_url}/v1/models/{name}"
        request = urllib.request.Request(url, headers={"x-api-key": "test-key"})
        with urllib.request.urlopen(request) as answer:
            info: dict[str, object] = json.load(answer)
        return info

    info = get(OLD)
    assert (info["lifecycle"], info["deprecated_at"], info["retires_at"]) == (
        "deprecated",
        "2026-10-01T00:00:00Z",
        "2099-01-31T00:00:00Z",
    )
    current = get("claude-sonnet-5-5")
    assert (current["lifecycle"], current["deprecated_at"], current["retires_at"]) == (
        "active",
        None,
        None,
    )


def test_a_model_the_models_api_marks_deprecated_is_said_once_at_start_up(cli: CLI) -> None:
    _deprecated(cli)
    cli.script.add(text_reply("one"), text_reply("two"))
    run = cli.run("-m", OLD, stdin="first\nsecond\n/model\n")
    assert run.code == 0, run.err
    assert _said(run.err) == [LINE]
    (default_store_path().parent / "models.json").unlink()  # asked again at start-up
    quiet = cli.run("-m", OLD, stdin="")  # no message: said at start-up all the same
    assert _said(quiet.err) == [LINE]


def test_from_the_cache_it_is_said_after_the_first_request_asked_the_api(cli: CLI) -> None:
    _deprecated(cli)
    cli.script.add(text_reply("one"), text_reply("two"), text_reply("three"))
    assert cli.run("-m", OLD, "-p", "hello").code == 0
    assert (default_store_path().parent / "models.json").exists()  # its limits are cached now

    quiet = cli.run("-m", OLD, stdin="")  # the limits cached: nothing asked, nothing known
    assert _said(quiet.err) == []
    run = cli.run("-m", OLD, stdin="first\nsecond\n")
    assert run.code == 0, run.err
    assert _said(run.err) == [LINE]  # after the first request asked; once, though two ran
    printed = cli.run("-m", OLD, "-p", "and in print mode")
    assert _said(printed.err) == [LINE]


def test_switching_to_it_with_model_says_it_once(cli: CLI) -> None:
    _deprecated(cli)
    cli.script.add(text_reply("on the current one"), text_reply("on the old"), text_reply("x"))
    run = cli.run(stdin=f"hello\n/model {OLD}\nand now\nagain\n")
    assert run.code == 0, run.err
    assert _said(run.err) == [LINE]
    assert [body["model"] for body in cli.script.conversation] == [
        "claude-sonnet-5-5",
        OLD,
        OLD,
    ]


def test_a_current_model_says_nothing(cli: CLI) -> None:
    cli.script.add(text_reply("one"))
    run = cli.run("-m", "claude-haiku-4-5", stdin="first\n")
    assert run.code == 0, run.err
    assert _said(run.err) == []


def test_a_retired_model_is_refused_before_anything_is_sent(cli: CLI) -> None:
    cli.fake_api.models[OLD] = ModelSpec(
        OLD, 200_000, 64_000, lifecycle="retired", deprecated_at="2026-01-05T00:00:00Z"
    )
    run = cli.run("-m", OLD, stdin="hello\n")
    assert run.code == 2
    assert run.err.strip().splitlines() == [
        f"agentloop: error: the Models API marks {OLD} retired (2026-01-05): requests to it "
        "fail: choose another with -m (default claude-sonnet-5-5)"
    ]
    assert cli.fake_api.message_requests == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK's own, on each request
def test_the_sdk_and_the_api_both_marking_it_say_it_once(cli: CLI) -> None:
    _deprecated(cli, "claude-sonnet-4-5")
    cli.script.add(text_reply("one"), text_reply("two"))
    run = cli.run("-m", "claude-sonnet-4-5", stdin="first\nsecond\n")
    assert run.code == 0, run.err
    (line,) = _said(run.err)
    assert "the Models API" in line and "2099-01-31" in line  # the live word, not the table's


def test_the_wording_of_each_stage() -> None:
    from datetime import date

    from agentloop._adapters.anthropic_capabilities import ModelLifecycle

    today = date(2026, 11, 29)
    overdue = ModelLifecycle("deprecated", "2026-01-01", "2026-06-30")
    assert deprecation("m", overdue, today=today) == (
        "m is deprecated (the Models API): its retirement, set for 2026-06-30, is overdue "
        "(a current model: -m, or /model in a session)"
    )
    unset = ModelLifecycle("deprecated", "2026-10-01")
    assert deprecation("m", unset, today=today) == (
        "m is deprecated since 2026-10-01 (the Models API; no retirement date is set yet) "
        "(a current model: -m, or /model in a session)"
    )
    assert deprecation("m", ModelLifecycle("retired", "2026-01-01", "2026-06-30")) == (
        "m is retired since 2026-06-30 (the Models API): requests to it fail "
        "(a current model: -m, or /model in a session)"
    )
    assert deprecation("m", ModelLifecycle("active"), today=today) is None
    notices = DeprecationNotices(lambda name: None)
    assert notices.line("m") is None  # nothing known yet: asked again later
    answers = {"m": overdue}
    notices = DeprecationNotices(answers.get)
    assert notices.line("m") is not None
    assert notices.line("m") is None  # once


def test_resuming_a_session_whose_model_has_retired_continues_on_the_default(cli: CLI) -> None:
    cli.fake_api.models[OLD] = ModelSpec(OLD, 200_000, 64_000)
    cli.script.add(text_reply("on the old one"), text_reply("on the default"))
    assert cli.run("-m", OLD, "-p", "hello").code == 0
    cli.fake_api.models[OLD] = ModelSpec(
        OLD, 200_000, 64_000, lifecycle="retired", retires_at="2026-11-01T00:00:00Z"
    )
    (default_store_path().parent / "models.json").unlink()  # the week's cache is over

    run = cli.run("-c", "-p", "still there?")
    assert run.code == 0, run.err
    assert (
        f"agentloop: warning: the Models API marks {OLD} retired (2026-11-01): requests to it "
        "fail: the session ran on it; continuing on claude-sonnet-5-5"
    ) in " ".join(run.err.split())
    assert cli.script.conversation[-1]["model"] == "claude-sonnet-5-5"
