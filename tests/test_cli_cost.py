"""What a session costs, through the command line: a long coding session on the test
server that bills like the prompt cache, ``/cost``, the JSON result, ``sessions show``, the price
table and its override, and ``--compaction-model``."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from fake_api import Bill, billed_ratio, text_reply, tool_reply
from support.cli import CLI, conversation_lines
from support.loop_scripts import filler, is_summary_request
from transcripts.code import source_for

from agentloop import Usage
from agentloop._core.compaction.summary import SUMMARIZER_SYSTEM
from agentloop._core.measuring.pricing import Price, bill, parse_prices, price_of
from agentloop._errors import ConfigurationError

WINDOW = "60000"


def write_sources(workspace: Path, count: int, size: int = 10_000) -> list[str]:
    rng = random.Random(7)
    paths = []
    for n in range(count):
        path = f"src/app/module_{n}.py"
        target = workspace / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source_for(rng, path, size))
        paths.append(path)
    return paths


def script_coding_session(cli: CLI, turns: int) -> list[str]:
    """``turns`` requests; every other one reads a file (about 2.5k tokens) before answering."""
    paths = write_sources(cli.workspace, turns // 2)
    lines = []
    for n in range(turns):
        lines.append(filler(f"request {n}", 60))
        if n % 2:
            cli.script.add(tool_reply(("read_file", {"path": paths[n // 2]}), text="Reading."))
        cli.script.add(text_reply(filler(f"answer {n}", 80)))
    return lines


def bills_of(cli: CLI) -> tuple[list[Bill], list[Bill]]:
    bills = list(cli.fake_api.bills)
    # A summary request: agentloop's own, or an on-demand compaction request.
    summaries = [b for b in bills if is_summary_request(b.body) or b.body.get("compaction")]
    return bills, summaries


@pytest.mark.heavy
def test_a_sixty_turn_session_through_the_cli_is_billed_like_a_cached_agent(cli: CLI) -> None:
    lines = script_coding_session(cli, 60)
    cli.fake_api.context_window = int(WINDOW)

    run = cli.run(
        "--context-window",
        WINDOW,
        "--compaction-strategy",
        "summarize",
        stdin="\n".join([*lines, "/cost"]) + "\n",
    )

    assert run.code == 0, run.err
    assert len(run.notices) >= 2, run.err
    bills, summaries = bills_of(cli)
    # No summarizer call at the trigger: every summary was prepared in the background (one
    # request, and a refresh where the conversation grew far past it), each continuing the
    # cached conversation; one more may have been in flight when the session ended.
    assert run.err.count("note: the summary was prepared in the background") == len(run.notices)
    assert len(summaries) <= 2 * len(run.notices) + 1
    assert all(b.body["system"][0]["text"] != SUMMARIZER_SYSTEM for b in summaries)
    # The bill: about what a caching agent pays, far from uncached; the summaries read the cache.
    assert billed_ratio(bills) <= 0.20, f"billed {billed_ratio(bills):.3f}x"
    assert billed_ratio(summaries) <= 0.35
    # /cost reports the API's figures: the whole conversation is every request the server
    # billed, summaries included (a summary still in flight when /cost ran is not known yet).
    whole = run.err[run.err.index("The whole conversation") :]
    found = re.search(r"cache write ([\d,]+) · cache read ([\d,]+) ", whole)
    assert found is not None, whole
    written, read = (int(found.group(n).replace(",", "")) for n in (1, 2))
    talk = [b for b in bills if b not in summaries]
    assert sum(b.cache_read for b in talk) <= read <= sum(b.cache_read for b in bills)
    assert written == sum(b.cache_write_5m + b.cache_write_1h for b in bills)  # summaries: none
    calls = int(re.search(r"(\d+) summary requests?\)", whole).group(1))  # type: ignore[union-attr]
    assert len(summaries) - 1 <= calls <= len(summaries)
    assert f"The whole conversation ({len(run.notices) + 1} sessions" in run.err


def test_the_json_result_and_sessions_show_carry_the_cost(cli: CLI) -> None:
    cli.script.add(text_reply("hello there"))
    run = cli.run("-p", "say hello", "--output-format", "json")
    assert run.code == 0, run.err
    result = json.loads(run.out)
    (billed,) = cli.fake_api.bills
    session = result["cost"]["session"]
    assert session["input_tokens"] == billed.input_tokens
    assert session["output_tokens"] == billed.output_tokens
    assert session["cache_read_input_tokens"] == billed.cache_read
    assert session["requests"] == 1 and session["summary_requests"] == 0
    usage = Usage(
        input_tokens=billed.input_tokens,
        output_tokens=billed.output_tokens,
        cache_creation_input_tokens=billed.cache_write_5m,
        cache_read_input_tokens=billed.cache_read,
    )
    model = cli.fake_api.requests[-1].body["model"]
    assert session["cost_usd"] == pytest.approx(bill(usage, model).dollars, abs=1e-6)
    assert result["cost"]["conversation"]["cost_usd"] == session["cost_usd"]

    shown = cli.run("sessions", "show", result["session_id"], "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["cost"]["session"] == session
    text = cli.run("sessions", "show", result["session_id"])
    assert f"input {billed.input_tokens:,} · " in text.out
    assert "cache reads" in text.out and "$" in text.out


def test_agentloop_prices_overrides_the_table_and_unknown_models_are_marked(
    cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli.script.add(text_reply("hello there"))
    first = json.loads(cli.run("-p", "say hello", "--output-format", "json").out)
    model = cli.fake_api.requests[-1].body["model"]
    monkeypatch.setenv("AGENTLOOP_PRICES", json.dumps({model: {"input": 300, "output": 1500}}))
    shown = json.loads(cli.run("sessions", "show", first["session_id"], "--json").out)
    # A hundred times the price: a hundred times the dollars, and no estimate.
    assert shown["cost"]["session"]["cost_usd"] == pytest.approx(
        100 * first["cost"]["session"]["cost_usd"], rel=1e-3
    )
    assert shown["cost"]["session"]["cost_is_estimate"] is False

    monkeypatch.setenv("AGENTLOOP_PRICES", "{not json")
    refused = cli.run("sessions", "show", first["session_id"])
    assert refused.code != 0
    (line,) = refused.error_lines()
    assert "prices must be JSON" in line and "Traceback" not in refused.err


def test_prices_by_prefix_family_and_override() -> None:
    assert price_of("claude-sonnet-4-6") == (Price(3.0, 15.0), True)
    assert price_of("claude-haiku-4-5-20251001") == (Price(1.0, 5.0), True)
    # Unknown: its family's price, marked as an estimate; nothing known at all: Sonnet's.
    assert price_of("claude-opus-9") == (Price(5.0, 25.0), False)
    assert price_of("my-model") == (Price(3.0, 15.0), False)
    assert price_of("my-model", {"my-": Price(1.0, 2.0)}) == (Price(1.0, 2.0), True)
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_creation_input_tokens=1_000_000,
        cache_read_input_tokens=1_000_000,
    )
    billed = bill(usage, "claude-sonnet-4-6")
    assert billed.dollars == pytest.approx(3 + 15 + 3.75 + 0.30)
    assert billed.cache_read_share == pytest.approx(1 / 3)
    assert billed.billed_input_ratio == pytest.approx((1 + 1.25 + 0.1) / 3)
    assert parse_prices('{"x": {"input": 1, "output": 2}}') == {"x": Price(1.0, 2.0)}
    for bad in ('["x"]', '{"x": {"input": 1}}', '{"x": {"input": -1, "output": 2}}'):
        with pytest.raises(ConfigurationError, match="prices must be JSON"):
            parse_prices(bad)


def test_compaction_model_writes_the_summary_on_another_model(cli: CLI) -> None:
    lines = [filler(f"request {n}", 300) for n in range(12)]
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 300)))
    cli.fake_api.context_window = 6000

    run = cli.run(
        "--context-window",
        "6000",
        "--compaction-strategy",
        "summarize",
        "--compaction-model",
        "claude-haiku-4-5",
        stdin="\n".join(lines) + "\n",
    )

    assert run.code == 0, run.err
    assert run.notices
    summaries = cli.script.summaries
    assert summaries and all(body["model"] == "claude-haiku-4-5" for body in summaries)
    # Another model cannot read the conversation's cache: it gets the rendered transcript.
    assert all(body["system"][0]["text"] == SUMMARIZER_SYSTEM for body in summaries)
    conversation_models = {body["model"] for body in cli.script.conversation}
    assert "claude-haiku-4-5" not in conversation_models


def test_the_cost_report_puts_one_parenthesis_after_the_conversation(cli: CLI) -> None:
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    stdin = "\n".join([*conversation_lines(4, 200), "/compact", "one more", "/cost"])

    run = cli.run("--context-window", "6000", stdin=stdin)

    assert run.code == 0, run.err
    whole = next(line for line in run.err.splitlines() if line.startswith("The whole"))
    assert re.fullmatch(
        r"The whole conversation \(2 sessions across compactions; \d+ requests, "
        r"1 summary request\):",
        whole,
    ), whole
