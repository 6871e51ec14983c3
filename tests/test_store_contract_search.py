"""The store contract, part six: full-text search over stored messages.

Written once against the ``SessionStore`` protocol; runs against every backend in
``store_contract.BACKENDS``. The index's upkeep is checked in the index table itself (a stale
row would not show in results, which are joined to the messages): rows come with the messages,
in their transaction, and go with them whatever deletes them.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import support.store_contract as store_contract
from support.store_contract import (
    Clock,
    StoreFactory,
    assistant,
    call,
    compacted_conversation,
    index_rows,
    result,
    user,
)

from sessions import (
    NewMessage,
    SearchQueryError,
    SessionNotFoundError,
    SessionStore,
    copy_store,
    open_store,
)

store_factory = store_contract.store_factory
store = store_contract.store


# ------------------------------------------------------------------ what is found, and where


def test_a_detail_only_the_compacted_root_holds_is_found_from_the_newest_child(
    store: SessionStore,
) -> None:
    root, _, grandchild = compacted_conversation(store)
    (hit,) = store.search_messages("deploy key", session_id=grandchild)
    assert (hit.session_id, hit.seq, hit.role, hit.tool_name) == (root, 0, "user", None)
    assert "ORCHID-7" in hit.excerpt
    assert hit.root_id == root and hit.title == "deploying" and hit.workspace == "/w"
    stored = store.get_messages(root)[0]
    assert hit.created_at == stored.created_at
    # Case and punctuation do not matter; a path's parts are words.
    assert [h.seq for h in store.search_messages("orchid 7", session_id=grandchild)] == [0]
    assert [h.seq for h in store.search_messages("KEYS.PY", session_id=root)] == [0]


def test_tool_inputs_and_results_are_searched_and_named(store: SessionStore) -> None:
    root, child, _ = compacted_conversation(store)
    (output,) = store.search_messages("heliotrope", session_id=child)
    assert (output.session_id, output.seq, output.role) == (root, 2, "user")
    assert output.tool_name == "run_command"  # from the call in the message before
    assert "signed_by = 'HELIOTROPE'" in output.excerpt
    (command,) = store.search_messages("release toml", session_id=child)
    assert (command.seq, command.role, command.tool_name) == (1, "assistant", "run_command")
    assert command.excerpt == "cat config/release.toml"
    # The tool's name is searchable too.
    assert {h.seq for h in store.search_messages("run command", session_id=root)} == {1}


def test_words_of_any_script_numbers_and_parts_of_identifiers_are_found(
    store: SessionStore,
) -> None:
    session = store.create_session(model="m", workspace="/w")
    said = "Naïve café in 東京: see https://example.com/a_b?x=1 and v2.10.3, 1e5, -42, a.b@c.de"
    store.append_messages(session.id, [user(said), user("nothing here")])
    for query in (
        "naïve",
        "CAFÉ",
        "東京",
        "example com",
        "b",
        "v2 10 3",
        "1e5",
        "42",
        "c de",
        "caf*",
    ):
        hits = store.search_messages(query, session_id=session.id)
        assert [h.seq for h in hits] == [0], query
    assert store.search_messages("cafe", session_id=session.id) == []  # accents count


def test_only_the_conversations_lineage_is_searched(store: SessionStore) -> None:
    root, child, grandchild = compacted_conversation(store)
    other = store.create_session(model="m", workspace="/w")
    store.append_messages(other.id, [user("Another deploy key: ORCHID-8, unrelated.")])
    fork = store.create_session(model="m", workspace="/w", parent_id=child)
    store.append_messages(fork.id, [user("In a branch: orchid again.")])

    found = store.search_messages("orchid", session_id=grandchild, limit=50)
    assert {h.root_id for h in found} == {root}
    assert other.id not in {h.session_id for h in found}
    assert {h.session_id for h in found} == {root, fork.id}  # the lineage: every branch
    assert [h.session_id for h in store.search_messages("orchid", session_id=other.id)] == [
        other.id
    ]
    with pytest.raises(SessionNotFoundError):
        store.search_messages("orchid", session_id="zzzz")


def test_workspace_scope_follows_the_conversations_head_and_none_searches_all(
    store: SessionStore,
) -> None:
    root, _, _ = compacted_conversation(store, workspace="/a")
    elsewhere = store.create_session(model="m", workspace="/b")
    store.append_messages(elsewhere.id, [user("orchid in b")])
    assert {h.workspace for h in store.search_messages("orchid", workspace="/a")} == {"/a"}
    again = store.create_session(model="m", workspace="/a")
    store.append_messages(again.id, [user("orchid again in a")])
    in_a = store.search_messages("orchid", workspace="/a", limit=50)
    assert {h.root_id for h in in_a} == {root, again.id}
    assert {h.workspace for h in store.search_messages("orchid", workspace="/b")} == {"/b"}
    assert store.search_messages("orchid", workspace="/c") == []
    assert {h.workspace for h in store.search_messages("orchid")} == {"/a", "/b"}


def test_every_word_must_match_unless_any_term_and_a_star_is_a_prefix(
    store: SessionStore,
) -> None:
    root, _, _ = compacted_conversation(store)
    assert store.search_messages("orchid zebra", session_id=root) == []
    assert [h.seq for h in store.search_messages("orchid zebra", session_id=root, any_term=True)]
    assert store.search_messages("orch", session_id=root) == []
    assert [h.seq for h in store.search_messages("orch*", session_id=root)] == [0]
    # Words FTS5 or tsquery would read as operators are plain words here.
    assert store.search_messages("key AND OR NOT NEAR", session_id=root) == []
    head = store.newest_descendant(root).id
    store.append_messages(head, [user("an AND, an OR, a NOT and a NEAR: the key")])
    assert [h.session_id for h in store.search_messages("key AND OR NOT NEAR", session_id=root)]
    for nothing in ("", "   ", "!!! ---", "*"):
        with pytest.raises(SearchQueryError, match="nothing to search for"):
            store.search_messages(nothing, session_id=root)
    with pytest.raises(ValueError):
        store.search_messages("orchid", limit=0)


def test_best_match_first_and_the_limit_holds(store: SessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    filler = " ".join(f"word{n}" for n in range(200))
    store.append_messages(
        session.id,
        [user(f"{filler} granite"), assistant("granite granite granite, all granite")]
        + [user(f"granite mention {n} {filler}") for n in range(12)],
    )
    hits = store.search_messages("granite", session_id=session.id, limit=5)
    assert len(hits) == 5
    assert hits[0].seq == 1  # the short message that is all about it


def test_excerpts_are_one_line_around_the_match_and_bounded(store: SessionStore) -> None:
    session = store.create_session(model="m", workspace="/w")
    before = " ".join(f"early{n}" for n in range(400))
    after = " ".join(f"late{n}" for n in range(400))
    store.append_messages(session.id, [user(f"{before}\n\n  the  NEEDLE\tis here\n{after}")])
    for width in (40, 120, 300):
        (hit,) = store.search_messages("needle", session_id=session.id, excerpt_chars=width)
        assert "NEEDLE is here" in hit.excerpt
        assert "\n" not in hit.excerpt and "\t" not in hit.excerpt
        assert hit.excerpt.startswith("…") and hit.excerpt.endswith("…")
        assert len(hit.excerpt) <= width + 2


def test_a_message_copied_into_later_sessions_is_shown_once_where_it_was_said(
    store: SessionStore,
) -> None:
    root = store.create_session(model="m", workspace="/w")
    store.append_messages(root.id, [user("first"), assistant("the tail says TURQUOISE")])
    tail = store.get_messages(root.id)[1:]
    child = store.transition(
        root.id, messages=[user("summary"), *[m.to_new() for m in tail]], strategy="summarize"
    )
    fork = store.create_session(model="m", workspace="/w", parent_id=child.id)
    store.append_messages(fork.id, [m.to_new() for m in store.get_messages(child.id)])
    (hit,) = store.search_messages("turquoise", session_id=fork.id)
    assert (hit.session_id, hit.seq) == (root.id, 1)


def test_excluded_tools_calls_and_results_are_not_shown(store: SessionStore) -> None:
    root, _, grandchild = compacted_conversation(store)
    store.append_messages(
        grandchild,
        [
            user("what was the key?"),
            call("toolu_9", "search_history", query="orchid"),
            result("toolu_9", "1 match: The deploy key is called ORCHID-7"),
        ],
    )
    everything = store.search_messages("orchid", session_id=root)
    assert {h.tool_name for h in everything} == {None, "search_history"}
    (hit,) = store.search_messages("orchid", session_id=root, exclude_tools={"search_history"})
    assert (hit.session_id, hit.seq) == (root, 0)


def test_redact_runs_on_the_whole_text_before_the_excerpt_is_cut(store: SessionStore) -> None:
    secret = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"
    session = store.create_session(model="m", workspace="/w")
    store.append_messages(session.id, [user(f"the token below {secret} " + "pad " * 100)])

    def redact(text: str) -> str:
        return text.replace(secret, "[redacted $TOKEN]")

    cut_inside = 0
    for width in range(30, 70, 3):
        (plain,) = store.search_messages("token below", session_id=session.id, excerpt_chars=width)
        cut_inside += "sk-live-0123" in plain.excerpt and secret not in plain.excerpt
        (hit,) = store.search_messages(
            "token below", session_id=session.id, excerpt_chars=width, redact=redact
        )
        assert "sk-live-0123" not in hit.excerpt, width
        assert "token below" in hit.excerpt
    assert cut_inside  # some of these windows end inside the secret


# ------------------------------------------------------------------ the index's upkeep


def test_the_index_holds_one_row_per_message_with_words(store: SessionStore) -> None:
    compacted_conversation(store)
    empty = store.create_session(model="m", workspace="/w")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A"}}
    store.append_messages(empty.id, [NewMessage(role="user", content=[image])])
    words = sum(len(store.get_messages(s.id)) for s in store.list_sessions(limit=None))
    assert index_rows(store) == words - 1  # the image alone holds no word


def test_a_long_append_is_indexed_whole(store: SessionStore) -> None:
    # More messages than one index statement takes (they are written in batches).
    session = store.create_session(model="m", workspace="/w")
    store.append_messages(session.id, [user(f"note {n} of the log") for n in range(449)])
    store.append_messages(session.id, [user("first"), *[user("filler")] * 449, user("LAST 450")])
    assert index_rows(store) == 900
    found = store.search_messages("last 450", session_id=session.id)
    assert [(h.seq, h.excerpt) for h in found] == [(899, "LAST 450")]
    assert [h.seq for h in store.search_messages("note 448")] == [448]


def test_delete_and_prune_remove_the_index_rows_of_what_they_delete(
    store_factory: StoreFactory,
) -> None:
    clock = Clock()
    store = store_factory.open(clock=clock)
    root, _, grandchild = compacted_conversation(store)
    before = index_rows(store)
    leaf_messages = len(store.get_messages(grandchild))
    store.delete_session(grandchild)
    assert index_rows(store) == before - leaf_messages
    store.delete_session(root, lineage=True)
    assert index_rows(store) == 0
    # A new message may reuse a deleted row's id: it must not inherit that row's words.
    again = store.create_session(model="m", workspace="/w")
    store.append_messages(again.id, [user("plain words")])
    assert store.search_messages("orchid") == []

    compacted_conversation(store)
    clock.now += timedelta(days=40)
    kept = store.create_session(model="m", workspace="/w")
    store.append_messages(kept.id, [user("recent orchid")])
    assert store.prune(older_than=timedelta(days=30)) == 4
    assert index_rows(store) == 1
    assert [h.session_id for h in store.search_messages("orchid")] == [kept.id]


def test_a_failed_transition_leaves_no_index_rows(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_factory.open()
    root = store.create_session(model="m", workspace="/w")
    store.append_messages(root.id, [user("before"), assistant("reply")])
    before = index_rows(store)
    store_factory.fail_inside_transitions(monkeypatch)
    with pytest.raises(store_contract.InjectedFault):
        store.transition(root.id, messages=[user("SAPPHIRE summary")], strategy="summarize")
    monkeypatch.undo()
    assert index_rows(store) == before
    assert store.search_messages("sapphire") == []


def test_a_copied_store_is_searchable(store: SessionStore, tmp_path: Path) -> None:
    root, _, grandchild = compacted_conversation(store)
    with open_store(tmp_path / "copy.db") as target:
        copy_store(store, target)
        (hit,) = target.search_messages("orchid", session_id=grandchild)
        assert (hit.session_id, hit.seq) == (root, 0)
        assert index_rows(target) == index_rows(store)
        copy_store(store, target)  # idempotent: nothing indexed twice
        assert index_rows(target) == index_rows(store)
