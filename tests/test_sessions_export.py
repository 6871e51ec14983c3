"""``agentloop sessions export`` (``_cli/conversation_export``) against the fake Messages API:
every session of the conversation written once, in order, to where resuming continues; a
compacted conversation's summary shown once and its kept tail not repeated; the Markdown title
escaped like the body."""

from __future__ import annotations

import io
import json
from pathlib import Path

from fake_api import text_reply
from support.cli import CLI, WINDOW, conversation_lines
from support.compacted_runs import OLDER, undone
from support.loop_scripts import filler

from agentloop._cli.conversation_export import export_conversation
from sessions import NewMessage, open_store


def test_export_writes_every_session_of_the_conversation_once_in_order(cli: CLI) -> None:
    parent, _, branch = undone(cli)

    markdown = cli.run("sessions", "export", parent[:8])
    as_json = cli.run("sessions", "export", parent[:8], "--json")
    as_format = cli.run("sessions", "export", parent[:8], "--format", "json")

    assert markdown.code == as_json.code == as_format.code == 0, markdown.err + as_json.err
    # From the first session to where resuming continues (the branch the undo made).
    sessions = [s["id"] for s in json.loads(as_json.out)["sessions"]]
    assert sessions == [parent, branch] and json.loads(as_format.out) == json.loads(as_json.out)
    text = markdown.out
    for n in range(4):  # every request said, once, in order
        assert text.count(f"\n\nrequest {n}: alpha") == 1, n  # a message, not the title
    assert (
        text.index("request 0: alpha") < text.index("request 3: alpha") < text.index("keep going")
    )
    assert f"A branch of `{parent[:8]}`" in text
    said = json.loads(as_json.out)["messages"]
    assert said == sum(len(s["messages"]) for s in json.loads(as_json.out)["sessions"]) == 10


def test_export_of_a_compacted_conversation_shows_the_summary_once(cli: CLI) -> None:
    for n in range(4):
        cli.script.add(text_reply(filler(f"answer {n}", 200)))
    stdin = "\n".join([*conversation_lines(4, 200), "/compact", "after the compaction"])
    assert cli.run(*OLDER, "--context-window", WINDOW, stdin=stdin).code == 0
    with cli.store() as store:
        (newest,) = store.list_sessions(limit=1)
        total = len(store.get_messages(newest.parent_id or "")) + 2

    run = cli.run("sessions", "export", newest.id[:8])

    assert run.code == 0, run.err
    assert run.out.count("### #") == total  # the parent's 8, then the 2 said after it
    assert "The conversation was compacted 8 →" in run.out
    assert "(the compacted context)" in run.out and "carried over as said above" in run.out
    assert run.out.count("after the compaction") == 1
    for n in range(4):  # the verbatim tail is not written twice
        assert run.out.count(f"\n\nrequest {n}: alpha") == 1, n


def test_the_export_escapes_the_title_like_the_body(tmp_path: Path) -> None:
    title = "Why <summary> vanished in `<b>` and issue #"
    with open_store(tmp_path / "s.db") as store:
        session = store.create_session(model="m", workspace="/w", title=title)
        store.append_messages(
            session.id, [NewMessage(role="user", content=[{"type": "text", "text": title}])]
        )
        out = io.StringIO()
        export_conversation(store, out, session.id)
    heading, *_ = out.getvalue().splitlines()
    assert heading == "# Why &lt;summary> vanished in `<b>` and issue \\#"
    # The body's own text is escaped the same way.
    assert "Why &lt;summary> vanished in `<b>`" in out.getvalue().split("### #1 User")[1]
