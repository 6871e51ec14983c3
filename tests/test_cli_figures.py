"""One rule for every token figure: a figure the API counted is shown bare, any other
(partly or wholly a local estimate, or of a compaction stored before sources were kept) with
``~`` — on the compaction notice, ``sessions tree``/``show``/``export``, ``/context``,
``/compact --dry-run``, the status line, the model's ``context_status`` and in JSON (a source
field beside each figure)."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fake_api import text_reply
from support.cli import CLI, WINDOW, conversation_lines
from support.loop_scripts import filler

from agentloop._adapters.records import fork_session
from agentloop._cli import list_commands, transcript
from agentloop._cli.printmode import compaction_json
from agentloop._cli.ui import indicator, notice, plan_report
from agentloop._core.compaction.results import (
    CompactionPlan,
    CompactionSummary,
    CompactionTransition,
)
from agentloop._core.measuring.context import CompactionDecision, ContextUsage
from agentloop._core.measuring.figures import TOKEN_SOURCES, percent_figure, token_figure
from agentloop._loop.context_tools import ContextStatusTool
from sessions import NewMessage, open_store

FIGURES = re.compile(r"\((~?[\d,]+) → (~?[\d,]+) tokens\)")


def test_the_rule() -> None:
    assert token_figure(17194, "api") == "17,194"
    for source in ("api+estimate", "estimate", None):
        assert token_figure(17194, source) == "~17,194"
    assert percent_figure(0.354, "api") == "35%"
    assert percent_figure(0.354, "api+estimate") == "~35%"


# -- end to end: the notice, the tree, show, export, JSON, /context, the dry-run ----------------


def test_every_surface_shows_a_compaction_s_figures_alike(cli: CLI, workspace: Path) -> None:
    lines = conversation_lines(9)
    for n in range(len(lines)):
        cli.script.add(text_reply(filler(f"answer {n}", 300)))
    cli.fake_api.context_window = int(WINDOW)
    stdin = "\n".join(["/context", *lines, "/context", "/compact --dry-run"]) + "\n"

    run = cli.run("--context-window", WINDOW, stdin=stdin)

    assert run.code == 0, run.err
    assert run.notices, run.err
    # /context before any reply measures an estimate, and marks it; after a reply, the API's.
    contexts = [line for line in run.err.splitlines() if line.startswith("Context: ")]
    assert len(contexts) == 2
    first = re.fullmatch(
        r"Context: ~[\d,]+ / 6,000 tokens \(~\d+%\), measured from estimate", contexts[0]
    )
    assert first, contexts[0]
    last = re.fullmatch(
        r"Context: ([\d,~]+) / 6,000 tokens \((~?\d+)%\), measured from (\S+)", contexts[1]
    )
    assert last, contexts[1]
    assert last.group(1).startswith("~") == (last.group(3) != "api")
    assert last.group(2).startswith("~") == (last.group(3) != "api")
    # The dry-run's "now" is that same figure, marked the same way.
    now = re.search(r"\bnow (~?[\d,]+)[;)]", run.err.split("Compaction preview")[1])
    assert now and now.group(1) == last.group(1), run.err

    with cli.store() as store:
        lineage = store.lineage(store.get_session(run.notices[-1]["child"]).id)
    root = lineage[0].id
    tree = cli.run("sessions", "tree", root)
    assert tree.code == 0, tree.err
    tree_json = json.loads(cli.run("sessions", "tree", root, "--json").out)
    by_child: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any]) -> None:
        if node["compaction"] is not None:
            by_child[node["id"]] = node["compaction"]
        for child in node["children"]:
            walk(child)

    walk(tree_json)
    for shown in run.notices:
        child = next(s.id for s in lineage if s.id.startswith(shown["child"]))
        figures = f"({shown['before']} → {shown['after']} tokens)"
        # The notice's figures, character for character, on every surface.
        (row,) = [line for line in tree.out.splitlines() if line.startswith(shown["child"])]
        assert figures in row, (figures, row)
        show = cli.run("sessions", "show", child)
        (compacted,) = [line for line in show.out.splitlines() if line.startswith("Compacted")]
        assert figures in compacted
        export = cli.run("sessions", "export", child)
        section = export.out.split(f"## Session `{child[:8]}`")[1]  # the whole conversation
        assert section.split("\n")[2].startswith(
            f"The conversation was compacted {shown['count']} →"
        )
        assert figures in section.split("\n")[2]
        # JSON: the numbers and their sources.
        entry = by_child[child]
        assert entry["tokens_before"] == int(shown["before"].strip("~").replace(",", ""))
        assert (entry["tokens_before_source"] == "api") == (not shown["before"].startswith("~"))
        assert (entry["tokens_after_source"] == "api") == (not shown["after"].startswith("~"))
        assert entry["tokens_after_source"] == "api"  # the fake API counted the child
        assert entry["tokens_before_source"] in ("api+estimate", "estimate")
        history = json.loads(cli.run("sessions", "show", child, "--json").out)["compaction"]
        (same,) = [e for e in history["history"] if e["child_id"] == child]
        assert same == entry


# -- stored figures: what is recorded, what an old record shows --------------------------------


def _transition(before: str, after: str, *, parent: str, child: str) -> CompactionTransition:
    summary = CompactionSummary(
        original_message_count=2,
        compacted_message_count=2,
        tokens_before=17194,
        tokens_after=8988,
        tokens_before_source=before,
        tokens_after_source=after,
        summary="s",
        strategy="summarize",
        model="m",
        created_at=datetime.now(UTC),
    )
    return CompactionTransition(
        original_session_id=parent, new_session_id=child, compacted_messages=[], summary=summary
    )


def test_a_compaction_stores_its_sources_and_an_old_one_shows_as_estimated(
    tmp_path: Path,
) -> None:
    from agentloop._adapters.records import perform_store_effect
    from agentloop._core.compaction.effects import SaveTransition
    from agentloop._core.values.messages import Message

    with open_store(tmp_path / "s.db") as store:
        root = store.create_session(model="m", workspace="/w", title="t")
        store.append_messages(
            root.id, [NewMessage(role="user", content=[{"type": "text", "text": "hi"}])]
        )
        # A compaction of an older version: the numbers only.
        old = store.transition(
            root.id,
            messages=[NewMessage(role="user", content=[{"type": "text", "text": "hi"}])],
            strategy="summarize",
            tokens_before=17194,
            tokens_after=8988,
        )
        # One recorded now, through the store effect the loop uses.
        transition = _transition("api", "api", parent=old.id, child="n" * 26)
        transition = transition.model_copy(update={"compacted_messages": [Message.user("hi")]})
        perform_store_effect(store, SaveTransition(transition=transition, strategy="summarize"))
        new = store.get_session("n" * 26)
        assert new.metadata[TOKEN_SOURCES] == {"tokens_before": "api", "tokens_after": "api"}
        assert TOKEN_SOURCES not in store.get_session(fork_session(store, new.id)).metadata

        text, as_json = io.StringIO(), io.StringIO()
        list_commands.tree_command(store, text, root.id)
        list_commands.tree_command(store, as_json, root.id, as_json=True)
        shown = io.StringIO()
        transcript.show_command(store, shown, old.id, as_json=True)
    rows = text.getvalue().splitlines()
    (old_row,) = [row for row in rows if row.startswith(old.id[:8])]
    (new_row,) = [row for row in rows if row.startswith("nnnnnnnn")]
    assert "(~17,194 → ~8,988 tokens)" in old_row  # nothing vouches it was counted
    assert "(17,194 → 8,988 tokens)" in new_row
    node = json.loads(as_json.getvalue())["children"][0]
    assert node["compaction"]["tokens_before_source"] is None
    assert node["compaction"]["tokens_after_source"] is None
    assert node["children"][0]["compaction"]["tokens_after_source"] == "api"
    history = json.loads(shown.getvalue())["compaction"]["history"]
    assert [e["tokens_before_source"] for e in history] == [None, "api"]


# -- the live surfaces, one by one ----------------------------------------------------------------


def _decision(source: str) -> CompactionDecision:
    usage = ContextUsage.model_validate({"tokens": 2124, "window": 6000, "source": source})
    return CompactionDecision(
        compact=False, reason="below", usage=usage, trigger_tokens=4800, threshold=0.8
    )


@pytest.mark.parametrize(
    ("source", "mark"), [("api", ""), ("api+estimate", "~"), ("estimate", "~")]
)
def test_the_status_line_the_dry_run_and_context_status_mark_alike(source: str, mark: str) -> None:
    decision = _decision(source)
    assert indicator(decision, enabled=True).startswith(f"context {mark}35% · ")
    plan = CompactionPlan(decision=decision, strategy="summarize", expected_tokens_after=900)
    assert re.search(rf"\bnow {mark}2,124[;)]", plan_report(plan))

    class Owner:
        compacter = None
        last_transition = _transition(source, "api", parent="p" * 26, child="c" * 26)

        def context(self) -> CompactionDecision:
            return decision

        def request_compaction(self, instructions: str | None = None) -> None:
            raise AssertionError

    said = ContextStatusTool(Owner()).run({}).content
    assert f"used: {mark}2,124 tokens" in said
    assert f"({mark}35% used)" in said
    assert f"{mark}17,194 → 8,988 tokens" in said


def test_the_notice_and_the_print_mode_json_carry_the_sources() -> None:
    transition = _transition("api+estimate", "api", parent="p" * 26, child="c" * 26)
    assert notice(transition).endswith("(~17,194 → 8,988 tokens)")
    data = compaction_json(transition)
    assert (data["tokens_before_source"], data["tokens_after_source"]) == ("api+estimate", "api")


@pytest.mark.parametrize(("source", "mark"), [("api", ""), ("estimate", "~")])
def test_the_decision_s_reason_marks_its_figure_too(source: str, mark: str) -> None:
    from agentloop._core.measuring.context import decide

    usage = ContextUsage.model_validate({"tokens": 2124, "window": 6000, "source": source})
    below = decide(usage, threshold=0.8, max_output_tokens=500, message_count=5, safe_boundary=True)
    assert below.reason.startswith(f"{mark}2,124 tokens is below the trigger")
    usage = ContextUsage.model_validate({"tokens": 5900, "window": 6000, "source": source})
    above = decide(usage, threshold=0.8, max_output_tokens=500, message_count=5, safe_boundary=True)
    assert above.reason.startswith(f"{mark}5,900 tokens reached the trigger")


def test_one_more_exchange_never_shows_fewer_tokens_than_the_notice(cli: CLI) -> None:
    for n in range(8):
        cli.script.add(text_reply(filler(f"answer {n}", 250)))
    stdin = [*conversation_lines(6, 250), "/compact", "one more question", "/context"]

    run = cli.run("--context-window", "16000", stdin="\n".join(stdin))

    assert run.code == 0, run.err
    (notice,) = run.notices
    after = int(notice["after"].strip("~").replace(",", ""))
    shown = re.search(r"^Context: ~?([\d,]+) / ", run.err, re.MULTILINE)
    assert shown is not None
    assert int(shown[1].replace(",", "")) > after
